"""The search space: a backend-neutral tree of parameters.

A space is a mapping ``name -> parameter``. A parameter is one of

    lr:         {float: [1.0e-4, 1.0], log: true}     # uniform, log or stepped float
    batch_size: {int: [32, 256], step: 32}            # int range, optionally log or stepped
    amp:        {choice: [bf16, fp16]}                # categorical
    optimizer:                                        # conditional: each option brings its own
      choice:                                         # sub-space, nestable
        sgd:   {momentum: {float: [0.8, 0.99]}, nesterov: {choice: [true, false]}}
        adamw: {beta2: {float: [0.95, 0.999]}}
    nesterov: true                                    # a constant

The objective sees a flat config: ``{"optimizer": "sgd", "momentum": 0.93, ...}``. In the
backend a parameter under an option is named by its path (``optimizer.sgd.momentum``) so
that the same name under two options never shares a distribution.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

Scalar = bool | int | float | str
KINDS = ("float", "int", "choice")


@dataclass(frozen=True)
class Float:
    low: float
    high: float
    log: bool = False
    step: float | None = None


@dataclass(frozen=True)
class Int:
    low: int
    high: int
    log: bool = False
    step: int = 1


@dataclass(frozen=True)
class Choice:
    """Categorical; ``branches`` maps an option to its sub-space (empty when it has none)."""

    options: tuple[Scalar, ...]
    branches: dict[Scalar, Space] = field(default_factory=dict)

    @property
    def conditional(self) -> bool:
        return any(len(b.params) for b in self.branches.values())


@dataclass(frozen=True)
class Const:
    value: Scalar


Param = Float | Int | Choice | Const


@dataclass(frozen=True)
class Space:
    params: dict[str, Param] = field(default_factory=dict)

    def walk(self, pick: Callable[[str, Param], Any], prefix: str = "") -> dict[str, Any]:
        """Resolve the tree to a flat config; ``pick(path, param)`` supplies each value."""
        config: dict[str, Any] = {}
        for name, param in self.params.items():
            path = f"{prefix}{name}"
            value = param.value if isinstance(param, Const) else pick(path, param)
            config[name] = value
            if isinstance(param, Choice) and value in param.branches:
                config.update(param.branches[value].walk(pick, f"{path}.{value}."))
        return config

    def suggest(self, trial: Any) -> dict[str, Any]:
        """Sample a config through an Optuna trial (define-by-run)."""
        return self.walk(lambda path, p: suggest_one(trial, path, p))

    def config_from_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """Rebuild the flat config from backend parameter names (``optimizer.sgd.momentum``)."""
        return self.walk(lambda path, p: params[path])

    def params_from_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The inverse: backend parameter names for a flat config (used by warm starts)."""
        params: dict[str, Any] = {}

        def pick(path: str, param: Param) -> Any:
            key = path.rsplit(".", 1)[-1]
            if key not in config:
                raise KeyError(key)
            params[path] = config[key]
            return config[key]

        self.walk(pick)
        return params

    def parameters(self, prefix: str = "") -> Iterator[tuple[str, Param]]:
        """Every (path, param) in the tree, branches included."""
        for name, param in self.params.items():
            path = f"{prefix}{name}"
            yield path, param
            if isinstance(param, Choice):
                for option, branch in param.branches.items():
                    yield from branch.parameters(f"{path}.{option}.")

    def config_keys(self) -> set[str]:
        return {path.rsplit(".", 1)[-1] for path, _ in self.parameters()}

    def representative_configs(self) -> list[dict[str, Any]]:
        """One config per choice option (every branch visited), other values at their low end."""
        configs = [self.walk(lambda path, p: first_value(p))]
        for path, param in self.parameters():
            if not isinstance(param, Choice):
                continue
            configs.extend(self.walk(_pinned(path, option)) for option in param.options[1:])
        return configs

    def range_ends(self) -> list[tuple[str, str, Any, dict[str, Any]]]:
        """(path, "low" or "high", value, config) for each end of each range: the option that holds
        it chosen, every other value at its low end. What a validate hook checks against ``fixed``."""
        out = []
        for path, param in self.parameters():
            if not isinstance(param, Float | Int):
                continue
            route = _route(path)
            for end, value in (("low", param.low), ("high", param.high)):
                pick = _ends(path, value, route)
                out.append((path, end, value, self.walk(pick)))
        return out

    def grid(self) -> dict[str, list[Any]] | None:
        """Values per parameter for grid search, or None when the space is not a finite grid."""
        grid: dict[str, list[Any]] = {}
        for path, param in self.parameters():
            if isinstance(param, Choice):
                if param.conditional:
                    return None
                grid[path] = list(param.options)
            elif isinstance(param, Int) and not param.log:
                grid[path] = list(range(param.low, param.high + 1, param.step))
            elif isinstance(param, Float) and param.step and not param.log:
                n = int(round((param.high - param.low) / param.step))
                grid[path] = [param.low + i * param.step for i in range(n + 1)]
            elif not isinstance(param, Const):
                return None
        return grid


def _pinned(path: str, option: Scalar) -> Callable[[str, Param], Any]:
    """A ``walk`` pick: ``option`` for the choice at ``path``, the first value everywhere else."""
    return lambda p_path, p: option if p_path == path else first_value(p)


def _route(path: str) -> dict[str, str]:
    """The choices a branch parameter needs: ``optimizer.sgd.lr`` -> {"optimizer": "sgd"} (paths of the choices)."""
    parts = path.split(".")
    return {".".join(parts[: i + 1]): parts[i + 1] for i in range(0, len(parts) - 2, 2)}


def _ends(target: str, value: Any, route: dict[str, str]) -> Callable[[str, Param], Any]:
    def pick(path: str, p: Param) -> Any:
        if path == target:
            return value
        if path in route and isinstance(p, Choice):
            return next((o for o in p.options if str(o) == route[path]), first_value(p))
        return first_value(p)

    return pick


def first_value(param: Param) -> Any:
    if isinstance(param, Choice):
        return param.options[0]
    if isinstance(param, Const):
        return param.value
    return param.low


def suggest_one(trial: Any, path: str, param: Param) -> Any:
    if isinstance(param, Float):
        return trial.suggest_float(path, param.low, param.high, log=param.log, step=param.step)
    if isinstance(param, Int):
        return trial.suggest_int(path, param.low, param.high, log=param.log, step=param.step)
    if isinstance(param, Choice):
        return trial.suggest_categorical(path, list(param.options))
    raise TypeError(f"cannot suggest {param!r}")


# ---------------------------------------------------------------------------- parsing


def parse_space(raw: Any, where: str, errors: list[str]) -> Space:
    """Parse a YAML ``space:`` mapping; every problem is appended to ``errors`` as ``key: message``."""
    if raw is None:
        return Space()
    if not isinstance(raw, Mapping):
        errors.append(f"{where}: must be a mapping of parameter name to definition, got {type(raw).__name__}")
        return Space()
    params: dict[str, Param] = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not name.isidentifier():
            errors.append(f"{where}.{name}: parameter names must be identifiers (letters, digits, _)")
            continue
        param = parse_param(value, f"{where}.{name}", errors)
        if param is not None:
            params[name] = param
    return Space(params)


def parse_param(raw: Any, where: str, errors: list[str]) -> Param | None:
    if isinstance(raw, (bool, int, float, str)):
        return Const(raw)
    if isinstance(raw, list):
        errors.append(f"{where}: a bare list is ambiguous; write {{choice: [...]}} to search over it, or put a constant list under fixed:")
        return None
    if not isinstance(raw, Mapping):
        errors.append(f"{where}: expected a constant or a mapping with one of {', '.join(KINDS)}, got {raw!r}")
        return None
    kinds = [k for k in KINDS if k in raw]
    if len(kinds) != 1:
        found = f"found {', '.join(kinds)}" if kinds else f"found keys {', '.join(map(str, raw))}"
        errors.append(f"{where}: needs exactly one of {', '.join(KINDS)} ({found})")
        return None
    kind = kinds[0]
    allowed = {"float": {"float", "log", "step"}, "int": {"int", "log", "step"}, "choice": {"choice"}}[kind]
    for key in raw:
        if key not in allowed:
            errors.append(f"{where}.{key}: unknown key for a {kind} parameter (allowed: {', '.join(sorted(allowed))})")
    if kind == "choice":
        return parse_choice(raw["choice"], f"{where}.choice", errors)
    return parse_range(kind, raw, where, errors)


def parse_choice(raw: Any, where: str, errors: list[str]) -> Choice | None:
    if isinstance(raw, list):
        options = tuple(raw)
        if any(not isinstance(o, (bool, int, float, str)) or o is None for o in options):
            errors.append(f"{where}: options must be numbers, strings or booleans")
            return None
        if any(isinstance(o, float) and not math.isfinite(o) for o in options):
            errors.append(f"{where}: options must be finite numbers, got {list(options)}")
            return None
        branches: dict[Scalar, Space] = {}
    elif isinstance(raw, Mapping):
        options = tuple(raw)
        branches = {opt: parse_space(sub, f"{where}.{opt}", errors) for opt, sub in raw.items()}
    else:
        errors.append(f"{where}: must be a list of options or a mapping option -> sub-space, got {raw!r}")
        return None
    if not options:
        errors.append(f"{where}: needs at least one option")
        return None
    if len(set(map(repr, options))) != len(options):
        errors.append(f"{where}: options repeat: {list(options)}")
    return Choice(options, branches)


def parse_range(kind: str, raw: Mapping[str, Any], where: str, errors: list[str]) -> Param | None:
    bounds = raw[kind]
    number = int if kind == "int" else float
    if not isinstance(bounds, list) or len(bounds) != 2:
        errors.append(f"{where}.{kind}: must be [low, high], got {bounds!r}")
        return None
    low, high = (as_number(b, number) for b in bounds)
    if low is None or high is None:
        errors.append(f"{where}.{kind}: low and high must be {'integers' if kind == 'int' else 'numbers'}, got {bounds!r}")
        return None
    log = raw.get("log", False)
    if not isinstance(log, bool):
        errors.append(f"{where}.log: must be true or false, got {log!r}")
        return None
    step = raw.get("step")
    if step is not None:
        step = as_number(step, number)
        if step is None or step <= 0:
            errors.append(f"{where}.step: must be a positive {'integer' if kind == 'int' else 'number'}, got {raw.get('step')!r}")
            return None
        if log:
            errors.append(f"{where}: log and step cannot be combined")
            return None
    if not low < high:
        errors.append(f"{where}.{kind}: low must be < high, got low={low} high={high}")
        return None
    if log and low <= 0:
        errors.append(f"{where}.{kind}: a log scale needs low > 0, got low={low}")
        return None
    if not math.isfinite(float(high) - float(low)):  # [-1e308, 1e308]: every draw low + u * (high - low) overflows
        errors.append(f"{where}.{kind}: high - low overflows a float, got low={low} high={high}")
        return None
    if kind == "int":
        return Int(int(low), int(high), log, int(step or 1))  # as_number gave ints: int() only tells the type checker
    if step is not None and not math.isclose((high - low) / step, round((high - low) / step), abs_tol=1e-9):
        errors.append(f"{where}.step: (high - low) must be a multiple of step, got low={low} high={high} step={step}")
        return None
    return Float(float(low), float(high), log, step)


def as_number(value: Any, number: type) -> int | float | None:
    """YAML reads ``1e-4`` (no dot) as a string; accept it as a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if number is int:
        return int(value) if isinstance(value, (int, float)) and float(value).is_integer() else None
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None
