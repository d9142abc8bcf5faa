"""Budget-aware defaults: the sampler's start-up, the pruner and the parallel strategy that a spec
leaves unset, derived from what hpsearch knows before the first trial and Optuna does not: the
budget in trials, the epochs of one trial (``fixed.epochs`` or ``pruner.max_epochs``) and the
workers. Every value here is only a default; a key set in the spec wins.

Chosen on the search-quality benchmark (python -m bench.search_quality, Tier A seeds 0-39, reported on
fresh seeds; docs/benchmarks/search-quality.md). Two later attempts (Tier A seeds 0-99, Tier B
0-199) found no candidate better on both tiers. The known weak spot: at a 12-trial budget the
Fashion-MNIST space (categorical, conditional) does better with 10 start-up trials, the synthetic
functions with 3. There, at 72 epochs, these defaults win only 45 % of paired seeds against Optuna's.
- start-up: TPE's model needs few random trials when the budget is small; Optuna's fixed 10 made
  hpsearch random search for 52 of 72 epochs. ``clamp(round(trials / 8), 3, 10)``.
- pruner: Hyperband from 1 epoch (reduction factor 3) when a trial has at least 3 epochs to
  prune in; the median pruner otherwise, and with several metrics (Optuna's pruners are
  single-objective: none then).
- parallel: TPE's constant liar when more than one worker asks at once, so workers do not
  propose the same region while their trials run.

Functions read the spec through the registry's Protocol (this module sits below the spec
loader, which imports it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MIN_STARTUP, MAX_STARTUP = 3, 10
TRIALS_PER_STARTUP = 8  # one random start-up trial per this many trials of the budget
HYPERBAND_MIN_EPOCHS = 3  # fewer epochs per trial leave no rungs worth the pruning
SH_REDUCTION, HYPERBAND_REDUCTION = 4, 3  # pruner.reduction_factor when unset: successive_halving, hyperband


@dataclass(frozen=True)
class Resolved:
    key: str  # the spec key the value stands for
    value: Any
    why: str  # one line for `hpsearch validate`


def epochs_per_trial(spec: Any) -> int | None:
    epochs = spec.pruner.max_epochs or spec.fixed.get("epochs")
    return epochs if isinstance(epochs, int) and not isinstance(epochs, bool) and epochs > 0 else None


def startup_trials(spec: Any) -> Resolved:
    if spec.sampler.startup_trials is not None:
        return Resolved("sampler.startup_trials", spec.sampler.startup_trials, "set in the spec")
    trials = spec.budget.trials
    n = min(MAX_STARTUP, max(MIN_STARTUP, round(trials / TRIALS_PER_STARTUP)))
    return Resolved(
        "sampler.startup_trials",
        n,
        f"budget.trials {trials}: one random trial per {TRIALS_PER_STARTUP}, at least {MIN_STARTUP}, at most {MAX_STARTUP}",
    )


def pruner_name(spec: Any) -> Resolved:
    if spec.pruner.name is not None:
        return Resolved("pruner.name", spec.pruner.name, "set in the spec")
    if len(spec.metrics) > 1:
        return Resolved("pruner.name", "none", "several metrics: Optuna's pruners judge one")
    epochs = epochs_per_trial(spec)
    if epochs is None:
        return Resolved("pruner.name", "median", "no fixed.epochs or pruner.max_epochs: Hyperband needs a trial's length")
    if epochs < HYPERBAND_MIN_EPOCHS:
        return Resolved("pruner.name", "median", f"{epochs} epochs per trial: too few rungs for Hyperband")
    return Resolved("pruner.name", "hyperband", f"{epochs} epochs per trial: Hyperband from 1 epoch, reduction factor 3")


def constant_liar(spec: Any) -> Resolved:
    workers = spec.resources.workers or 1
    why = f"{workers} workers ask at once" if workers > 1 else "one worker: nothing runs while it asks"
    return Resolved("sampler.constant_liar", workers > 1, why)


def resolve(spec: Any) -> list[Resolved]:
    """What the defaults resolved to, in the order `hpsearch validate` prints them."""
    out = [pruner_name(spec)]
    if spec.sampler.name in (None, "tpe", "gp", "cmaes") and len(spec.metrics) == 1:
        out.insert(0, startup_trials(spec))
    if spec.sampler.name in (None, "tpe") and len(spec.metrics) == 1:
        out.append(constant_liar(spec))
    return out


def table() -> str:
    """The docs' table of what a spec leaves unset (docs/spec.md, generated): the rules above, in words."""
    rows = [
        ("sampler.name", "`tpe`; `nsga2` with several metrics"),
        (
            "sampler.startup_trials",
            f"round(budget.trials / {TRIALS_PER_STARTUP}), at least {MIN_STARTUP}, at most {MAX_STARTUP} (tpe, gp, cmaes)",
        ),
        ("sampler.constant_liar", "on with more than one worker (tpe): workers do not propose the region their running trials hold"),
        (
            "pruner.name",
            f"`hyperband` from {HYPERBAND_MIN_EPOCHS} epochs per trial (`fixed.epochs` or `pruner.max_epochs`); `median` "
            "with fewer or unknown epochs; `none` with several metrics",
        ),
        (
            "pruner.reduction_factor",
            f"{SH_REDUCTION} for successive_halving; {HYPERBAND_REDUCTION} for hyperband and Ray's asha and hyperband",
        ),
        ("pruner.max_epochs", "`fixed.epochs` (Ray's asha and hyperband: 100 without either)"),
    ]
    lines = ["| key | when the spec leaves it unset |", "|---|---|"]
    return "\n".join(lines + [f"| `{key}` | {rule} |" for key, rule in rows])
