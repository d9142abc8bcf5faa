"""Prune only at epochs that have shown they rank: the trust gate every pruner runs behind.

An epoch (any step unit: epochs, iterations) is trusted once the study's completed trials show
that their values there rank them the way their final values do: Spearman's rank correlation
between the value at that step and the final value, over at least ``min_curves`` completed
trials, at least ``threshold``. Until then no trial is pruned at that step, whatever the
pruner behind the gate says (so before ``min_curves`` trials completed, nothing is pruned: a
conservative warm-up). The correlations are measured anew as trials complete; ``table`` is
what ``hpsearch status``, the report and the audit show.

Why: on the Fashion-MNIST space, epoch 1's values rank configs at 0.20 against the final, epoch
3 at 0.49, epoch 5 at 0.92; Hyperband judging at epoch 1 threw good configs away. Optuna's
successive halving and Hyperband judge a rung whose step was not trusted at the first trusted
step after it, with the value there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import optuna
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState


@dataclass(frozen=True)
class StepTrust:
    step: int
    corr: float | None  # None: fewer than min_curves completed trials reported this step
    curves: int
    trusted: bool

    def text(self, unit: str = "epoch") -> str:
        verdict = "pruning" if self.trusted else "not pruning"
        if self.corr is None:
            return f"{unit} {self.step}: {self.curves} curves: {verdict}"
        return f"{unit} {self.step}: rank corr {self.corr:.2f} ({self.curves} curves): {verdict}"


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Rank correlation, ties averaged; 0 when either side is constant."""
    from scipy.stats import spearmanr

    if len(set(a)) < 2 or len(set(b)) < 2:
        return 0.0
    value = float(spearmanr(a, b).statistic)
    return value if math.isfinite(value) else 0.0


def completed_curves(trials: Sequence[FrozenTrial]) -> list[tuple[dict[int, float], float]]:
    """(values per step, final value) of every completed single-objective trial."""
    out = []
    for t in trials:
        if t.state == TrialState.COMPLETE and t.value is not None and math.isfinite(t.value) and t.intermediate_values:
            out.append(({s: v for s, v in t.intermediate_values.items() if math.isfinite(v)}, float(t.value)))
    return out


def step_trust(step: int, curves: list[tuple[dict[int, float], float]], threshold: float, min_curves: int) -> StepTrust:
    pairs = [(values[step], final) for values, final in curves if step in values]
    if len(pairs) < min_curves:
        return StepTrust(step, None, len(pairs), False)
    corr = spearman([p[0] for p in pairs], [p[1] for p in pairs])
    return StepTrust(step, corr, len(pairs), corr >= threshold)


def table(trials: Sequence[FrozenTrial], threshold: float, min_curves: int) -> list[StepTrust]:
    """Every step the completed trials reported but their last, as the gate sees it now."""
    curves = completed_curves(trials)
    last = max((max(v) for v, _ in curves if v), default=None)
    steps = sorted({s for values, _ in curves for s in values if s != last})
    return [step_trust(s, curves, threshold, min_curves) for s in steps]


class TrustedPruner(optuna.pruners.BasePruner):
    """``inner`` decides, but only at steps the completed curves trust (``threshold``, ``min_curves``)."""

    def __init__(self, inner: optuna.pruners.BasePruner, threshold: float, min_curves: int) -> None:
        self.inner, self.threshold, self.min_curves = inner, threshold, min_curves
        self._cache: dict[tuple[int, int], StepTrust] = {}  # (completed trials seen, step) -> trust

    def trust(self, study: Study, step: int) -> StepTrust:
        done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        key = (len(done), step)
        if key not in self._cache:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = step_trust(step, completed_curves(done), self.threshold, self.min_curves)
        return self._cache[key]

    def prune(self, study: Study, trial: FrozenTrial) -> bool:
        step = trial.last_step
        if step is None or not self.trust(study, step).trusted:
            return False
        return self.inner.prune(study, trial)
