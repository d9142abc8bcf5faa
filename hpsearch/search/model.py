"""hpsearch's Bayesian optimisation (``sampler: bo``): one Gaussian process over (config, epoch).

Every epoch any trial reported is a data point, a pruned trial's included: its curve says how
far it got and how well it did there, so its region is not proposed again as if unknown (a
model fitted on completed trials alone would). The model's value at the last epoch is the
final value, and a new config is the candidate with the highest expected improvement there,
among random configs and neighbours of the best ones. Whole configs are proposed at once,
over the tree, so conditional options and their own parameters are proposed together.

``CurvePruner`` (``pruner: model``) asks the same model: a trial stops once its final value
has less than ``p`` chance to beat the best one so far, given the epochs it reported.

Cost is bounded: at most ``MAX_POINTS`` points per fit, and past ``max_trials`` trials (or
``max_ask_s`` CPU seconds an ask on average: CPU, not wall time, so a busy machine does not
change the search) the sampler hands over to TPE and says so once.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.study import Study, StudyDirection
from optuna.trial import FrozenTrial, TrialState

from hpsearch.search.gp import GP, Array, expected_improvement, single_threaded
from hpsearch.search.matrix import Matrix
from hpsearch.search.space import Space

MAX_POINTS = 100  # per fit: every trial's last epoch first, then earlier epochs of the newest trials
CANDIDATES = 1000  # random configs scored per ask, besides neighbours of the best
NEIGHBOURS = 100  # per best config and scale
NEIGHBOUR_SCALES = (0.02, 0.05, 0.15)  # on the [0, 1] scale of a range
BEST = 5  # configs whose neighbours are scored


def finite(v: Any) -> bool:
    return isinstance(v, int | float) and math.isfinite(v)


class Curves:
    """The study's trials as (row, epoch, value) points on the scale the model minimises."""

    def __init__(self, matrix: Matrix, study: Study, max_step: float | None) -> None:
        self.sign = 1.0 if study.direction == StudyDirection.MINIMIZE else -1.0
        states = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING)
        trials = [t for t in study.get_trials(deepcopy=False, states=states) if t.params]
        # the trial's length: the spec's epochs, or the steps completed trials reached when a script
        # prints iterations (steps past fixed.epochs), else the furthest step any trial reported
        done = max((last_step(t) for t in trials if t.state == TrialState.COMPLETE), default=0.0)
        self.max_step = max(max_step or 0.0, done) or max((last_step(t) for t in trials), default=1.0) or 1.0
        self.trials, self.rows, self.curves = [], [], []
        self.running = [matrix.row(t.params) for t in trials if t.state == TrialState.RUNNING]  # other workers' configs
        for t in trials:
            curve = [(float(s), float(v)) for s, v in sorted(t.intermediate_values.items()) if finite(v)]
            if t.state == TrialState.COMPLETE and t.value is not None and finite(t.value) and (not curve or curve[-1][0] < self.max_step):
                curve.append((self.max_step, float(t.value)))  # a final value without its epoch: the last epoch's
            if curve:
                self.trials.append(t)
                self.rows.append(matrix.row(t.params))
                self.curves.append([(min(s / self.max_step, 1.0), self.sign * v) for s, v in curve])
        self.finals = [
            (row, self.sign * float(t.value))
            for t, row in zip(self.trials, self.rows, strict=True)
            if t.state == TrialState.COMPLETE and t.value is not None and finite(t.value)
        ]

    def points(self, matrix: Matrix, cap: int = MAX_POINTS) -> tuple[Array, Array]:
        picked = [(row, curve[-1]) for row, curve in zip(self.rows, self.curves, strict=True)]
        room = cap - len(picked)
        for row, curve in zip(reversed(self.rows), reversed(self.curves), strict=True):
            if room <= 0:
                break
            earlier = curve[:-1][-room:]
            picked += [(row, point) for point in earlier]
            room -= len(earlier)
        rows = np.array([r for r, _ in picked])
        x = np.c_[matrix.encode(rows), [e for _, (e, _) in picked]]
        return x, np.array([v for _, (_, v) in picked])


def last_step(t: FrozenTrial) -> float:
    return float(max(t.intermediate_values)) if t.intermediate_values else 0.0


class CurveModelSampler(optuna.samplers.BaseSampler):
    def __init__(
        self,
        tree: Space,
        seed: int | None = None,
        startup_trials: int = 3,
        max_step: float | None = None,
        max_trials: int = 300,
        max_ask_s: float = 5.0,
        acquisition: str = "ei",
    ) -> None:
        self.acquisition = acquisition
        self.matrix, self.rng = Matrix(tree), np.random.default_rng(seed)
        self.startup, self.max_step = startup_trials, max_step
        self.max_trials, self.max_ask_s = max_trials, max_ask_s
        self.gp = GP()
        self.seed = seed
        self.fallback: optuna.samplers.BaseSampler = optuna.samplers.RandomSampler(seed=seed)  # TPE once it takes over
        self.random = optuna.samplers.RandomSampler(seed=seed)
        self.handed_over: str | None = None  # why TPE took over, once it did
        self.proposals: dict[int, dict[str, Any]] = {}
        self.last: tuple[Curves, Array, Array] | None = None  # the last fit's data, for CurvePruner
        self.asks, self.ask_s = 0, 0.0

    # Optuna's hooks: no relative space; every parameter is answered from the whole-config proposal
    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return self.fallback.infer_relative_search_space(study, trial) if self.handed_over else {}

    def sample_relative(self, study: Study, trial: FrozenTrial, space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return self.fallback.sample_relative(study, trial, space) if self.handed_over else {}

    def sample_independent(self, study: Study, trial: FrozenTrial, name: str, dist: BaseDistribution) -> Any:
        if self.handed_over:
            return self.fallback.sample_independent(study, trial, name, dist)
        if trial.number not in self.proposals:
            self.proposals[trial.number] = self.propose(study)
        proposed = self.proposals[trial.number].get(name)
        if proposed is not None and dist._contains(dist.to_internal_repr(proposed)):
            return proposed
        return self.random.sample_independent(study, trial, name, dist)  # a parameter outside the tree it was given

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self.fallback.before_trial(study, trial)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState, values: Any) -> None:
        self.proposals.pop(trial.number, None)
        self.fallback.after_trial(study, trial, state, values)

    def propose(self, study: Study) -> dict[str, Any]:
        with single_threaded():
            return self._propose(study)

    def _propose(self, study: Study) -> dict[str, Any]:
        started = time.process_time()
        curves = Curves(self.matrix, study, self.max_step)
        if len(curves.trials) < self.startup:
            return self.matrix.params_of(self.matrix.random(1, self.rng)[0])
        if len(curves.trials) >= self.max_trials:
            self.hand_over(f"{len(curves.trials)} trials: past bo's {self.max_trials}")
        x, y = curves.points(self.matrix)
        self.gp.fit(x, y, refit=len(curves.trials) < 20 or len(curves.trials) % 4 == 0)
        self.last = (curves, x, y)
        row = self.best_candidate(curves, study)
        self.asks, self.ask_s = self.asks + 1, self.ask_s + time.process_time() - started
        if self.asks >= 5 and self.ask_s / self.asks > self.max_ask_s:
            self.hand_over(f"{self.ask_s / self.asks:.1f} s an ask: over bo's {self.max_ask_s:g} s")
        return self.matrix.params_of(row)

    def best_candidate(self, curves: Curves, study: Study) -> Array:
        m = self.matrix
        rows = [m.random(CANDIDATES, self.rng)]
        known = np.array(curves.rows)
        mean_known, _ = self.gp.predict(np.c_[m.encode(known), np.ones(len(known))])
        for i in np.argsort(mean_known)[:BEST]:
            rows += [m.near(known[i], NEIGHBOURS, self.rng, scale) for scale in NEIGHBOUR_SCALES]
        candidates = np.vstack(rows)
        encoded = m.encode(candidates)
        if self.acquisition == "ts" or (self.acquisition == "mix" and self.asks % 2 == 1):
            pick = self.rng.choice(len(candidates), size=min(len(candidates), 800), replace=False)
            draw = self.gp.sample(np.c_[encoded[pick], np.ones(len(pick))], self.rng)  # a fresh draw per ask: workers differ
            return np.asarray(candidates[pick[int(np.argmin(draw))]])
        mean, sd = self.gp.predict(np.c_[encoded, np.ones(len(candidates))])
        best = min((v for _, v in curves.finals), default=float(np.min(mean_known)))
        score = expected_improvement(mean, sd, best) * self.away_from_running(curves, encoded)
        return np.asarray(candidates[int(np.argmax(score))])

    def away_from_running(self, curves: Curves, encoded: Array) -> Array:
        """Parallel workers: a candidate close to a config still training counts less (local penalisation)."""
        factor = np.ones(len(encoded))
        if curves.running and self.gp.theta is not None:
            scales = np.exp(self.gp.theta[: encoded.shape[1]])
            for r in self.matrix.encode(np.array(curves.running)):
                factor *= 1.0 - np.exp(-0.5 * (((encoded - r) / scales) ** 2).sum(1))
        return factor

    def hand_over(self, why: str) -> None:
        if not self.handed_over:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)  # group=True
                self.fallback = optuna.samplers.TPESampler(seed=self.seed, multivariate=True, group=True, n_startup_trials=self.startup)
            self.handed_over = why
            print(f"sampler bo: {why}; TPE proposes the rest", file=sys.stderr, flush=True)

    def final_estimate(self, trial: FrozenTrial, sign: float) -> tuple[float, float] | None:
        """The model's final value (mean, sd, on the study's scale) for a trial given its reported epochs."""
        if self.last is None or self.gp.theta is None:
            return None
        curves, x, y = self.last
        row = self.matrix.encode(self.matrix.row(trial.params)[None, :])[0]
        own = [(min(float(s) / curves.max_step, 1.0), sign * float(v)) for s, v in trial.intermediate_values.items() if finite(v)]
        data_x = np.vstack([x, *[np.r_[row, e] for e, _ in own]]) if own else x
        data_y = np.r_[y, [v for _, v in own]]
        model = GP(theta=self.gp.theta).fit(data_x, data_y, refit=False)
        mean, sd = model.predict(np.r_[row, 1.0][None, :])
        return float(mean[0]), float(sd[0])


class CurvePruner(optuna.pruners.BasePruner):
    """Stop a trial once ``bo``'s model gives its final value less than ``p`` chance to beat the best
    completed one (needs ``sampler: bo``; with another sampler it never prunes)."""

    def __init__(self, p: float = 0.05, min_completed: int = 3) -> None:
        self.p, self.min_completed = p, min_completed

    def prune(self, study: Study, trial: FrozenTrial) -> bool:
        from scipy.stats import norm

        sampler = getattr(study.sampler, "inner", study.sampler)  # a warm start wraps the spec's sampler
        step = trial.last_step
        if not isinstance(sampler, CurveModelSampler) or sampler.handed_over or step is None or sampler.last is None:
            return False
        if step >= sampler.last[0].max_step:
            return False
        done = [t.value for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if finite(t.value)]
        if len(done) < self.min_completed:
            return False
        sign = 1.0 if study.direction == StudyDirection.MINIMIZE else -1.0
        with single_threaded():
            estimate = sampler.final_estimate(trial, sign)
        if estimate is None:
            return False
        mean, sd = estimate
        best = min(sign * float(v) for v in done if v is not None)
        return float(norm.cdf((best - mean) / max(sd, 1e-12))) < self.p
