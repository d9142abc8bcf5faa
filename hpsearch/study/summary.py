"""What the user reads about a study: the first line, the live line's counts, the closing summary, failure and best texts; what the storage keeps of a trial."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import optuna
from optuna.trial import FrozenTrial, TrialState

from hpsearch.spec.registry import pruner_name, sampler_name
from hpsearch.study.storage import (
    redact,
    set_attrs,
)
from hpsearch.trial.run import ERROR_FILE

if TYPE_CHECKING:
    from hpsearch.spec.loader import Spec
    from hpsearch.study.progress import Progress
    from hpsearch.trial.reporter import Reporter
    from hpsearch.trial.run import Outcome
from hpsearch.study.counts import FINISHED, imported_count, last_failed, own_best, own_counts, reason


@dataclass
class Summary:
    study: str
    storage: str
    finished: int  # completed + pruned, all invocations
    pruned: int
    failed: int
    ran: int  # trials started by this invocation
    best: str
    stopped_early: str | None = None  # why the study stopped before its budget, if it did
    last_failure: str | None = None  # the latest failed trial: "trial 7 failed: ... (at f.py:3); traceback in ..."
    contract: bool = False  # stopped because the objective broke its contract (a bug: no retry helps)
    imported: int = 0  # completed trials imported from warm_start.study (not in ``finished``)


def announce(progress: Progress, spec: Spec, done: int, where: str = "", engine: str = "") -> bool:
    """The run's first line; False (and a line saying so) when the budget is already spent."""
    if budget_spent(progress, spec, done):
        return False
    how = engine or f"sampler {sampler_name(spec)}, pruner {pruner_name(spec)}"
    progress.print(
        f"{spec.study}: {'resuming at' if done else 'starting'} {done}/{spec.budget.trials} trials{where}, "
        f"{how}, storage {redact(spec.storage_url)}"
    )
    return True


def budget_spent(progress: Progress, spec: Spec, done: int) -> bool:
    if done < spec.budget.trials:
        return False
    progress.print(f"{spec.study}: budget reached ({done}/{spec.budget.trials} trials finished); raise budget.trials to continue")
    return True


def refresh(progress: Progress, study: optuna.Study, spec: Spec, best: bool = True) -> None:
    """The live line's counts and (``best``: when it may have changed) best, from small queries, not a read of every trial."""
    n = own_counts(study)
    c = progress.counts
    c.done = sum(n.get(s, 0) for s in FINISHED)
    c.pruned = n.get(TrialState.PRUNED, 0)
    c.failed = n.get(TrialState.FAIL, 0)
    c.running = n.get(TrialState.RUNNING, 0)
    if best:
        c.best = best_text(study, spec) if n.get(TrialState.COMPLETE) else "-"
    progress.refresh()


def trial_value_text(trial: FrozenTrial, spec: Spec) -> str:
    if trial.state != TrialState.COMPLETE or trial.values is None:
        return "-"
    return ", ".join(f"{m}={v:.4g}" for m, v in zip(spec.metrics, trial.values, strict=False))


def best_text(study: optuna.Study, spec: Spec) -> str:
    best = own_best(study)  # one ordered query when nothing was imported
    if not best:  # no completed trial of its own yet
        return "-"
    if len(spec.metrics) > 1:
        return f"{len(best)} Pareto-optimal trials"
    return f"{spec.metrics[0]}={best[0].values[0]:.4g} (trial {best[0].number})"


def summary(study: optuna.Study, spec: Spec, ran: int, stopped_early: str | None) -> Summary:
    n = own_counts(study)
    finished = sum(n.get(s, 0) for s in FINISHED)
    last = last_failed(study) if n.get(TrialState.FAIL) else None
    return Summary(
        spec.study,
        redact(spec.storage_url),
        finished,
        n.get(TrialState.PRUNED, 0),
        n.get(TrialState.FAIL, 0),
        ran,
        best_text(study, spec),
        stopped_early,
        failure_text(last, spec) if last else None,
        bool(stopped_early and last is not None and last.user_attrs.get("contract_error")),
        imported_count(study),
    )


def failure_text(trial: FrozenTrial, spec: Spec) -> str:
    """A failed trial's reason, and where its traceback is when the objective raised."""
    where = ""
    if "traceback" in trial.user_attrs:
        file = spec.study_dir / f"trial-{trial.number}" / ERROR_FILE
        where = f"; traceback in {file}" if file.exists() else "; traceback in its user attribute 'traceback'"
    return f"trial {trial.number} {reason(trial)}{where}"


def record(study: optuna.Study, trial: optuna.Trial, outcome: Outcome, reporter: Reporter) -> None:
    """What the storage keeps of a trial besides params and intermediate values, in one commit."""
    set_attrs(study, trial, user={**outcome.attrs(), "history": reporter.history})
