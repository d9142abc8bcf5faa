"""One registry per plug-in kind: samplers, pruners, backends, Ray schedulers.

Each entry is a name, a one-line summary and a builder. Spec validation, the CLI's choices
and the docs' tables all read these dicts, so adding a plug-in is adding one entry here.
Builders import Optuna or Ray when called, so reading the names costs nothing.

A sampler or pruner may also be a user's class, named by import path
(``package.module:Class`` or ``path/file.py:Class``) with its keyword arguments beside it:
``plugin_class`` loads and checks it, ``build_plugin`` makes one.
"""

from __future__ import annotations

import inspect
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, Protocol, TypeVar

if TYPE_CHECKING:
    from optuna.pruners import BasePruner
    from optuna.samplers import BaseSampler
    from ray.tune.schedulers import TrialScheduler

T = TypeVar("T")


class Spec(Protocol):
    """What builders read of a spec (``hpsearch.spec.loader.Spec`` has it). A protocol, not an
    import: the spec's validation reads this module's names, so this module cannot import it."""

    @property
    def sampler(self) -> Any: ...
    @property
    def pruner(self) -> Any: ...
    @property
    def budget(self) -> Any: ...
    @property
    def resources(self) -> Any: ...
    @property
    def fixed(self) -> dict[str, Any]: ...
    @property
    def metrics(self) -> list[str]: ...
    @property
    def tree(self) -> Any: ...
    @property
    def base_dir(self) -> Path: ...
    @property
    def backend(self) -> str: ...


@dataclass(frozen=True)
class Entry(Generic[T]):
    summary: str  # one line for --help and the docs' table
    build: Callable[..., T]


# ---------------------------------------------------------------------------- samplers


def _quiet(make: Callable[[], T]) -> T:
    """Optuna marks several samplers experimental; its warning would reach the user's stderr."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return make()


def _startup(spec: Spec) -> dict[str, Any]:  # keyword arguments for several samplers
    from hpsearch.spec.defaults import startup_trials

    return {"n_startup_trials": startup_trials(spec).value}


def _tpe(spec: Spec, seed: int | None) -> BaseSampler:
    import optuna

    from hpsearch.spec.defaults import constant_liar

    # multivariate + group: conditional sub-spaces (optimizer options) are modelled jointly.
    liar = constant_liar(spec).value
    return _quiet(lambda: optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True, constant_liar=liar, **_startup(spec)))


def _random(spec: Spec, seed: int | None) -> BaseSampler:
    import optuna

    return optuna.samplers.RandomSampler(seed=seed)


def _grid(spec: Spec, seed: int | None) -> BaseSampler:
    import optuna

    return optuna.samplers.GridSampler(spec.tree.grid() or {}, seed=seed)


def _cmaes(spec: Spec, seed: int | None) -> BaseSampler:
    import optuna

    return _quiet(lambda: optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False, **_startup(spec)))


def _qmc(spec: Spec, seed: int | None) -> BaseSampler:
    import optuna

    return _quiet(lambda: optuna.samplers.QMCSampler(seed=seed, warn_independent_sampling=False))


def _gp(spec: Spec, seed: int | None) -> BaseSampler:
    import optuna

    return _quiet(lambda: optuna.samplers.GPSampler(seed=seed, **_startup(spec)))


def _bo(spec: Spec, seed: int | None) -> BaseSampler:
    from hpsearch.search.model import CurveModelSampler
    from hpsearch.spec.defaults import BO_MAX_TRIALS, epochs_per_trial

    return CurveModelSampler(
        spec.tree, seed=seed, startup_trials=_startup(spec)["n_startup_trials"], max_step=epochs_per_trial(spec), max_trials=BO_MAX_TRIALS
    )


def _auto(spec: Spec, seed: int | None) -> BaseSampler:
    return SAMPLERS[sampler_name(spec)].build(spec, seed)


def _nsga2(spec: Spec, seed: int | None) -> BaseSampler:
    import optuna

    return optuna.samplers.NSGAIISampler(seed=seed, population_size=spec.sampler.population_size or 50)


SAMPLERS: dict[str, Entry[BaseSampler]] = {
    "auto": Entry(
        "chosen from the space's shape and the budget (the default; `hpsearch validate` says which and why): "
        "see What the spec leaves unset",
        _auto,
    ),
    "bo": Entry(
        "hpsearch's Bayesian optimisation: a Gaussian process over (config, epoch) fitted on every reported epoch, pruned "
        "trials' included; the config with the highest expected improvement at the last epoch; TPE takes over past "
        "a few hundred trials",
        _bo,
    ),
    "tpe": Entry(
        "tree-structured Parzen estimator, multivariate over conditional groups; random for the first `startup_trials`; "
        "constant liar with several workers",
        _tpe,
    ),
    "random": Entry("independent uniform (or log-uniform) draws", _random),
    "grid": Entry("every combination; needs choices, int ranges or stepped floats, no conditional options", _grid),
    "cmaes": Entry("CMA-ES over the numeric parameters (categorical ones sampled independently)", _cmaes),
    "qmc": Entry("quasi-Monte Carlo (Sobol) draws: even coverage without a model", _qmc),
    "gp": Entry("Gaussian-process Bayesian optimisation (few, expensive trials)", _gp),
    "nsga2": Entry("NSGA-II genetic search for several metrics (`population_size`, default 50)", _nsga2),
}


# ---------------------------------------------------------------------------- a user's class

IMPORT_PATH = re.compile(r"[\w./-]+:[A-Za-z_]\w*")  # package.module:Class or path/file.py:Class
Kind = Literal["sampler", "pruner"]


def is_import_path(name: object) -> bool:
    return isinstance(name, str) and IMPORT_PATH.fullmatch(name) is not None


def plugin_class(path: str, base_dir: Path | None, kind: Kind) -> type:
    """The class ``path`` names, checked to be Optuna's BaseSampler or BasePruner; ValueError in one line."""
    import optuna

    from hpsearch.trial.objective import import_file, import_module

    base: type = optuna.samplers.BaseSampler if kind == "sampler" else optuna.pruners.BasePruner
    module_part, _, name = path.rpartition(":")
    module = import_file(module_part, base_dir) if module_part.endswith(".py") else import_module(module_part)
    found = getattr(module, name, None)
    if found is None:
        raise ValueError(f"{module_part} has no {name!r}")
    if not isinstance(found, type) or not issubclass(found, base):
        what = f"a {type(found).__name__}" if not isinstance(found, type) else f"a class that does not derive from {base.__name__}"
        raise ValueError(f"{path} is {what}; a {kind} class derives from optuna.{kind}s.{base.__name__}")
    return found


def build_plugin(spec: Spec, kind: Kind, seed: int | None = None) -> Any:
    """An instance of the spec's own sampler or pruner class, with its keyword arguments (and the
    sampler's seed, shifted as for the built-in ones, when the class takes a ``seed``)."""
    section = spec.sampler if kind == "sampler" else spec.pruner
    cls = plugin_class(section.name, spec.base_dir, kind)
    kwargs = dict(section.kwargs)
    if seed is not None and "seed" in inspect.signature(cls).parameters:
        kwargs["seed"] = seed
    try:
        return _quiet(lambda: cls(**kwargs))
    except Exception as exc:  # noqa: BLE001 - a user's constructor: any error is one line
        raise ValueError(
            f"{section.name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())}) failed: {type(exc).__name__}: {exc}"
        ) from None


def sampler_name(spec: Spec) -> str:
    """The sampler that runs: the spec's, or what ``auto`` (the default) chooses (hpsearch/spec/defaults.py)."""
    if spec.sampler.name not in (None, "auto"):
        return str(spec.sampler.name)
    from hpsearch.spec.defaults import sampler_choice

    name: str = sampler_choice(spec).value
    return name


def pruner_name(spec: Spec) -> str:
    """The spec's pruner, or the budget-aware default (hpsearch/spec/defaults.py)."""
    from hpsearch.spec.defaults import pruner_name as resolved

    name: str = resolved(spec).value
    return name


# ---------------------------------------------------------------------------- pruners


def warmup(spec: Spec) -> int:
    """pruner.warmup_epochs, or its default (spec/defaults.py)."""
    from hpsearch.spec.defaults import warmup_epochs

    return int(warmup_epochs(spec).value)


def _common(spec: Spec) -> dict[str, int]:
    p = spec.pruner
    # Optuna may prune at step >= n_warmup_steps; epochs are 1-based and warmup epochs are never pruned.
    return {"n_startup_trials": p.startup_trials, "n_warmup_steps": warmup(spec) + 1, "interval_steps": p.interval_epochs}


def _median(spec: Spec) -> BasePruner:
    import optuna

    return optuna.pruners.MedianPruner(**_common(spec))


def _percentile(spec: Spec) -> BasePruner:
    import optuna

    return optuna.pruners.PercentilePruner(spec.pruner.percentile, **_common(spec))


def _successive_halving(spec: Spec) -> BasePruner:
    import optuna

    from hpsearch.spec.defaults import SH_REDUCTION

    p = spec.pruner
    return optuna.pruners.SuccessiveHalvingPruner(min_resource=max(1, warmup(spec)), reduction_factor=p.reduction_factor or SH_REDUCTION)


def _hyperband(spec: Spec) -> BasePruner:
    import optuna

    from hpsearch.spec.defaults import HYPERBAND_REDUCTION

    p = spec.pruner
    max_epochs = p.max_epochs or spec.fixed.get("epochs") or "auto"
    return optuna.pruners.HyperbandPruner(
        min_resource=max(1, warmup(spec)), max_resource=max_epochs, reduction_factor=p.reduction_factor or HYPERBAND_REDUCTION
    )


def _model(spec: Spec) -> BasePruner:
    from hpsearch.search.model import CurvePruner

    return CurvePruner()


def trusted(spec: Spec, pruner: BasePruner) -> BasePruner:
    """Behind the trust gate (``pruner.trust``): no pruning at a step whose values do not yet rank trials."""
    if spec.pruner.trust is None:
        return pruner
    from hpsearch.search.trust import TrustedPruner

    return TrustedPruner(pruner, spec.pruner.trust, spec.pruner.trust_curves)


def _no_pruner(spec: Spec) -> BasePruner:
    import optuna

    return optuna.pruners.NopPruner()


PRUNERS: dict[str, Entry[BasePruner]] = {
    "median": Entry(
        "stop a trial worse than the median of earlier trials at the same epoch, after `warmup_epochs`, once `startup_trials` finished",
        _median,
    ),
    "percentile": Entry("as median, at `percentile` instead of the 50th", _percentile),
    "successive_halving": Entry(
        "asynchronous successive halving: rungs from `warmup_epochs` on, each keeps the best 1/`reduction_factor`",
        _successive_halving,
    ),
    "hyperband": Entry(
        "Hyperband: successive halving in several brackets up to `max_epochs`, each rung keeps 1/`reduction_factor`",
        _hyperband,
    ),
    "model": Entry(
        "stop a trial once sampler bo's model gives its final value, from the epochs it reported, less than 5 % chance "
        "to beat the best so far (needs sampler bo)",
        _model,
    ),
    "none": Entry("every trial runs all its epochs", _no_pruner),
}


# ---------------------------------------------------------------------------- backends


@dataclass(frozen=True)
class Backend:
    summary: str
    module: str  # has ``run(spec, quiet=False) -> Summary``; imported by the caller (ray is heavy)


BACKENDS: dict[str, Backend] = {
    "optuna": Backend(
        "embedded (default): this process, its slots and `hpsearch worker`s claim trials from the study's storage",
        "hpsearch.engine.optuna",
    ),
    "ray": Backend("Ray Tune on a local or existing cluster; trials recorded in the same Optuna storage", "hpsearch.engine.ray"),
}


# ---------------------------------------------------------------------------- Ray schedulers

# Builders take the spec and what the Ray backend works out once: ``common`` (time attribute,
# metric, mode), ``max_t`` (epochs), ``grace`` (pruner.warmup_epochs + 1, so warmup epochs are
# never stopped) and ``pbt`` (its PBT builder, which needs the backend's trial bookkeeping).
# stop_last_trials=False: a trial that reaches max_t ends on its own with its final metrics.


@dataclass(frozen=True)
class RayKit:
    common: dict[str, Any]
    max_t: int
    grace: int
    pbt: Callable[[], TrialScheduler]


def _asha(spec: Spec, kit: RayKit) -> TrialScheduler:
    from ray.tune.schedulers import ASHAScheduler

    from hpsearch.spec.defaults import HYPERBAND_REDUCTION

    rate = spec.pruner.reduction_factor or HYPERBAND_REDUCTION
    return ASHAScheduler(**kit.common, max_t=kit.max_t, grace_period=kit.grace, reduction_factor=rate, stop_last_trials=False)


def _ray_hyperband(spec: Spec, kit: RayKit) -> TrialScheduler:
    from ray.tune.schedulers import HyperBandScheduler

    from hpsearch.spec.defaults import HYPERBAND_REDUCTION

    rate = spec.pruner.reduction_factor or HYPERBAND_REDUCTION
    return HyperBandScheduler(**kit.common, max_t=kit.max_t, reduction_factor=rate, stop_last_trials=False)


def _ray_median(spec: Spec, kit: RayKit) -> TrialScheduler:
    from ray.tune.schedulers import MedianStoppingRule

    return MedianStoppingRule(**kit.common, grace_period=kit.grace, min_samples_required=max(1, spec.pruner.startup_trials))


def _fifo(spec: Spec, kit: RayKit) -> TrialScheduler:
    from ray.tune.schedulers import FIFOScheduler

    return FIFOScheduler()


RAY_SCHEDULERS: dict[str, Entry[TrialScheduler]] = {
    "asha": Entry(
        "asynchronous successive halving (default): first rung after `pruner.warmup_epochs` + 1 epochs, keeps 1/`pruner.reduction_factor`",
        _asha,
    ),
    "hyperband": Entry(
        "synchronous HyperBand up to `pruner.max_epochs`; paused trials resume from their checkpoint",
        _ray_hyperband,
    ),
    "median": Entry("median stopping rule after the warmup epochs, once `pruner.startup_trials` trials report", _ray_median),
    "pbt": Entry(
        "population-based training: every `ray.perturbation_interval` epochs the worst quarter copies a better trial's "
        "checkpoint (`reporter.save_checkpoint`/`load_checkpoint`) and perturbs its top-level parameters",
        lambda spec, kit: kit.pbt(),
    ),
    "fifo": Entry("none (also what several metrics get)", _fifo),
}


def table(kind: Mapping[str, Entry[Any] | Backend], key: str) -> str:
    """A Markdown table of a registry; the docs' tables are these (tests/test_registry.py checks)."""
    rows = [f"| `{name}` | {entry.summary} |" for name, entry in kind.items()]
    return "\n".join([f"| `{key}` | what it does |", "|---|---|", *rows])


TABLES: dict[str, Mapping[str, Entry[Any] | Backend]] = {
    "sampler.name": SAMPLERS,
    "pruner.name": PRUNERS,
    "backend": BACKENDS,
    "ray.scheduler": RAY_SCHEDULERS,
}


if __name__ == "__main__":  # python -m hpsearch.spec.registry: the docs' tables
    for key, kind in TABLES.items():
        print(table(kind, key), end="\n\n")
