"""Ray Tune backend: the same spec and objective, trials scheduled by Ray on a local or existing cluster.

Search: the spec's Optuna sampler through ``ray.tune.search.optuna.OptunaSearch``, with the
space tree as a define-by-run function (conditional spaces work), on the spec's own study
storage. Every Ray trial is an Optuna trial of the same study, so ``best``, ``trials``,
``export``, ``report`` and optuna-dashboard read a Ray run exactly like an Optuna run.

Stopping: a Ray scheduler (asha, hyperband, median, pbt, fifo) stops trials by ending them;
the driver then records the trial as PRUNED at its last reported epoch. The driver, not the
trial, writes the study: params and config when Ray asks for a trial, intermediate values
per epoch, and the end state with the usual user attrs (reason, epochs, wall_s, metrics,
history, ...) when Ray reports it finished, stopped or crashed.

PBT perturbs the top-level (unconditional) parameters and moves state between trials through
the reporter's ``save_checkpoint``/``load_checkpoint``; a PBT trial's ``config`` attr is its
final (perturbed) config, its params the first sample.

Longer than 500 lines on purpose: Ray is optional and heavy, and everything that touches it
(search, schedulers, the callback into the Optuna study, failure relay) lives here so that no
other module imports it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

from hpsearch.base.cores import cpu_cores
from hpsearch.base.errors import UserError
from hpsearch.base.text import finite
from hpsearch.engine.devices import visible_gpus
from hpsearch.spec.loader import Spec
from hpsearch.spec.registry import RAY_SCHEDULERS, RayKit, sampler_name
from hpsearch.spec.space import Choice, Const, Float, Int
from hpsearch.study.checkpoints import CHECKPOINT, RESUMED_FROM, clean_up, resume_source, trial_dir
from hpsearch.study.counts import contract_broken, failures_in_a_row, reason
from hpsearch.study.liveness import UNWATCHED, retry
from hpsearch.study.open import build_sampler, open_study
from hpsearch.study.progress import Progress
from hpsearch.study.storage import set_attrs, storage_of, study_id
from hpsearch.study.summary import Summary, announce, budget_spent, refresh, summary, trial_value_text
from hpsearch.study.warmstart import warm_sampler
from hpsearch.trial.objective import load_objective
from hpsearch.trial.reporter import Reporter
from hpsearch.trial.run import COMPLETE, run_trial

KEY = "hpsearch"  # a Ray trial's config is {KEY: {"trial": Optuna trial number, "config": the objective's config}}
METRICS_KEY = "hpsearch_metrics"  # one epoch's metrics as JSON (Ray adds its own keys to results)
FINAL_KEY = "hpsearch_final"  # the completed trial's outcome as JSON
RESUMED_KEY = "hpsearch_resumed"  # with the first result of a retry that resumed: {"trial", "epoch", "history"} as JSON
# A Ray trial whose worker process died (kill -9, the out-of-memory killer, a lost node): not the objective's fault
DIED = re.compile(r"ActorDiedError|RayActorError|WorkerCrashedError|NodeDiedError|OutOfMemoryError|died unexpectedly")
# A pruned/failed outcome inside a Ray error, as base64 of its JSON: Ray's error text may hold the
# message as a Python repr, which escapes the JSON's quotes when the reason has a ' in it.
ENDED = re.compile(r"hpsearch-outcome<([A-Za-z0-9+/=]*)>hpsearch-outcome")
DEFAULT_MAX_EPOCHS = 100  # ASHA/HyperBand horizon when neither pruner.max_epochs nor fixed.epochs says


# ---------------------------------------------------------------------------- inside the Ray trial


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


# ---------------------------------------------------------------------------- driver: the study side


class Recorder:
    """A Tune callback that writes every Ray trial into the Optuna study and prints progress."""

    def __init__(self, study: optuna.Study, spec: Spec, progress: Progress):
        self.study, self.spec, self.progress = study, spec, progress
        self.storage = storage_of(study)
        self.history: dict[int, list[dict[str, float]]] = {}
        self.outcomes: dict[int, dict[str, Any]] = {}
        self.asked: set[int] = set()  # Optuna trials this driver created for Ray
        self.ended: set[int] = set()
        self.running: set[int] = set()
        self.broken: str | None = None  # the objective broke the metric contract: stop the study at once

    def __getstate__(self) -> dict[str, Any]:
        return {}  # Tune pickles its run config for its own resume; a recorder is only useful live

    def trial_id(self, number: int) -> int:
        return self.storage.get_trial_id_from_study_id_trial_number(study_id(self.study), number)

    def on_start(self, trial: Any) -> None:
        self.running.add(trial_number(trial.config))  # pbt: also when a paused trial goes on
        self.progress.counts.running = len(self.running)
        self.progress.refresh()

    def on_result(self, trial: Any, result: dict[str, Any]) -> None:
        number = trial_number(trial.config)
        if FINAL_KEY in result:
            self.outcomes[number] = json.loads(result[FINAL_KEY])
            return
        epoch, metrics = int(result["epoch"]), json.loads(result[METRICS_KEY])
        if RESUMED_KEY in result:
            self.took_over(number, json.loads(result[RESUMED_KEY]))
        self.history.setdefault(number, []).append({"epoch": epoch, **metrics})
        self.progress.epoch(number, epoch, trial_config(trial.config).get("epochs"), metrics)
        first = self.spec.metrics[0]
        if len(self.spec.metrics) == 1 and finite(metrics.get(first)):
            self.storage.set_trial_intermediate_value(self.trial_id(number), epoch, float(metrics[first]))

    def took_over(self, number: int, resumed: dict[str, Any]) -> None:
        """A retry resumed a dead trial's checkpoint: its earlier epochs become this trial's, as on the Optuna backend."""
        tid = self.trial_id(number)
        self.storage.set_trial_user_attr(tid, RESUMED_FROM, {"trial": resumed["trial"], "epoch": resumed["epoch"]})
        self.history[number] = list(resumed["history"])
        first = self.spec.metrics[0]
        for row in resumed["history"]:
            if len(self.spec.metrics) == 1 and finite(row.get(first)):
                self.storage.set_trial_intermediate_value(tid, int(row["epoch"]), float(row[first]))
        self.progress.print(f"trial {number} resumes trial {resumed['trial']} from its epoch {resumed['epoch']} checkpoint")

    def on_end(self, trial: Any, error: str | None) -> None:
        number = trial_number(trial.config)
        if number in self.ended:
            return
        self.ended.add(number)
        self.running.discard(number)
        self.progress.counts.running = len(self.running)
        history = self.history.pop(number, [])
        ended = self.outcomes.pop(number, None) or self.from_error(error) or self.stopped(trial, history)
        tid = self.trial_id(number)
        attrs = {k: v for k, v in ended.items() if k not in ("state", "values", "died")}
        attrs["history"] = history
        attrs["config"] = trial_config(trial.config)  # pbt: the perturbed config
        for key, value in attrs.items():
            self.storage.set_trial_user_attr(tid, key, value)
        state = {"completed": TrialState.COMPLETE, "pruned": TrialState.PRUNED}.get(ended["state"], TrialState.FAIL)
        values = ended.get("values") if state == TrialState.COMPLETE else None
        self.study.tell(number, values[0] if values and len(values) == 1 else values, state=state)
        frozen = self.storage.get_trial(tid)
        self.broken = self.broken or contract_broken(frozen)
        if ended.get("died") and retry(self.study, frozen):  # asked for first in the next round; resumes from its checkpoint
            self.progress.print(f"trial {number} {ended['reason']}: config retried next")
        else:
            with contextlib.suppress(OSError):
                clean_up(self.study, self.spec.study_dir, frozen)
        refresh(self.progress, self.study, self.spec)
        self.progress.counts.running = len(self.running)  # Ray's view: trials paused by pbt are RUNNING in the study
        self.progress.trial(number, reason(frozen), trial_value_text(frozen, self.spec), frozen.params)

    def abandon(self) -> None:
        """Trials Ray never ended (Ctrl-C, a driver error) must not stay RUNNING and hold the budget."""
        for number in sorted(self.asked - self.ended):
            self.ended.add(number)
            tid = self.trial_id(number)
            with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
                self.storage.set_trial_user_attr(tid, "reason", "interrupted")
                self.storage.set_trial_state_values(tid, TrialState.FAIL)

    @staticmethod
    def from_error(error: str | None) -> dict[str, Any] | None:
        if error is None:
            return None
        found = ENDED.search(error)
        if found:
            with contextlib.suppress(ValueError):  # binascii.Error and JSONDecodeError are ValueErrors
                ended: dict[str, Any] = json.loads(base64.b64decode(found.group(1), validate=True))
                return ended
        lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
        if DIED.search(error):
            return {"state": "failed", "reason": "failed: process died (its Ray worker exited)", "died": True}
        return {"state": "failed", "reason": f"failed: {lines[-1] if lines else 'Ray trial error'}"}

    def stopped(self, trial: Any, history: list[dict[str, float]]) -> dict[str, Any]:
        """Ray's scheduler ended the trial after an epoch: pruned (or completed, if that was its last)."""
        if not history:
            return {"state": "failed", "reason": "interrupted (stopped before its first epoch)"}
        last = history[-1]
        epoch = int(last.get("epoch", 0))
        metrics = {k: v for k, v in last.items() if k != "epoch"}
        wall_s = round(float((trial.last_result or {}).get("time_total_s", 0.0)), 3)
        planned = trial_config(trial.config).get("epochs")
        attrs = {
            "epochs": epoch,
            "wall_s": wall_s,
            "metrics": {k: v for k, v in metrics.items() if finite(v)},
            "samples_per_s": metrics.get("samples_per_s"),
            "peak_mem_mb": metrics.get("peak_mem_mb"),
        }
        values = [metrics.get(m) for m in self.spec.metrics]
        if isinstance(planned, int) and epoch >= planned and all(finite(v) for v in values):
            return {"state": "completed", "reason": "completed", "values": values, **attrs}
        return {"state": "pruned", "reason": f"pruned at epoch {epoch}", **attrs}


def trial_error(trial: Any) -> str:
    """The error text Ray wrote for a trial: its local error file (``get_error`` reads the storage
    copy, which is not synced yet when the callback runs, so it came back empty)."""
    path = trial.error_file
    if path and os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    error = trial.get_error()
    return str(error) if error is not None else "Ray trial error"


def make_callback(recorder: Recorder) -> Any:
    from ray.tune import Callback

    class RecordTrials(Callback):
        def __getstate__(self) -> dict[str, Any]:
            return {}

        def on_trial_start(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
            recorder.on_start(trial)

        def on_trial_result(self, iteration: int, trials: list[Any], trial: Any, result: dict[str, Any], **info: Any) -> None:
            recorder.on_result(trial, result)

        def on_trial_complete(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
            recorder.on_end(trial, None)

        def on_trial_error(self, iteration: int, trials: list[Any], trial: Any, **info: Any) -> None:
            recorder.on_end(trial, trial_error(trial))

    return RecordTrials()


def make_stopper(recorder: Recorder) -> Any:
    """A Tune stopper that ends the whole run once a trial broke the metric contract."""
    from ray.tune.stopper import Stopper

    class Stop(Stopper):
        def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
            return False

        def stop_all(self) -> bool:
            return recorder.broken is not None

        def __getstate__(self) -> dict[str, Any]:
            return {}

    return Stop()


def make_searcher(spec: Spec, storage: Any, sampler: optuna.samplers.BaseSampler, recorder: Recorder) -> Any:
    """OptunaSearch on the spec's study: define-by-run over the space tree; the Recorder writes results."""
    from ray.tune.search.optuna import OptunaSearch

    class StudySearch(OptunaSearch):
        def suggest(self, trial_id: str) -> dict[str, Any] | None:
            if super().suggest(trial_id) is None:
                return None
            ot_trial = self._ot_trials[trial_id]
            config = spec.config_for(spec.tree.config_from_params(ot_trial.params))
            set_attrs(recorder.study, ot_trial, user={"config": config, "backend": "ray"}, system={UNWATCHED: True})
            recorder.asked.add(ot_trial.number)
            return {KEY: {"trial": ot_trial.number, "config": config, "resume": resume_of(recorder.study, spec, ot_trial)}}

        def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
            pass  # intermediate values: Recorder (keyed by epoch, not by Ray's iteration)

        def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
            self._completed_trials.add(trial_id)  # the end state: Recorder

        def save(self, checkpoint_path: str) -> None:
            pass  # the study storage is the record; Ray's experiment resume is not used

    def space(trial: Any) -> None:
        spec.tree.suggest(trial)

    modes = ["max" if d == "maximize" else "min" for d in spec.directions]
    metric: Any = spec.metrics if len(modes) > 1 else spec.metrics[0]
    return StudySearch(
        space=space, metric=metric, mode=modes if len(modes) > 1 else modes[0], sampler=sampler, study_name=spec.study, storage=storage
    )


def resume_of(study: optuna.Study, spec: Spec, trial: optuna.Trial) -> dict[str, Any] | None:
    """A retry of a trial whose worker died: the checkpoint it starts from (absolute, for Ray workers elsewhere)."""
    source = resume_source(study, spec.study_dir, trial)
    return {"trial": source[0], "path": str(source[1].resolve())} if source else None


def trial_number(config: dict[str, Any]) -> int:
    return int(config[KEY]["trial"])


def trial_config(config: dict[str, Any]) -> dict[str, Any]:
    return dict(config[KEY]["config"])


def search_setup(spec: Spec, study: optuna.Study, recorder: Recorder, scheduler: str) -> tuple[Any, dict[str, Any] | None]:
    """The search algorithm and param_space for the Tuner.

    PBT refuses a search algorithm, so there Ray's own generator draws each new trial's
    config from a function that asks the same study (and so the same sampler).
    """
    if scheduler != "pbt":
        sampler = warm_sampler(study, build_sampler(spec, len(study.trials)), spec.warm_until)
        return make_searcher(spec, storage_of(study), sampler, recorder), None
    from ray import tune
    from ray.tune.search import BasicVariantGenerator

    def ask(_: Any) -> dict[str, Any]:
        trial = study.ask()
        config = spec.config_for(spec.tree.suggest(trial))
        set_attrs(study, trial, user={"config": config, "backend": "ray"}, system={UNWATCHED: True})
        recorder.asked.add(trial.number)
        return {"trial": trial.number, "config": config, "resume": resume_of(study, spec, trial)}

    return BasicVariantGenerator(), {KEY: tune.sample_from(ask)}


# ---------------------------------------------------------------------------- driver: schedulers & resources


def max_epochs(spec: Spec) -> int:
    epochs = spec.pruner.max_epochs or spec.fixed.get("epochs")
    return int(epochs) if isinstance(epochs, int) and epochs > 0 else DEFAULT_MAX_EPOCHS


def build_scheduler(spec: Spec) -> Any:
    """The spec's Ray scheduler from the registry; FIFO for several metrics (no scheduler compares vectors)."""
    name = spec.ray.scheduler if len(spec.metrics) == 1 else "fifo"
    horizon = max_epochs(spec)
    common = {"time_attr": "epoch", "metric": spec.metrics[0], "mode": "max" if spec.directions[0] == "maximize" else "min"}
    grace = min(spec.pruner.warmup_epochs + 1, horizon)  # as with the Optuna pruners, warmup epochs are never stopped
    return RAY_SCHEDULERS[name].build(spec, RayKit(common, horizon, grace, lambda: build_pbt(spec, common)))


def build_pbt(spec: Spec, common: dict[str, Any]) -> Any:
    from ray.tune.schedulers import PopulationBasedTraining

    class KeepTrialNumber(PopulationBasedTraining):
        """An exploiting trial copies another's config; it must keep its own Optuna trial number."""

        def _get_new_config(self, trial: Any, trial_to_clone: Any) -> tuple[dict[str, Any], dict[str, Any]]:
            config, operations = super()._get_new_config(trial, trial_to_clone)
            config[KEY]["trial"] = trial_number(trial.config)
            return config, operations

    return KeepTrialNumber(
        **common, perturbation_interval=spec.ray.perturbation_interval, hyperparam_mutations=pbt_mutations(spec), require_attrs=False
    )


def pbt_mutations(spec: Spec) -> dict[str, Any]:
    """Top-level parameters only: switching a conditional choice would need the other branch's values."""
    from ray import tune

    out: dict[str, Any] = {}
    for name, p in spec.tree.params.items():
        if isinstance(p, Float):
            out[name] = (
                tune.loguniform(p.low, p.high) if p.log else tune.quniform(p.low, p.high, p.step) if p.step else tune.uniform(p.low, p.high)
            )
        elif isinstance(p, Int):
            out[name] = tune.lograndint(p.low, p.high + 1) if p.log else tune.qrandint(p.low, p.high, p.step)
        elif isinstance(p, Choice) and not p.conditional:
            out[name] = list(p.options)
        elif not isinstance(p, (Const, Choice)):
            raise TypeError(f"unknown parameter {p!r}")
    if not out:
        raise UserError(
            f"{spec.path}: ray.scheduler: pbt needs a top-level parameter to perturb (the space has none outside conditional options)"
        )
    return {KEY: {"config": out}}


def trial_resources(spec: Spec, cluster_gpus: float) -> dict[str, float]:
    """CPUs and GPUs one trial asks Ray for; no GPUs are asked of a cluster that has none."""
    r = spec.resources
    gpu = 0.0
    if cluster_gpus > 0 and r.gpus_per_trial > 0:
        gpu = r.gpus_per_trial if r.gpus_per_trial < 1 else r.gpus_per_trial / r.per_gpu
    return {"cpu": float(r.cpus_per_trial or 1), "gpu": gpu}


@contextlib.contextmanager
def ray_session(spec: Spec) -> Iterator[None]:
    """Join ray.address, or start a local Ray; quiet either way. Ray already initialised by the caller is left as is."""
    import ray

    if ray.is_initialized():
        yield
        return
    quiet: dict[str, Any] = {
        "log_to_driver": False,
        "logging_level": logging.ERROR,
        "runtime_env": {"env_vars": {"RAY_CHDIR_TO_TRIAL_DIR": "0"}},
    }  # trials keep the driver's paths
    address = spec.ray.address
    try:
        if address:
            use_cluster_token()
            ray.init(address=address, **quiet)
        else:
            # "local": a new instance even when another cluster runs here (ray.init() would join that one)
            ray.init(address="local", num_cpus=cpu_cores(), num_gpus=len(visible_gpus()), include_dashboard=False, **quiet)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"ray.address {address or '(local)'}: cannot start or join Ray: {first}") from None
    print(f"ray: the objective's printed output is in {ray_logs()}/worker-*.out (a command objective's also in <trial dir>/output.log)")
    try:
        yield
    finally:
        ray.shutdown()


def ray_logs() -> str:
    """Where Ray keeps the workers' stdout/stderr (log_to_driver is off: trials would interleave on our terminal)."""
    try:
        import ray

        node = ray._private.worker._global_node
        return str(node.get_logs_dir_path()) if node is not None else "/tmp/ray/session_latest/logs"
    except AttributeError:  # another Ray's internals
        return "/tmp/ray/session_latest/logs"


def use_cluster_token() -> None:
    """Ray 2.5x+: ``ray start`` turns on token auth when ~/.ray/auth_token exists, but a joining
    driver does not, and is refused. Do what ``ray start`` does (RAY_AUTH_MODE still wins)."""
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:  # a Ray without token auth
        return
    log = logging.getLogger("ray._private.authentication.authentication_token_setup")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    finally:
        log.setLevel(level)


def concurrent_trials(spec: Spec, resources: dict[str, float], cluster: dict[str, float]) -> int:
    """How many trials fit on the cluster at once (and resources.workers, if set, allows)."""
    fits = [cluster.get("CPU", 1) / resources["cpu"]]
    if resources["gpu"]:
        fits.append(cluster.get("GPU", 0) / resources["gpu"])
    n = max(1, int(min(fits) + 1e-9))
    return min(n, spec.resources.workers) if spec.resources.workers else n


@contextlib.contextmanager
def driver_env(pending: int) -> Iterator[None]:
    """Settings Tune reads in the driver: no Ray loggers of its own, no result-key strictness, no tables.

    Tune lets a search algorithm other than random/grid have one trial pending at a time, so
    trials start one after another; ``pending`` lets as many start as fit on the cluster.
    """
    wanted = {
        "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",
        "TUNE_DISABLE_STRICT_METRIC_CHECKING": "1",
        "RAY_AIR_NEW_OUTPUT": "0",
        "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "1e9",
        "TUNE_MAX_PENDING_TRIALS_PG": str(pending),
        "TUNE_DISABLE_SIGINT_HANDLER": "1",
    }  # Ctrl-C ends the run (trials "interrupted"), not just one Tuner round
    saved = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    tune_log = logging.getLogger("ray.tune")
    level = tune_log.level
    tune_log.setLevel(logging.CRITICAL)  # a pruned or failed trial is our line, not Ray's traceback
    try:
        yield
    finally:
        tune_log.setLevel(level)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


# ---------------------------------------------------------------------------- run


def run(spec: Spec, quiet: bool = False) -> Summary:
    """Run the study on Ray Tune until ``budget.trials`` trials have finished (completed or pruned)."""
    study = open_study(spec)
    spec.study_dir.mkdir(parents=True, exist_ok=True)
    progress = Progress(spec.study, spec.budget.trials, quiet=quiet)
    recorder = Recorder(study, spec, progress)
    refresh(progress, study, spec)
    if budget_spent(progress, spec, progress.counts.done):
        return summary(study, spec, 0, None)
    with ray_session(spec), progress:
        stopped_early = run_rounds(spec, study, recorder, progress)
    return summary(study, spec, len(recorder.ended), stopped_early)


def run_rounds(spec: Spec, study: optuna.Study, recorder: Recorder, progress: Progress) -> str | None:
    """Tuner.fit until the budget is met; failed trials do not spend it, so a round asks for those still missing."""
    import ray
    from ray import tune

    scheduler_name = spec.ray.scheduler if len(spec.metrics) == 1 else "fifo"
    checkpoints = scheduler_name in ("pbt", "hyperband")
    job = Job(spec.objective, str(spec.base_dir.resolve()), os.getcwd(), str(spec.study_dir.resolve()), spec.metrics, checkpoints)
    cluster = ray.cluster_resources()
    resources = trial_resources(spec, cluster.get("GPU", 0))
    concurrency = concurrent_trials(spec, resources, cluster)
    where = (
        f" on Ray ({'cluster ' + spec.ray.address if spec.ray.address else 'local'}; {resources['cpu']:g} CPU, "
        f"{resources['gpu']:g} GPU per trial, {concurrency} at once)"
    )
    announce(progress, spec, progress.counts.done, where, f"sampler {sampler_name(spec)} via OptunaSearch, scheduler {scheduler_name}")

    def trainable(config: dict[str, Any]) -> dict[str, Any]:
        return run_ray_trial(config, job)

    start = time.monotonic()
    with driver_env(concurrency):
        while (remaining := spec.budget.trials - progress.counts.done) > 0:
            left = None if spec.budget.timeout is None else spec.budget.timeout - (time.monotonic() - start)
            if left is not None and left <= 0:
                return None
            failed_before = progress.counts.failed
            search_alg, param_space = search_setup(spec, study, recorder, scheduler_name)
            tuner = tune.Tuner(
                tune.with_resources(trainable, resources),
                param_space=param_space,
                tune_config=tune.TuneConfig(
                    search_alg=search_alg,
                    scheduler=build_scheduler(spec),
                    num_samples=remaining,
                    max_concurrent_trials=concurrency,
                    time_budget_s=left,
                    reuse_actors=True,
                    trial_dirname_creator=lambda t: t.trial_id,  # short; our TensorBoard dirs are trial-<n>
                ),
                run_config=tune.RunConfig(
                    name=f"{spec.study}-{time.strftime('%Y%m%d-%H%M%S')}",
                    storage_path=str((spec.study_dir / "ray").resolve()),  # Ray wants an absolute path
                    verbose=0,
                    callbacks=[make_callback(recorder)],
                    stop=make_stopper(recorder),
                    failure_config=tune.FailureConfig(max_failures=0),
                    # pbt: a trial may clone another's checkpoint from a few perturbation intervals back
                    checkpoint_config=tune.CheckpointConfig(num_to_keep=4) if checkpoints else None,
                ),
            )
            try:
                tuner.fit()
            finally:
                recorder.abandon()
            refresh(progress, study, spec)
            if recorder.broken is not None:  # a bug, not bad luck: the next trial would fail alike
                return recorder.broken
            limit = spec.budget.max_failures
            if progress.counts.failed > failed_before and limit is not None:
                in_a_row = failures_in_a_row(study.get_trials(deepcopy=False))
                if in_a_row >= limit and progress.counts.done < spec.budget.trials:
                    return f"{in_a_row} trials failed in a row (budget.max_failures={limit})"
    return None
