"""Run one objective call as N processes under ``torch.distributed`` (torchrun-style), for a trial
or a ``hpsearch train`` run whose config says ``processes: N`` (N > 1).

The trial process supervises and trains nothing itself: it starts ranks 0..N-1 as
``python -m hpsearch.trial.ranks JOB_DIR RANK`` with RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT (a free local port) set. Each rank joins the process group (gloo on CPU, NCCL with one
GPU per rank), loads the same objective and calls it with a rank reporter:

- rank 0's ``report`` goes over a socket to the trial's real reporter (TensorBoard, history, the
  pruning hook); its verdict (go on, or the exception the reporter raised) is broadcast to every
  rank, so all ranks stop at the same epoch. The other ranks write nothing.
- checkpoints: every rank loads the same file; rank 0 alone saves. Only rank 0 sees ``trial_dir``.
- a rank that raises writes its traceback to JOB_DIR/rank-R.err and exits 1; the supervisor then
  stops the others and the trial fails with the first failing rank's error. Ranks are killed in a
  ``finally`` and each rank exits when its parent is gone, so no process is left behind.
- a rank ends with ``os._exit`` after its atexit handlers (``end_rank``): no interpreter
  finalization, which a gloo thread still freeing tensors can abort, and no wait on threads the
  objective left running.

A user objective sees ``torch.distributed`` initialized and must call ``reporter.report`` on every
rank (it holds a collective); ``reporter.rank`` says which rank it is.
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from datetime import timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from hpsearch.base.cores import cpu_cores
from hpsearch.trial.objective import Objective, load_objective
from hpsearch.trial.reporter import Pruned, Reporter

PROCESSES_KEY = "processes"  # config key: ranks per objective call; 1 = no torch.distributed
JOIN_TIMEOUT_S = 300  # init_process_group and each collective give up after this long (a rank hung)
FINISH_GRACE_S = 120  # after rank 0 returned or stopped, the others have this long to exit
PORT_TRIES = 3  # rendezvous attempts, each on a new free port
POLL_S = 0.1  # how often the supervisor looks at the ranks' exit codes
STOPPED = 3  # a rank's exit code after a stop decided at rank 0 (pruned, diverged, a reporter error)


class RankFailed(RuntimeError):
    """A rank raised (or died); the message names the rank and its error, one line."""

    frames: list[traceback.FrameSummary] | None = None  # where the rank raised (trial.user_frame reads it)


class _RemoteTraceback(Exception):
    """Carries a rank's traceback text, so the trial's error.txt shows where the rank raised."""

    def __str__(self) -> str:
        return str(self.args[0])


def world_size(config: dict[str, Any]) -> int:
    value = config.get(PROCESSES_KEY, 1)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 1 else 1


def entry_of(objective: Objective) -> str:
    """``module:function`` or ``/abs/file.py:function`` that loads ``objective`` again in a rank."""
    module = sys.modules.get(getattr(objective, "__module__", "") or "")
    name = getattr(objective, "__qualname__", "")
    if module is None or not name.isidentifier():
        raise ValueError(f"{PROCESSES_KEY} > 1 needs a module-level objective function, got {objective!r}")
    if module.__name__.startswith("hpsearch_user_") or module.__name__ == "__main__":  # loaded from a file
        return f"{os.path.abspath(str(module.__file__))}:{name}"
    return f"{module.__name__}:{name}"


def launcher(objective: Objective, world: int) -> Objective:
    """An objective with the same contract that runs ``objective`` as ``world`` ranks."""

    def run(config: dict[str, Any], reporter: Any) -> dict[str, float]:
        for attempt in range(1, PORT_TRIES + 1):
            try:
                return launch(entry_of(objective), config, reporter, world)
            except RankFailed as exc:  # another process took the free port before rank 0 listened on it
                if "address already in use" not in str(exc).lower() or attempt == PORT_TRIES:
                    raise
        raise AssertionError("unreachable")

    return run


# ------------------------------------------------------------------------ the supervisor (trial process)


def launch(entry: str, config: dict[str, Any], reporter: Reporter, world: int) -> dict[str, float]:
    """Start the ranks, relay rank 0's reports, return rank 0's result; raise what the trial should see."""
    with tempfile.TemporaryDirectory(prefix="hpsearch-ranks-") as tmp:
        job_dir = Path(tmp)
        job = {
            "entry": entry,
            "config": config,
            "world": world,
            "trial_dir": str(reporter.trial_dir) if reporter.trial_dir is not None else None,
            "checkpoint": str(reporter.checkpoint_path) if reporter.checkpoint_path is not None else None,
            "resume_from": str(reporter.resume_from) if reporter.resume_from is not None else None,
            "sys_path": [p for p in sys.path if p],
        }
        (job_dir / "job.pkl").write_bytes(pickle.dumps(job))
        # the trial's reporter takes the epochs a checkpoint holds (history, TensorBoard, the backend's
        # record of a dead trial's epochs) as it would in one process; the ranks load the state itself
        reporter.load_checkpoint()
        ours, theirs = socket.socketpair()
        procs: list[subprocess.Popen[bytes]] = []
        try:
            port = _free_port()
            for rank in range(world):
                procs.append(_start_rank(job_dir, rank, world, port, theirs if rank == 0 else None))
            theirs.close()
            with Connection(ours.detach()) as conn:
                return _supervise(conn, procs, reporter, job_dir)
        finally:
            theirs.close()
            ours.close()
            _stop(procs)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _start_rank(job_dir: Path, rank: int, world: int, port: int, channel: socket.socket | None) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "RANK": str(rank),
        "LOCAL_RANK": str(rank),
        "WORLD_SIZE": str(world),
        "LOCAL_WORLD_SIZE": str(world),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    }
    if sys.platform == "linux":  # one machine: gloo on loopback, not on whatever the hostname resolves to
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    threads = os.environ.get("OMP_NUM_THREADS", "")
    share = int(threads) if threads.isdigit() else cpu_cores()  # a slot's threads, else our cores
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(max(1, share // world))  # the ranks share them
    args = [sys.executable, "-m", "hpsearch.trial.ranks", str(job_dir), str(rank)]
    fds: tuple[int, ...] = ()
    if channel is not None:
        args.append(str(channel.fileno()))
        fds = (channel.fileno(),)
    return subprocess.Popen(args, env=env, pass_fds=fds)


def _supervise(conn: Connection, procs: list[subprocess.Popen[bytes]], reporter: Reporter, job_dir: Path) -> dict[str, float]:
    stop: BaseException | None = None  # what reporter.report raised at rank 0's request
    result: Any = None
    finished_at: float | None = None
    while True:
        failed = _first_failure(procs, job_dir)
        if failed is not None:
            raise failed
        if all(p.poll() is not None for p in procs):
            break
        if finished_at is not None and time.monotonic() - finished_at > FINISH_GRACE_S:
            raise RankFailed(f"ranks {[i for i, p in enumerate(procs) if p.poll() is None]} did not exit within {FINISH_GRACE_S} s")
        if finished_at is None and conn.poll(POLL_S):
            try:
                kind, *payload = conn.recv()
            except EOFError:  # rank 0 is gone; its exit code says how
                finished_at = time.monotonic()
                continue
            if kind == "report":
                stop = _relay(conn, reporter, *payload)
            else:  # "done"
                result, finished_at = payload[0], time.monotonic()
        elif finished_at is not None:
            time.sleep(POLL_S)
    if stop is not None:
        raise stop
    if procs[0].returncode != 0 or finished_at is None:
        raise RankFailed(f"rank 0 exited with code {procs[0].returncode} without a result")
    return result  # type: ignore[no-any-return]  # the objective's return value; run_trial checks it


def _relay(conn: Connection, reporter: Reporter, epoch: int, metrics: dict[str, float]) -> BaseException | None:
    """Rank 0's report through the trial's reporter; tell rank 0 whether to stop, keep what was raised."""
    try:
        reporter.report(epoch, metrics)
    except Exception as exc:  # noqa: BLE001 - Pruned, Diverged, ContractError...: re-raised once the ranks stopped
        conn.send(("stop", epoch, getattr(exc, "reason", None) or f"stopped at epoch {epoch}: {type(exc).__name__}"))
        return exc
    conn.send(("go",))
    return None


def _first_failure(procs: list[subprocess.Popen[bytes]], job_dir: Path) -> RankFailed | None:
    """The rank whose error came first (the others' errors are usually the broken connection to it)."""
    errors = {rank: job_dir / f"rank-{rank}.err" for rank in range(len(procs))}
    failed = [(rank, p.poll()) for rank, p in enumerate(procs) if p.poll() not in (None, 0, STOPPED) or errors[rank].exists()]
    if not failed:
        return None
    errors = {rank: errors[rank] for rank, _ in failed}
    written = {rank: _read_error(path) for rank, path in errors.items() if path.exists()}
    killed = [(rank, code) for rank, code in failed if rank not in written and code is not None and code < 0]
    if written and not killed:  # a rank killed by a signal (OOM killer) comes before its peers' connection errors
        rank = min(written, key=lambda r: written[r][0])
        text = written[rank][1]
        last = text.rstrip().splitlines()[-1] if text.strip() else "no error text"
        error = RankFailed(f"rank {rank}: {last}")
        error.__cause__ = _RemoteTraceback(f"\n\nrank {rank}'s traceback:\n{text}")
        frames = job_dir / f"rank-{rank}.frames"
        if frames.exists():
            error.frames = [traceback.FrameSummary(f, n, name, lookup_line=False) for f, n, name in pickle.loads(frames.read_bytes())]
        return error
    rank, code = (killed or failed)[0]
    how = f"killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
    return RankFailed(f"rank {rank} {how} without a Python error (out of memory? see the system log)")


def _read_error(path: Path) -> tuple[int, str]:
    """(when the rank caught it, in CLOCK_MONOTONIC ns, shared by all processes; the traceback)."""
    stamp, _, text = path.read_text(encoding="utf-8").partition("\n")
    return int(stamp), text


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    """Terminate what still runs, kill what ignores it, and reap all: no rank outlives its trial."""
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + 5
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


# ------------------------------------------------------------------------ a rank (python -m hpsearch.trial.ranks)


class RankReporter(Reporter):
    """What the objective gets in a rank: ``report`` is a collective; only rank 0 talks to the trial."""

    def __init__(self, rank: int, conn: Connection | None, trial_dir: Path | None, checkpoint: Path | None, resume_from: Path | None):
        super().__init__(trial_dir=trial_dir if rank == 0 else None, checkpoint_path=checkpoint, resume_from=resume_from)
        self.rank, self.conn = rank, conn

    @property
    def writer(self) -> Any:
        return None  # TensorBoard is written by the trial's own reporter, from rank 0's reports

    def report(self, epoch: int, metrics: dict[str, float]) -> None:
        import torch.distributed as dist

        metrics = {k: float(v) for k, v in metrics.items()}
        self.history = [h for h in self.history if h["epoch"] < epoch]  # an epoch again after a resume: the new one counts
        self.history.append({"epoch": epoch, **metrics})
        verdict: list[Any] = [None]
        if self.conn is not None:
            self.conn.send(("report", epoch, metrics))
            verdict[0] = self.conn.recv()
        dist.broadcast_object_list(verdict, src=0)
        if verdict[0][0] == "stop":
            _, at, reason = verdict[0]
            raise Pruned(at, reason)

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        if self.rank == 0:
            super().save_checkpoint(state)


def _watch_parent() -> None:
    """Exit when the trial process is gone (killed with SIGKILL, so its finally never ran)."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def rank_main(job_dir: Path, rank: int, channel_fd: int | None) -> int:
    _watch_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the supervisor's to handle; it stops the ranks
    conn = Connection(channel_fd) if channel_fd is not None else None
    try:
        job = pickle.loads((job_dir / "job.pkl").read_bytes())
        sys.path.extend(p for p in job["sys_path"] if p not in sys.path)
        _join(job, rank)
        objective = load_objective(job["entry"])
        trial_dir = Path(job["trial_dir"]) if job["trial_dir"] else None
        paths = [Path(job[key]) if job[key] else None for key in ("checkpoint", "resume_from")]
        result = objective(dict(job["config"]), RankReporter(rank, conn, trial_dir, *paths))
        if conn is not None:
            conn.send(("done", result))
        return 0
    except Pruned:
        return STOPPED
    except BaseException:  # noqa: BLE001 - the supervisor reads it from the file and fails the trial
        # stamped on catching: a peer's "connection closed" error comes after this rank's own error
        caught = time.monotonic_ns()
        (job_dir / f"rank-{rank}.frames").write_bytes(pickle.dumps([(f.filename, f.lineno, f.name) for f in _frames()]))
        (job_dir / f"rank-{rank}.tmp").write_text(f"{caught}\n{traceback.format_exc()}", encoding="utf-8")
        (job_dir / f"rank-{rank}.tmp").replace(job_dir / f"rank-{rank}.err")  # whole, or absent
        sys.stderr.flush()
        os._exit(1)  # no destroy_process_group or interpreter shutdown: either may wait on the peers forever
    finally:
        _leave()


def _frames() -> list[traceback.FrameSummary]:
    """The handled exception's frames below rank_main's own call of the objective."""
    return list(traceback.extract_tb(sys.exc_info()[2]))[1:]


def _join(job: dict[str, Any], rank: int) -> None:
    import torch
    import torch.distributed as dist

    world = int(job["world"])
    wants_cuda = str(job["config"].get("device", "auto")) != "cpu"
    nccl = wants_cuda and torch.cuda.is_available() and torch.cuda.device_count() >= world
    if nccl:
        torch.cuda.set_device(rank)  # one GPU per rank, within the slot's CUDA_VISIBLE_DEVICES
    dist.init_process_group("nccl" if nccl else "gloo", rank=rank, world_size=world, timeout=timedelta(seconds=JOIN_TIMEOUT_S))


def _leave() -> None:
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_initialized():
        dist.destroy_process_group()


def end_rank(code: int) -> None:
    """Exit without interpreter finalization, once atexit handlers ran and output is flushed.

    After ``destroy_process_group`` a gloo worker thread can still be freeing the last collective's
    tensors, which takes the GIL; during finalization that thread is ended under C++ frames and the
    rank aborts ("terminate called without an active exception", SIGABRT: 9 launches in 70 on 2
    cores). ``os._exit`` ends every thread at once; it also ends threads the objective left running
    (finalization would wait on them forever)."""
    import atexit

    try:
        atexit._run_exitfuncs()  # logging.shutdown, the objective's own handlers
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # closed, or its pipe gone with the parent
                pass
        os._exit(code)


if __name__ == "__main__":
    end_rank(rank_main(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else None))
