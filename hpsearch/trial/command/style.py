"""How the config becomes the script's arguments: the spec's ``objective.flags``.

Three settings and per-key exceptions::

    flags:
      form: equals        # --name=value (default) | space: --name value | hydra: name=value, +name=value
                          # | pairs: NAME VALUE (yacs: detectron2's SOLVER.BASE_LR 0.01)
      names: keep         # the config key as written (default) | dashes: batch_size -> --batch-size
      booleans: json      # json: --x=true/false (default) | python: True/False | int: 1/0
                          # | store_true: --x or nothing | negatable: --x / --no-x
      keys:               # a key the script spells or takes differently
        lr: {name: optimizer.lr}           # its name in the script ('-x' or '+x': used as written)
        compile: {booleans: python}
        seed: {new: true}                  # hydra: +seed=0 (a key the script's config lacks)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hpsearch.base.text import closest, did_you_mean

FORMS = ("equals", "space", "hydra", "pairs")
DOTTED = ("hydra", "pairs")  # forms whose names are config paths: nested fixed values become dotted keys
NAMES = ("keep", "dashes")
BOOLEANS = ("json", "python", "int", "store_true", "negatable")
VALUED = ("json", "python", "int")  # booleans that pass a value, the only kind a Hydra override has
STYLE_KEYS = ("form", "names", "booleans", "keys")
KEY_KEYS = ("name", "booleans", "new")


@dataclass(frozen=True)
class KeyStyle:
    """One config key's exception to the command's style."""

    name: str | None = None  # the script's name for the key; one starting with '-' or '+' is used as written
    booleans: str | None = None
    new: bool = False  # hydra: +name=value, a key the script's own config does not have


@dataclass(frozen=True)
class FlagStyle:
    form: str = "equals"
    names: str = "keep"
    booleans: str = "json"
    keys: dict[str, KeyStyle] = field(default_factory=dict)

    def key(self, key: str) -> tuple[str, str, bool]:
        """(the name as the script takes it, with its dashes or +; the booleans style; a new Hydra key)."""
        own = self.keys.get(key, KeyStyle())
        booleans = own.booleans or self.booleans
        if own.name is not None and own.name[:1] in ("-", "+"):
            return own.name, booleans, own.new
        name = own.name if own.name is not None else (key.replace("_", "-") if self.names == "dashes" else key)
        if self.form in DOTTED:
            return ("+" if own.new else "") + name, booleans, own.new
        return "--" + name, booleans, own.new

    def to_dict(self) -> dict[str, Any]:
        """Only what differs from the defaults: the stored entry of a plain command stays as it was."""
        out: dict[str, Any] = {}
        for name, default in (("form", "equals"), ("names", "keep"), ("booleans", "json")):
            if getattr(self, name) != default:
                out[name] = getattr(self, name)
        if self.keys:
            out["keys"] = {k: {n: v for n, v in vars(s).items() if v not in (None, False)} for k, s in self.keys.items()}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FlagStyle:
        keys = {k: KeyStyle(**v) for k, v in (data.get("keys") or {}).items()}
        return cls(**{k: v for k, v in data.items() if k != "keys"}, keys=keys)


def _choice(value: Any, allowed: tuple[str, ...], where: str, problems: list[str]) -> str | None:
    if value in allowed:
        return str(value)
    shown = "a YAML boolean" if isinstance(value, bool) else repr(value)
    near = closest(value, allowed) if isinstance(value, str) else None
    problems.append(f"{where}: must be one of {', '.join(allowed)}, got {shown}" + (f"; did you mean {near!r}?" if near else ""))
    return None


def _key_style(key: str, value: Any, form: str, problems: list[str]) -> KeyStyle | None:
    where = f"objective.flags.keys.{key}"
    if not isinstance(value, dict):
        problems.append(f"{where}: must be a mapping such as {{name: optimizer.lr, booleans: store_true, new: true}}")
        return None
    problems.extend(f"{where}.{k}: unknown key{did_you_mean(k, KEY_KEYS)}" for k in value if k not in KEY_KEYS)
    name = value.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip() or any(c.isspace() for c in name)):
        problems.append(f"{where}.name: must be the script's name for the key, without spaces, got {name!r}")
        name = None
    booleans = value.get("booleans")
    if booleans is not None:
        booleans = _choice(booleans, BOOLEANS, f"{where}.booleans", problems)
        if booleans is not None and form in DOTTED and booleans not in VALUED:
            problems.append(f"{where}.booleans: {booleans} passes no value; form {form} needs one ({', '.join(VALUED)})")
    new = value.get("new", False)
    if not isinstance(new, bool):
        problems.append(f"{where}.new: must be true or false, got {new!r}")
        new = False
    elif new and form != "hydra":
        problems.append(f"{where}.new: +name=value is Hydra's; it needs objective.flags.form: hydra")
    return KeyStyle(name, booleans, new)


def parse_flags(value: Any) -> tuple[FlagStyle, list[str]]:
    """``objective.flags`` as a FlagStyle, with every problem named by its key."""
    if value is None:
        return FlagStyle(), []
    if not isinstance(value, dict):
        return FlagStyle(), ["objective.flags: must be a mapping, e.g. {form: space, names: dashes, booleans: store_true}"]
    problems = [f"objective.flags.{k}: unknown key{did_you_mean(k, STYLE_KEYS)}" for k in value if k not in STYLE_KEYS]
    form = _choice(value.get("form", "equals"), FORMS, "objective.flags.form", problems) or "equals"
    names = _choice(value.get("names", "keep"), NAMES, "objective.flags.names", problems) or "keep"
    booleans = _choice(value.get("booleans", "json"), BOOLEANS, "objective.flags.booleans", problems) or "json"
    if form in DOTTED and booleans not in VALUED:
        problems.append(f"objective.flags.booleans: {booleans} passes no value; form {form} needs one ({', '.join(VALUED)})")
    keys: dict[str, KeyStyle] = {}
    raw_keys = value.get("keys") or {}
    if not isinstance(raw_keys, dict):
        problems.append("objective.flags.keys: must map config keys to {name: ..., booleans: ..., new: ...}")
        raw_keys = {}
    for key, spec in raw_keys.items():
        made = _key_style(str(key), spec, form, problems)
        if made is not None:
            keys[str(key)] = made
    return FlagStyle(form, names, booleans, keys), problems
