"""Fixed configs re-run through the engine: queue the runs a re-run study still misses, run them
with the claim loop (slots here, ``hpsearch worker`` elsewhere), read each run's outcome.
What promote and audit share; the queue itself is study/rerun_queue.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpsearch.base.text import fmt
from hpsearch.reading.results import wall_s
from hpsearch.spec.loader import Spec
from hpsearch.study.storage import redact

if TYPE_CHECKING:
    import optuna

    from hpsearch.study.rerun_queue import Run


def join_hint(spec: Spec, rstudy: optuna.Study) -> str:
    """How another machine joins a re-run study (a default sqlite storage moves with the study name, so it is named)."""
    return (
        f"other machines join with: hpsearch worker {spec.path or 'SPEC'} --study {rstudy.study_name} --storage {redact(spec.storage_url)}"
    )


def run_fixed(spec: Spec, rstudy: optuna.Study, runs: list[Run], quiet: bool, stream: Any, queue_only: bool = False) -> str | None:
    """Queue the runs that have not finished and run them with the engine's claim loop (``--workers``
    slots here; ``hpsearch worker`` processes elsewhere may join). Why the engine stopped early, if it did."""
    from hpsearch.engine.optuna import run
    from hpsearch.study.rerun_queue import drop_others, finished, planned, queue, rerun_spec

    missing = [r for r in runs if finished(rstudy, r) is None]
    drop_others(rstudy, missing)
    if not missing:
        return None
    added = queue(rstudy, missing)
    print(f"{rstudy.study_name}: {len(missing)} runs to go ({added} newly queued); {join_hint(spec, rstudy)}", file=stream, flush=True)
    if spec.backend != "optuna":
        print(f"backend {spec.backend}: re-runs of fixed configs go through the embedded engine's slots (no scheduler needed)", file=stream)
    if queue_only:
        return None
    summary = run(rerun_spec(spec, rstudy.study_name, planned(rstudy)), quiet=quiet)
    return summary.stopped_early


def run_outcome(rstudy: optuna.Study, run: Run, metric: str, earlier: bool) -> tuple[float | None, str]:
    """(first metric, how it went) of one re-run after the engine ran: finished, failed, or not run."""
    from hpsearch.study.rerun_queue import finished, last_failure

    done = finished(rstudy, run)
    if done is not None:
        kind = (rstudy.user_attrs.get("reruns") or {}).get("kind", "promote")
        how = f"from an earlier {kind} run" if earlier else f"{fmt(wall_s(done))} s"
        return done.values[0], how
    failed = last_failure(rstudy, run)
    return None, str(failed.user_attrs.get("reason", "failed")) if failed is not None else "not run (stopped early or interrupted)"
