"""What a spec leaves unset: the sampler, its start-up, the pruner and its trust gate, the parallel
strategy, derived from what hpsearch knows before the first trial and Optuna does not: the
space's shape, the budget in trials, the epochs of one trial and the workers. Every value here is
only a default; a key set in the spec wins.

The fourth attempt at the defaults (issue #38, 2026-12-06) changed the design, not knobs: three
earlier attempts at TPE's start-up and the pruner's start had left hpsearch at Optuna's level.
Chosen on the calibration seeds 0-39 of python -m bench.search_quality (reported on 200-699:
docs/benchmarks/search-quality.md):
- sampler ``auto``: ``bo`` (a Gaussian process over (config, epoch), search/model.py) when the
  budget holds at least two trials per model input (``Matrix.width``: a range is one input, a
  choice one per option) and at most ``BO_MAX_TRIALS``; else TPE. On the calibration seeds bo
  won 62-65 % of paired seeds against Optuna's defaults on the continuous Hartmann tasks at 12
  trials and 63 % at 48, and 65 % on the conditional Fashion-MNIST and training-shaped spaces at
  48 trials; at 12 trials those two wider spaces did better with TPE (57 % and 53 %, bo 40-55 %).
- start-up: bo's model needs few random trials: 6 (at most half the budget, at least 3; on the
  Hartmann tasks at 12 trials 6 won 64 %, 3 won 60 %, 10 won 40 %); TPE keeps Optuna's 10, which
  a space of choices needs (Tier B, third attempt: 58 % with 10, 45 % with 3).
  Held out (seeds 200-699): bo wins 70 % on the Hartmann tasks and 61 % on Tier B at 48 trials;
  at 12 trials hpsearch ties Optuna (54 %, 48 %) and lost the training-shaped task (43 %) until
  the follow-up below.
- pruner: ``model`` with bo (its model of the final value); the median pruner with TPE
  (Hyperband judged at epoch 1, where Tier B's values rank configs at 0.20: 39-44 %). All behind
  the trust gate (search/trust.py): no pruning at an epoch until completed curves show it ranks.
- warmup: none where the gate watches (follow-up: calibration seeds 0-199, then the report
  seeds 200-699, where the diagnosis that suggested it had run: the training-shaped task at 12
  trials from 43 % to 49.5 % against Optuna's defaults, 92 paired seeds won and 22 lost against
  epoch 1 never pruned).
- parallel: TPE's constant liar when more than one worker asks at once; bo keeps its proposals
  away from configs still training.

Functions read the spec through the registry's Protocol (this module sits below the spec
loader, which imports it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MIN_STARTUP, BO_STARTUP = 3, 6  # bo's random start-up trials: 6 (calibration: 6 ahead of 3 and 10 at 12 and 48 trials)
TPE_STARTUP = 10  # Optuna's own: a space of choices needs them
BO_INPUT_TRIALS = 2  # auto picks bo when the budget holds this many trials per model input
SH_REDUCTION, HYPERBAND_REDUCTION = 4, 3  # pruner.reduction_factor when unset: successive_halving, hyperband
TRUST_THRESHOLD = 0.5  # pruner.trust: rank correlation with the final value an epoch needs before a trial is pruned there
TRUST_CURVES = 5  # pruner.trust_curves: completed trials needed to measure it
BO_MAX_TRIALS = 300  # sampler bo hands over to TPE past this many trials (a fit grows with the trials)


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
    if sampler_choice(spec).value != "bo":
        return Resolved("sampler.startup_trials", TPE_STARTUP, f"Optuna's {TPE_STARTUP}: a model of choices needs them")
    trials = spec.budget.trials
    n = min(BO_STARTUP, max(MIN_STARTUP, trials // 2))
    return Resolved(
        "sampler.startup_trials", n, f"bo: {BO_STARTUP} random trials, at most half of budget.trials {trials}, at least {MIN_STARTUP}"
    )


def sampler_choice(spec: Any) -> Resolved:
    """``sampler: auto`` (the default): bo when the budget holds two trials per model input, else TPE;
    NSGA-II for several metrics."""
    if spec.sampler.name not in (None, "auto"):
        return Resolved("sampler.name", spec.sampler.name, "set in the spec")
    if len(spec.metrics) > 1:
        return Resolved("sampler.name", "nsga2", "several metrics: the model samplers score one")
    from hpsearch.search.matrix import Matrix

    shape, trials = Matrix(spec.tree), spec.budget.trials
    inputs = f"{shape.width} model input{'s' if shape.width != 1 else ''}"
    if trials > BO_MAX_TRIALS:
        return Resolved("sampler.name", "tpe", f"{trials} trials: past bo's {BO_MAX_TRIALS}")
    if trials >= BO_INPUT_TRIALS * shape.width:
        return Resolved("sampler.name", "bo", f"{trials} trials for {inputs}: a Gaussian process over (config, epoch)")
    return Resolved("sampler.name", "tpe", f"{trials} trials for {inputs}: too few for a Gaussian process, TPE")


def pruner_name(spec: Any) -> Resolved:
    if spec.pruner.name is not None:
        return Resolved("pruner.name", spec.pruner.name, "set in the spec")
    if len(spec.metrics) > 1:
        return Resolved("pruner.name", "none", "several metrics: Optuna's pruners judge one")
    if sampler_choice(spec).value == "bo":
        return Resolved("pruner.name", "model", "sampler bo: its model of the final value decides")
    return Resolved("pruner.name", "median", "worse than the median at an epoch the trust gate trusts")


def warmup_epochs(spec: Any) -> Resolved:
    """0 where the trust gate watches the Optuna backend's pruner: it says from which epoch values rank trials
    (calibration: epoch 1 never pruned cost the training-shaped task 31 paired seeds to 10); 1 without it."""
    p = spec.pruner
    if p.warmup_epochs is not None:
        return Resolved("pruner.warmup_epochs", p.warmup_epochs, "set in the spec")
    if p.trust is not None and spec.backend == "optuna":
        return Resolved("pruner.warmup_epochs", 0, "the trust gate decides from which epoch trials are judged")
    why = "pruner.trust: null" if p.trust is None else "backend ray (not measured without the epoch)"
    return Resolved("pruner.warmup_epochs", 1, f"{why}: epoch 1 is never judged")


def constant_liar(spec: Any) -> Resolved:
    workers = spec.resources.workers or 1
    why = f"{workers} workers ask at once" if workers > 1 else "one worker: nothing runs while it asks"
    return Resolved("sampler.constant_liar", workers > 1, why)


def resolve(spec: Any) -> list[Resolved]:
    """What the defaults resolved to, in the order `hpsearch validate` prints them."""
    sampler = sampler_choice(spec)
    out = [sampler] if spec.sampler.name in (None, "auto") else []
    if sampler.value in ("tpe", "gp", "cmaes", "bo") and len(spec.metrics) == 1:
        out.append(startup_trials(spec))
    pruner = pruner_name(spec)
    out.append(pruner)
    if pruner.value not in ("none", "model") and spec.pruner.warmup_epochs is None:
        out.append(warmup_epochs(spec))
    if sampler.value == "tpe" and len(spec.metrics) == 1:
        out.append(constant_liar(spec))
    return out


def table() -> str:
    """The docs' table of what a spec leaves unset (docs/spec.md, generated): the rules above, in words."""
    rows = [
        (
            "sampler.name",
            f"`auto`: `bo` when budget.trials is at least {BO_INPUT_TRIALS} per model input (a range is one, a choice one per "
            f"option) and at most {BO_MAX_TRIALS}; else `tpe`; `nsga2` with several metrics",
        ),
        (
            "sampler.startup_trials",
            f"bo: {BO_STARTUP}, at most half of budget.trials, at least {MIN_STARTUP}; tpe, gp, cmaes: {TPE_STARTUP}",
        ),
        ("sampler.constant_liar", "on with more than one worker (tpe): workers do not propose the region their running trials hold"),
        ("pruner.name", "`model` with sampler bo; else `median`; `none` with several metrics"),
        (
            "pruner.warmup_epochs",
            "0 where the trust gate watches (`backend: optuna`): the gate says from which epoch values rank trials; "
            "1 with `pruner.trust: null` or `backend: ray`",
        ),
        (
            "pruner.trust",
            f"{TRUST_THRESHOLD}: no trial is pruned at an epoch until {TRUST_CURVES} completed trials (`pruner.trust_curves`) "
            "show a rank correlation of at least this between that epoch's values and the final ones",
        ),
        (
            "pruner.reduction_factor",
            f"{SH_REDUCTION} for successive_halving; {HYPERBAND_REDUCTION} for hyperband and Ray's asha and hyperband",
        ),
        ("pruner.max_epochs", "`fixed.epochs` (Ray's asha and hyperband: 100 without either)"),
    ]
    lines = ["| key | when the spec leaves it unset |", "|---|---|"]
    return "\n".join(lines + [f"| `{key}` | {rule} |" for key, rule in rows])
