"""Where Ray runs: join ray.address or start a local Ray, the resources of one trial, how many fit,
and the settings Tune reads in the driver."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from hpsearch.base.cores import cpu_cores
from hpsearch.base.errors import UserError
from hpsearch.engine.devices import visible_gpus
from hpsearch.engine.ray.leftovers import LocalRay
from hpsearch.spec.loader import Spec


def trial_resources(spec: Spec, cluster_gpus: float) -> dict[str, float]:
    """CPUs and GPUs one trial asks Ray for; no GPUs are asked of a cluster that has none."""
    r = spec.resources
    gpu = 0.0
    if cluster_gpus > 0 and r.gpus_per_trial > 0:
        gpu = r.gpus_per_trial if r.gpus_per_trial < 1 else r.gpus_per_trial / r.per_gpu
    return {"cpu": float(r.cpus_per_trial or 1), "gpu": gpu}


@contextlib.contextmanager
def ray_session(spec: Spec) -> Iterator[LocalRay | None]:
    """Join ray.address, or start a local Ray; quiet either way. Ray already initialised by the caller is left as is.

    Yields the record of a local Ray this driver started (leftovers.py), None for a cluster it joined."""
    import ray

    if ray.is_initialized():
        yield None
        return
    quiet: dict[str, Any] = {
        "log_to_driver": False,
        "logging_level": logging.ERROR,
        "runtime_env": {"env_vars": {"RAY_CHDIR_TO_TRIAL_DIR": "0"}},
    }  # trials keep the driver's paths
    address = spec.ray.address
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
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
    if threading.current_thread() is threading.main_thread():
        # Ray's core worker puts its own SIGTERM handler in place (a stack dump, exit 1, trials left RUNNING):
        # the run's own must stay (cli/main.py: the running trials failed and queued, exit 143)
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
    print(f"ray: the objective's printed output is in {ray_logs()}/worker-*.out (a command objective's also in <trial dir>/output.log)")
    local = None if address else LocalRay(spec.study_dir)
    try:
        if local is not None:
            local.note()  # from now on a kill -9 of this driver leaves a record for the next run to end its Ray
        yield local
    finally:
        ray.shutdown()
        if local is not None:
            local.forget()


class ClusterWatch:
    """Called on every step of Tune's loop; every ``every_s`` seconds it asks the head whether it is still the
    cluster this driver joined. A restarted head answers WrongClusterID (raised: ``cluster_lost``), which Ray
    itself tells the driver only when a trial's actor fails: with no trial running yet, Tune waited on the
    old cluster for good. A head that does not answer is no verdict: Ray waits for it (60 s), and so do we."""

    def __init__(self, every_s: float = 5.0, timeout_s: float = 1.0):
        self.every_s, self.timeout_s = every_s, timeout_s
        self.due = time.monotonic() + every_s

    def __call__(self) -> None:
        if time.monotonic() < self.due:
            return
        import ray

        gcs: Any = getattr(ray._private.worker.global_worker, "gcs_client", None)
        if gcs is None:  # another Ray's internals: Ray's own errors still end the run
            return
        with contextlib.suppress(ray.exceptions.RpcError, TimeoutError):  # a timeout: not answering now
            gcs.internal_kv_get(b"session_name", b"session", timeout=self.timeout_s)
        self.due = time.monotonic() + self.every_s


def cluster_lost(exc: BaseException) -> bool:
    """Ray itself failed under the driver (its head stopped or restarted: WrongClusterID, an RPC error), not our code."""
    import ray

    return isinstance(exc, ray.exceptions.RayError)


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
        "TUNE_DISABLE_SIGINT_HANDLER": "1",  # Ctrl-C ends the run (trials "interrupted"), not just one Tuner round
        # Tune reads the cluster's resources every 10 s for its status table (off here); after a head restart that
        # read kills the driver (a CHECK in Ray's C++ on WrongClusterID: a stack dump, exit 1) before Python hears of it
        "TUNE_STATE_REFRESH_PERIOD": "1e9",
    }
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
