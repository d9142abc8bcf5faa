"""The Ray backend's ``run``: Tuner rounds until the budget is met."""

from __future__ import annotations

import os
import time
from typing import Any

import optuna

from hpsearch.engine.ray.cluster import concurrent_trials, driver_env, ray_session, trial_resources
from hpsearch.engine.ray.recorder import Recorder, make_callback, make_stopper
from hpsearch.engine.ray.search import build_scheduler, search_setup
from hpsearch.engine.ray.trial import Job, run_ray_trial
from hpsearch.spec.loader import Spec
from hpsearch.spec.registry import sampler_name
from hpsearch.study.counts import failures_in_a_row
from hpsearch.study.open import open_study
from hpsearch.study.progress import Progress
from hpsearch.study.summary import Summary, announce, budget_spent, refresh, summary


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
