"""The noise-aware incumbent: the evaluated config with the best model estimate, not the luckiest draw.

One config's seed-to-seed noise can be as large as the differences a search chases, so the
best observed value is biased upward, and so is the config a user exports. Here a Gaussian
process over the completed trials (their configs on the tree's matrix, their final values)
learns how noisy the values are; its posterior mean at each completed config shrinks a lucky
value toward its neighbours'. The incumbent is the completed trial with the best estimate.
Where the values are noise-free, the estimate is the value itself and the incumbent is the
best observed trial.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from optuna.trial import FrozenTrial, TrialState

from hpsearch.search.gp import GP, single_threaded
from hpsearch.search.matrix import Matrix
from hpsearch.search.space import Space

MIN_COMPLETED = 5  # fewer completed trials: the best observed one (a model of 4 points says little)
TOP = 5  # the incumbent is picked among this many best observed trials: a model can be wrong far from them


@dataclass(frozen=True)
class Estimate:
    trial: FrozenTrial
    value: float  # the model's estimate of its final value (the study's scale)
    raw: float  # the value it reported


def estimates(trials: Sequence[FrozenTrial], tree: Space, maximize: bool) -> list[Estimate]:
    """Every completed trial with its estimate: the best observed ``TOP`` by estimate, then the rest."""
    done = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None and math.isfinite(t.value)]
    sign = -1.0 if maximize else 1.0
    raw = np.array([sign * float(t.value) for t in done if t.value is not None])
    if len(done) < MIN_COMPLETED or np.ptp(raw) == 0:
        smoothed = raw
    else:
        matrix = Matrix(tree)
        x = matrix.encode(np.array([matrix.row(t.params) for t in done]))
        with single_threaded():
            mean, _ = GP().fit(x, raw).predict(x)
        smoothed = mean
    top = set(np.argsort(raw, kind="stable")[:TOP].tolist())
    order = sorted(range(len(done)), key=lambda i: (i not in top, float(smoothed[i])))
    return [Estimate(done[i], sign * float(smoothed[i]), sign * float(raw[i])) for i in order]


def best(trials: Sequence[FrozenTrial], tree: Space, maximize: bool) -> Estimate | None:
    found = estimates(trials, tree, maximize)
    return found[0] if found else None
