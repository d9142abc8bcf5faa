"""``objective.config_file``: a script that reads its settings from a file, not from flags.

YOLOv5 reads its hyperparameters from ``--hyp hyp.yaml``; much research code takes ``--config
x.yaml``. With ``config_file: path/to/base.yaml`` every trial gets a copy of that file, with the
trial's values written in (a key's ``flags.keys.<key>.name`` is its path there, dotted for nested
mappings, as nested ``fixed:`` values are), at ``$HPSEARCH_CONFIG_FILE`` in the trial's folder;
the command passes that path (``--hyp $HPSEARCH_CONFIG_FILE``) and gets no flags appended.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import yaml

from hpsearch.trial.command.argv import flattened
from hpsearch.trial.command.style import FlagStyle

SUFFIXES = (".yaml", ".yml", ".json")


def read_base(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The base file's mapping, or why it cannot be one (for a one-line error at load)."""
    if path.suffix.lower() not in SUFFIXES:
        return None, f"must be a YAML or JSON file ({', '.join(SUFFIXES)}), got {path.name}"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return None, f"cannot read {path}: {exc.strerror or exc}"
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        return None, f"{path} does not parse: {str(exc).splitlines()[0]}"
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return None, f"{path} must hold a mapping of settings, it holds a {type(data).__name__}"
    return data, None


def merged(base: dict[str, Any], config: dict[str, Any], style: FlagStyle) -> dict[str, Any]:
    """The base with the trial's values in: nested values by their dotted paths, a key renamed by ``flags.keys``."""
    out = copy.deepcopy(base)
    for key, value in flattened(config):
        if value is None:
            continue
        own = style.keys.get(key)
        *parents, leaf = (own.name if own is not None and own.name else key).split(".")
        node = out
        for part in parents:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[leaf] = value
    return out


def write(base_path: str, config: dict[str, Any], style: FlagStyle, trial_dir: Path) -> Path:
    """The trial's copy of the base file, in its folder: the path ``$HPSEARCH_CONFIG_FILE`` names."""
    path = trial_dir / Path(base_path).name
    base, _ = read_base(Path(base_path))
    data = merged(base or {}, config, style)
    text = json.dumps(data, indent=2) + "\n" if path.suffix.lower() == ".json" else yaml.safe_dump(data, sort_keys=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
