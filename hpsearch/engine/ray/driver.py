"""The Ray backend's ``run``: Tuner rounds until the budget is met.

Before a round starts, what an earlier driver left is dealt with as on the Optuna backend: the
processes of a killed driver's local Ray are ended (leftovers.py) and its RUNNING trials judged
(study/liveness.py ``settle``): failed, queued, retried first. A run cut short (Ctrl-C, SIGTERM,
its cluster lost) fails and queues the trials Ray was running, so the next run retries them first.
"""

from __future__ import annotations

import os
import time
from typing import Any

import optuna

from hpsearch.base.errors import StorageUnreachable, UserError
from hpsearch.engine.ray.cluster import ClusterWatch, cluster_lost, concurrent_trials, driver_env, ray_session, trial_resources
from hpsearch.engine.ray.leftovers import LocalRay, end_leftovers
from hpsearch.engine.ray.recorder import Recorder, make_callback, make_stopper
from hpsearch.engine.ray.search import build_scheduler, search_setup
from hpsearch.engine.ray.trial import Job, run_ray_trial
from hpsearch.spec.loader import Spec
from hpsearch.spec.registry import sampler_name
from hpsearch.study.counts import failures_in_a_row
from hpsearch.study.deaths import ray_cluster_lost
from hpsearch.study.liveness import Observer, intervals, note_stopped, settle
from hpsearch.study.open import open_study
from hpsearch.study.progress import Progress
from hpsearch.study.summary import Summary, announce, budget_spent, refresh, summary


def run(spec: Spec, quiet: bool = False) -> Summary:
    """Run the study on Ray Tune until ``budget.trials`` trials have finished (completed or pruned)."""
    intervals()  # a bad HPSEARCH_HEARTBEAT_S / HPSEARCH_GRACE_S is one line before anything is written
    study = open_study(spec)
    spec.study_dir.mkdir(parents=True, exist_ok=True)
    progress = Progress(spec.study, spec.budget.trials, quiet=quiet)
    end_leftovers(spec.study_dir, progress.print)  # a killed driver's local Ray: before this run starts its own
    settle(study, Observer(study_dir=spec.study_dir), progress.print)  # its trials: failed, their configs next
    recorder = Recorder(study, spec, progress)
    refresh(progress, study, spec)
    if budget_spent(progress, spec, progress.counts.done):
        return summary(study, spec, 0, None)
    try:
        with ray_session(spec) as local, progress, recorder.beating():
            stopped_early = run_rounds(spec, study, recorder, progress, local)
    except Exception as exc:
        if cluster_lost(exc):
            raise gone(spec, exc) from None
        raise
    return summary(study, spec, len(recorder.ended), stopped_early)


def gone(spec: Spec, exc: Exception) -> UserError:
    """The one line for a Ray cluster that went away under the driver (its head stopped or restarted)."""
    first = (str(exc).strip().splitlines() or [""])[0].split(". ")[0]  # Ray goes on with advice on auth tokens
    return UserError(
        f"ray.address {spec.ray.address or '(local)'}: the Ray cluster went away mid-run (stopped or restarted; "
        f"{type(exc).__name__}: {first[:200]}); its running trials are queued and retried first by the next run"
    )


def run_rounds(spec: Spec, study: optuna.Study, recorder: Recorder, progress: Progress, local: LocalRay | None = None) -> str | None:
    """Tuner.fit until the budget is met; failed trials do not spend it, so a round asks for those still missing."""
    import ray
    from ray import tune

    scheduler_name = spec.ray.scheduler if len(spec.metrics) == 1 else "fifo"
    checkpoints = scheduler_name in ("pbt", "hyperband")
    job = Job(spec.objective, str(spec.base_dir.resolve()), os.getcwd(), str(spec.study_dir.resolve()), spec.metrics, checkpoints)
    ClusterWatch(every_s=0)()  # a head restarted since ray.init: Ray's resource read would abort this process
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
                    scheduler=build_scheduler(spec, study),
                    num_samples=remaining,
                    max_concurrent_trials=concurrency,
                    time_budget_s=left,
                    reuse_actors=True,
                    trial_dirname_creator=lambda t: t.trial_id,  # short; our TensorBoard dirs are trial-<n>
                ),
                run_config=run_config(spec, recorder, checkpoints, local),
            )
            fit(tuner, spec, recorder)
            refresh(progress, study, spec)
            if recorder.broken is not None:  # a bug, not bad luck: the next trial would fail alike
                return recorder.broken
            limit = spec.budget.max_failures
            if progress.counts.failed > failed_before and limit is not None:
                in_a_row = failures_in_a_row(study.get_trials(deepcopy=False))
                if in_a_row >= limit and progress.counts.done < spec.budget.trials:
                    return f"{in_a_row} trials failed in a row (budget.max_failures={limit})"
    return None


def run_config(spec: Spec, recorder: Recorder, checkpoints: bool, local: LocalRay | None) -> Any:
    from ray import tune

    return tune.RunConfig(
        name=f"{spec.study}-{time.strftime('%Y%m%d-%H%M%S')}",
        storage_path=str((spec.study_dir / "ray").resolve()),  # Ray wants an absolute path
        verbose=0,
        # a local Ray's processes are written down again as trials start: the raylet starts workers on demand
        callbacks=[make_callback(recorder, local.note if local is not None else None, ClusterWatch())],
        stop=make_stopper(recorder),
        failure_config=tune.FailureConfig(max_failures=0),
        # pbt: a trial may clone another's checkpoint from a few perturbation intervals back
        checkpoint_config=tune.CheckpointConfig(num_to_keep=4) if checkpoints else None,
    )


def fit(tuner: Any, spec: Spec, recorder: Recorder) -> None:
    """One Tuner round. Cut short, it leaves the trials Ray was running as the next run should find them:
    failed and queued (Ctrl-C, SIGTERM, a lost cluster), or RUNNING with a note (the storage unreachable)."""
    try:
        tuner.fit()
    except StorageUnreachable as exc:  # nothing can be written now: the next run fails them with this reason
        note_stopped(spec.study_dir, [os.getpid()], exc.reason)
        raise
    except Exception as exc:  # a lost cluster (run() says so in one line), or a bug
        recorder.abandon(ray_cluster_lost(spec.ray.address or "(local)") if cluster_lost(exc) else "interrupted")
        raise
    except BaseException:
        recorder.abandon()  # Ctrl-C, SIGTERM (cli/main.py raises KeyboardInterrupt for it): "interrupted", queued
        raise
    recorder.abandon()  # the round ended (the time budget) with trials Ray never ended: retried first, too
