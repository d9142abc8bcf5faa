"""Inside the Ray trial: run the objective once, send each epoch to Ray Tune, carry the outcome back.

The driver, not the trial, writes the study: the trial only reports. A pruned or failed
outcome leaves the trial as ``TrialEnded``, its JSON base64-encoded in the message (Ray's
error text may hold the message as a Python repr, which escapes the JSON's quotes).
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hpsearch.study.checkpoints import CHECKPOINT, trial_dir
from hpsearch.trial.objective import load_objective
from hpsearch.trial.reporter import Reporter
from hpsearch.trial.run import COMPLETE, run_trial

KEY = "hpsearch"  # a Ray trial's config is {KEY: {"trial": Optuna trial number, "config": the objective's config}}

METRICS_KEY = "hpsearch_metrics"  # one epoch's metrics as JSON (Ray adds its own keys to results)

FINAL_KEY = "hpsearch_final"  # the completed trial's outcome as JSON

RESUMED_KEY = "hpsearch_resumed"  # with the first result of a retry that resumed: {"trial", "epoch", "history"} as JSON

ENDED = re.compile(r"hpsearch-outcome<([A-Za-z0-9+/=]*)>hpsearch-outcome")


@dataclass(frozen=True)
class Job:
    """What a Ray trial needs from the driver; absolute paths, since Ray workers start elsewhere."""

    objective: str
    base_dir: str
    cwd: str
    study_dir: str
    metrics: list[str]
    checkpoints: bool  # pbt, hyperband: pause/exploit restore a trial from its last checkpoint


class TrialEnded(Exception):
    """Carries a pruned (diverged) or failed outcome out of the Ray trial to the driver."""


class RayReporter(Reporter):
    """Sends each epoch to Ray Tune, whose scheduler may stop the trial; checkpoints ride along.

    With checkpoints on, an epoch's result waits for the objective's ``save_checkpoint`` (or
    the next epoch) so both reach Ray together, whichever order the objective calls them in.
    """

    def __init__(self, trial_dir: Path, checkpoints: bool, resume_from: Path | None = None, source: int | None = None):
        super().__init__(
            trial_dir=trial_dir,
            prune_hook=self._to_ray,
            checkpoint_path=trial_dir / CHECKPOINT,
            resume_from=resume_from,
            on_resume=self._resumed,
        )
        self.checkpoints = checkpoints
        self.source = source  # the dead trial whose checkpoint ``resume_from`` is
        self.pending: dict[str, Any] | None = None
        self.saved: Path | None = None  # a checkpoint folder not yet handed to Ray
        self.resumed: dict[str, Any] | None = None  # told to the driver with the next result

    def _resumed(self, epoch: int, history: list[dict[str, float]]) -> None:
        self.resumed = {"trial": self.source, "epoch": epoch, "history": list(history)}  # a copy: report() appends next

    def _to_ray(self, epoch: int, metrics: dict[str, float]) -> bool:
        self.flush()
        self.pending = {"epoch": epoch, **metrics, METRICS_KEY: json.dumps(metrics)}
        if self.resumed is not None:
            self.pending[RESUMED_KEY], self.resumed = json.dumps(self.resumed), None
        if not self.checkpoints or self.saved is not None:
            self.flush()
        return False  # Ray stops a trial by ending it, not through the objective

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        """The trial folder's checkpoint (a retry after a dead worker resumes from it), and with pbt/hyperband Ray's too."""
        super().save_checkpoint(state)
        if not self.checkpoints:
            return
        import torch

        folder = Path(tempfile.mkdtemp(prefix="hpsearch-ckpt-"))
        torch.save(state, folder / "state.pt")
        self.saved = folder
        if self.pending is not None:
            self.flush()

    def load_checkpoint(self) -> dict[str, Any] | None:
        """Ray's checkpoint of this trial (pbt/hyperband: paused, or cloned from a better one), else the folder's."""
        from ray import tune

        checkpoint = tune.get_checkpoint() if self.checkpoints else None
        if checkpoint is None:
            return super().load_checkpoint()
        import torch

        with checkpoint.as_directory() as folder:
            state: dict[str, Any] = torch.load(Path(folder) / "state.pt", map_location="cpu", weights_only=False)
        return state

    def flush(self) -> None:
        if self.pending is None:
            return  # a checkpoint saved before its epoch's report waits for that report
        from ray import tune

        checkpoint = tune.Checkpoint.from_directory(str(self.saved)) if self.saved else None
        tune.report(self.pending, checkpoint=checkpoint)  # persists the checkpoint before returning
        if self.saved is not None:
            shutil.rmtree(self.saved, ignore_errors=True)
        self.pending, self.saved = None, None


def ended_text(ended: dict[str, Any]) -> str:
    """The outcome as TrialEnded's message (``Recorder.from_error`` reads it back from Ray's error text)."""
    return f"hpsearch-outcome<{base64.b64encode(json.dumps(ended).encode()).decode()}>hpsearch-outcome"


def run_ray_trial(config: dict[str, Any], job: Job) -> dict[str, Any]:
    """The Ray trainable: run the objective once; return the outcome, or raise it when not completed."""
    if job.cwd not in sys.path:
        sys.path.insert(0, job.cwd)  # module objectives (objectives.x:fn) import as they do in the driver
    number, cfg = trial_number(config), trial_config(config)
    resume = config[KEY].get("resume") or {}
    reporter = RayReporter(
        trial_dir(Path(job.study_dir), number), job.checkpoints, Path(resume["path"]) if resume else None, resume.get("trial")
    )
    outcome = run_trial(load_objective(job.objective, Path(job.base_dir)), cfg, reporter, job.metrics)
    reporter.flush()
    reporter.close(hparams=cfg, final=outcome.metrics)
    ended = {"state": outcome.state, "values": outcome.values, **outcome.attrs()}
    if outcome.state != COMPLETE:
        raise TrialEnded(ended_text(ended))
    return {"epoch": reporter.epochs, **outcome.metrics, FINAL_KEY: json.dumps(ended)}


def trial_number(config: dict[str, Any]) -> int:
    return int(config[KEY]["trial"])


def trial_config(config: dict[str, Any]) -> dict[str, Any]:
    return dict(config[KEY]["config"])
