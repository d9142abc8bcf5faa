"""YAML for settings files (a spec, an exported config, a ``--set`` value), read within limits.

A spec is settings and a search space: a few KiB, a handful of levels. The limits turn a
hostile or broken file (an alias bomb, megabytes of data, thousands of nested brackets) into
one line within a second or so, since the pure-Python parser reads about 50 KiB/s on a busy
core. Also refused: a key given twice in one mapping, and tags (safe loading). ``5e-4`` is a
number, as in YAML 1.2.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

from hpsearch.base.errors import SpecError

MAX_BYTES = 64 * 1024

MAX_DEPTH = 32  # nesting levels; a conditional space needs about 8

MAX_VALUES = 100_000  # scalars and collections after aliases expand; a 64 KiB file holds fewer without aliases


def read_yaml(where: str) -> dict[str, Any]:
    raw = load_limited(where)
    if raw is None:
        raise SpecError(f"{where}: the file is empty; a spec needs at least study: and space: (see spaces/quickstart.yaml)")
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: the top level must be a mapping of keys (study:, space:, ...), got {type(raw).__name__}")
    return raw


def load_limited(where: str) -> Any:
    """A YAML file of settings (a spec, an exported config), read within the limits above: size,
    nesting, aliases expanded, no duplicate keys, no tags; a one-line SpecError otherwise."""
    file = Path(where)
    if not file.is_file():
        raise SpecError(f"{where}: no such file ({file.absolute()})")
    size = file.stat().st_size
    if size > MAX_BYTES:
        raise SpecError(f"{where}: the file is {size / 1024:,.0f} KiB; a spec is a few KiB of settings (limit {MAX_BYTES // 1024} KiB)")
    text = file.read_text(encoding="utf-8", errors="replace")
    try:
        return _load_checked(text, where)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1} column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        if problem.startswith("could not determine a constructor for the tag"):
            tag = problem.rsplit(" ", 1)[-1].replace("tag:yaml.org,2002:", "!!")
            raise SpecError(f"{where}: {at}the YAML tag {tag} is not allowed: a spec holds plain data (safe loading)") from None
        raise SpecError(f"{where}: {at}invalid YAML: {problem}") from None


def _load_checked(text: str, where: str) -> Any:
    """yaml.load with the shape checked between parsing and building Python objects."""
    loader = UniqueKeyLoader(text)  # a SafeLoader: no !!python/... tags
    try:
        try:
            with _stack_room(4 * MAX_DEPTH + 60):
                node = loader.get_single_node()
        except RecursionError:
            raise SpecError(f"{where}: nested more than {MAX_DEPTH} levels deep; a spec never needs that many") from None
        if node is None:
            return None
        _extent(node, 1, {}, set(), where)
        return loader.construct_document(node)
    finally:
        loader.dispose()


@contextlib.contextmanager
def _stack_room(frames: int) -> Iterator[None]:
    """Allow only ``frames`` more Python frames: the composer recurses twice per nesting level and
    PyYAML's scanner is quadratic in bracket depth ([[[[... takes seconds before the default limit)."""
    depth = 0
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        depth, frame = depth + 1, frame.f_back
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(before)


def _extent(node: yaml.Node, depth: int, seen: dict[int, tuple[int, int]], open_: set[int], where: str) -> tuple[int, int]:
    """(values, levels) under ``node`` with aliases expanded; an alias's node is counted once but weighed each time."""
    at = f"line {node.start_mark.line + 1}: "
    if depth > MAX_DEPTH:
        raise SpecError(f"{where}: {at}nested more than {MAX_DEPTH} levels deep; a spec never needs that many")
    if isinstance(node, yaml.ScalarNode):
        return 1, 1
    key = id(node)
    if key in open_:
        raise SpecError(f"{where}: {at}an alias (*name) refers to a collection that contains it; a spec holds plain data, not cycles")
    if key not in seen:
        open_.add(key)
        children = node.value if isinstance(node, yaml.SequenceNode) else [n for pair in node.value for n in pair]
        sizes = [_extent(child, depth + 1, seen, open_, where) for child in children]
        open_.discard(key)
        seen[key] = (1 + sum(v for v, _ in sizes), 1 + max((h for _, h in sizes), default=0))
    values, levels = seen[key]
    if depth - 1 + levels > MAX_DEPTH:
        raise SpecError(f"{where}: {at}nested more than {MAX_DEPTH} levels deep; a spec never needs that many")
    if values > MAX_VALUES:
        raise SpecError(
            f"{where}: {at}YAML aliases (*name) expand this to more than {MAX_VALUES:,} values (an alias bomb?); "
            "a spec is a few hundred values"
        )
    return values, levels


class UniqueKeyLoader(yaml.SafeLoader):
    """yaml.safe_load that refuses a key given twice in one mapping (PyYAML silently keeps the last)."""


def _unique_mapping(loader: UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # "<<: *base" may be overridden by the keys after it
        key = loader.construct_object(key_node, deep=deep)
        try:
            duplicate = key in seen
            seen.add(key)
        except TypeError:
            continue  # an unhashable key: construct_mapping reports it
        if duplicate:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
    return loader.construct_mapping(node, deep=deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)
# YAML 1.1 reads 1e-4 and 5E3 (no dot) as text; YAML 1.2 and every user read them as numbers.
UniqueKeyLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*(\.[0-9_]*)?[eE][-+]?[0-9]+$"), list("-+0123456789")
)


def parse_value(text: str, where: str = "--set") -> Any:
    """One value as a spec reads it (``--set key=value``, ``key=value`` of the objective's own entry):
    YAML, with 5e-4 a number, within a spec's limits (an alias bomb is a one-line SpecError); text
    that is not valid YAML stays text."""
    if len(text.encode()) > MAX_BYTES:
        raise SpecError(f"{where}: the value is {len(text.encode()) / 1024:,.0f} KiB (limit {MAX_BYTES // 1024} KiB)")
    try:
        return _load_checked(text, where)
    except yaml.YAMLError:
        return text
