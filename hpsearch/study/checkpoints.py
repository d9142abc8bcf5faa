"""Search trials' checkpoints: where they live, which one a retry resumes from, which ones to delete.

A search trial's objective saves through ``reporter.save_checkpoint`` into
``<output>/<study>/trial-<n>/checkpoint.pt`` (the built-in objective: every epoch by default).
When the trial's process dies, liveness.py fails it and queues its config again; that retry
resumes from the newest checkpoint along its chain (the dead trial's own, else the one the
dead trial had itself resumed from). With ``hpsearch worker`` on several machines the output
folder must be shared for this to work; a retry that finds no checkpoint starts at epoch 1.

Disk: a checkpoint is kept while its trial runs, while a retry may still resume from it, and
for the best trial (``export`` names it); every other one is deleted when its trial ends.
"""

from __future__ import annotations

import contextlib
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: export reads checkpoint_of without loading Optuna
    import optuna
    from optuna.trial import FrozenTrial

CHECKPOINT = "checkpoint.pt"
RESUMED_FROM = "resumed_from"  # user attribute of a retry that resumed: {"trial": n, "epoch": k}
RETRY_OF = "retry_of"  # user attribute of a retry: the number of the dead trial (liveness.retry_of)
RETRY_WINDOW_S = 60.0  # a failed trial without a retry yet keeps its checkpoint this long (its retry may be on the way)


def trial_dir(study_dir: Path, number: int) -> Path:
    return study_dir / f"trial-{number}"


def checkpoint_of(study_dir: Path, number: int) -> Path:
    return trial_dir(study_dir, number) / CHECKPOINT


def resume_source(study: optuna.Study, study_dir: Path, trial: optuna.Trial | FrozenTrial) -> tuple[int, Path] | None:
    """(trial number, checkpoint) a retry of a dead trial starts from; None for a fresh trial or when none was saved."""
    from hpsearch.study.storage import trial_by_number

    number = trial.user_attrs.get(RETRY_OF)
    seen: set[int] = set()
    while isinstance(number, int) and number not in seen:
        path = checkpoint_of(study_dir, number)
        if path.exists():
            return number, path
        seen.add(number)  # died before its first checkpoint: the one it resumed from, if any
        earlier = trial_by_number(study, number).user_attrs.get(RESUMED_FROM)
        number = earlier.get("trial") if isinstance(earlier, dict) else None
    return None


def best_numbers(study: optuna.Study) -> set[int]:
    """The study's own best trial(s): one imported by warm_start.study ran elsewhere and has no checkpoint here."""
    from hpsearch.study.counts import own_best

    return {t.number for t in own_best(study)}


def clean_up(study: optuna.Study, study_dir: Path, ended: FrozenTrial) -> list[Path]:
    """After ``ended`` finished here: delete the checkpoints nobody needs any more; the ones deleted.

    The checkpoints ``ended`` resumed from go (it finished in their place). Its own goes unless it
    is the best; when it is the new best, the folder is swept once for every finished, non-best
    trial's checkpoint that no queued or running retry still needs."""
    from optuna.trial import TrialState

    gone: list[Path] = []
    source = ended.user_attrs.get(RESUMED_FROM)
    if isinstance(source, dict) and isinstance(source.get("trial"), int):
        gone += _delete(checkpoint_of(study_dir, source["trial"]))
    own = checkpoint_of(study_dir, ended.number)
    if not own.exists():  # an objective that does not checkpoint: nothing to decide, no query
        return gone
    best = best_numbers(study) if ended.state == TrialState.COMPLETE else set()
    if ended.number not in best:
        return gone + _delete(own)
    files = {int(p.parent.name[6:]): p for p in study_dir.glob(f"trial-*/{CHECKPOINT}") if p.parent.name[6:].isdigit()}
    if len(files) <= 1:
        return gone
    trials = study.get_trials(deepcopy=False)
    by_number = {t.number: t for t in trials}
    needed = _needed(trials, by_number)
    retried = {t.user_attrs.get(RETRY_OF) for t in trials}
    settled = datetime.now() - timedelta(seconds=RETRY_WINDOW_S)
    for number, path in files.items():
        t = by_number.get(number)
        if t is None or not t.state.is_finished() or number in best or number in needed:
            continue
        if t.state == TrialState.FAIL and number not in retried and (t.datetime_complete or datetime.now()) > settled:
            continue  # a dead trial is failed first and its retry queued a moment later (liveness.bury)
        gone += _delete(path)
    return gone


def _needed(trials: list[FrozenTrial], by_number: dict[int, FrozenTrial]) -> set[int]:
    """Trials whose checkpoint a queued or running retry may resume from (see resume_source's chain)."""
    from optuna.trial import TrialState

    todo = [t.user_attrs.get(RETRY_OF) for t in trials if t.state in (TrialState.WAITING, TrialState.RUNNING)]
    needed: set[int] = set()
    while todo:
        number = todo.pop()
        if not isinstance(number, int) or number in needed or number not in by_number:
            continue
        needed.add(number)
        earlier = by_number[number].user_attrs.get(RESUMED_FROM)
        todo.append(earlier.get("trial") if isinstance(earlier, dict) else None)
    return needed


def _delete(path: Path) -> list[Path]:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
        return [path]
    return []
