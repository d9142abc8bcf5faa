"""Tier B of the search-quality benchmark: a replayable table of trained Fashion-MNIST configs.

Draws N scrambled-Sobol configs of the bench Fashion-MNIST space (plus M held-out configs from
another scramble, for validating a replay) and trains each with the built-in objective for the
spec's epochs with training seeds 0 and 1, recording every epoch's val_acc and seconds. One
process per core, one torch thread each. Rows are appended to a gzipped JSON-lines file as
they finish, so a run cut short keeps every finished row.

Needs only torch, numpy, scipy and pyyaml (no optuna, pydantic or ray): it runs on a machine
where hpsearch is not installed, run from the checkout's root.

    python -m bench.tier_b_table --data-root /usr/share/datasets --out bench/results/tier_b
    python -m bench.tier_b_table --smoke --data-root /usr/share/datasets --out /tmp/tb   # seconds
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import platform
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

from bench.common import ROOT, cpu_model, started_as  # standard library only: runs where hpsearch is not installed

SPEC = ROOT / "bench" / "spaces" / "bench_fashion.yaml"
SEEDS = (0, 1)  # training seeds per config


class UnitTrial:
    """An Optuna-trial stand-in that answers suggest_* from a point of the unit cube, one
    coordinate per parameter path, so hpsearch's own Space.suggest maps Sobol points."""

    def __init__(self, point: list[float], dims: dict[str, int]) -> None:
        self.point, self.dims = point, dims

    def _u(self, name: str) -> float:
        return min(max(self.point[self.dims[name]], 0.0), 1.0 - 1e-12)

    def suggest_float(self, name: str, low: float, high: float, log: bool = False, step: float | None = None) -> float:
        u = self._u(name)
        if log:
            return math.exp(math.log(low) + u * (math.log(high) - math.log(low)))
        value = low + u * (high - low)
        return low + round((value - low) / step) * step if step else value

    def suggest_int(self, name: str, low: int, high: int, log: bool = False, step: int = 1) -> int:
        n = (high - low) // step + 1
        return low + min(int(self._u(name) * n), n - 1) * step

    def suggest_categorical(self, name: str, options: list[Any]) -> Any:
        return options[min(int(self._u(name) * len(options)), len(options) - 1)]


def load_spec(path: Path) -> tuple[dict[str, Any], Any]:
    """The spec's fixed keys and its parsed space (hpsearch.search.space: no pydantic needed)."""
    import yaml

    from hpsearch.search.space import parse_space

    raw = yaml.safe_load(path.read_text())
    errors: list[str] = []
    space = parse_space(raw["space"], "space", errors)
    if errors:
        raise SystemExit(f"{path}: " + "; ".join(errors))
    return dict(raw.get("fixed") or {}), space


def draw(space: Any, n: int, scramble_seed: int) -> list[dict[str, Any]]:
    """n configs from a scrambled Sobol sequence, each parameter path on its own axis."""
    from scipy.stats import qmc

    dims = {path: i for i, (path, _) in enumerate(space.parameters())}
    points = qmc.Sobol(d=len(dims), scramble=True, seed=scramble_seed).random(n)
    return [space.suggest(UnitTrial(list(p), dims)) for p in points]


class Recorder:
    """The reporter the objective sees: records each epoch, never prunes, keeps no checkpoint."""

    def __init__(self) -> None:
        self.epochs: list[dict[str, float]] = []

    def report(self, epoch: int, metrics: dict[str, float]) -> None:
        self.epochs.append({"epoch": epoch, **{k: float(v) for k, v in metrics.items()}})


def _worker_init() -> None:
    import torch

    torch.set_num_threads(1)


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    from objectives.image_classification import train  # the checkout's: hpsearch.objectives exists only where installed

    recorder, t0 = Recorder(), time.perf_counter()
    row: dict[str, Any] = {k: job[k] for k in ("id", "set", "seed")} | {"config": job["config"]}
    try:
        out = train({**job["fixed"], **job["config"], "seed": job["seed"], "threads": 1}, recorder)
        row["final"] = {k: float(v) for k, v in out.items()}
    except Exception as exc:  # a diverging config is data too: its curve so far and the reason
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
    for key, metric in (("val_acc", "val_acc"), ("epoch_s", "epoch_time_s"), ("train_loss", "train_loss")):
        row[key] = [e.get(metric, math.nan) for e in recorder.epochs]
    return row | {"seconds": time.perf_counter() - t0}


def jobs_for(configs: list[dict[str, Any]], held_out: list[dict[str, Any]], fixed: dict[str, Any]) -> list[dict[str, Any]]:
    """Both seeds of a config next to each other, held-out configs interleaved (one per 8), so a
    run cut short still has complete pairs and some held-out rows."""
    jobs: list[dict[str, Any]] = []
    h = iter(enumerate(held_out))
    for i, config in enumerate(configs):
        if i % 8 == 0 and (nxt := next(h, None)) is not None:
            j, hc = nxt
            jobs += [{"id": f"h{j}", "set": "holdout", "config": hc, "seed": s, "fixed": fixed} for s in SEEDS]
        jobs += [{"id": f"t{i}", "set": "table", "config": config, "seed": s, "fixed": fixed} for s in SEEDS]
    for j, hc in h:
        jobs += [{"id": f"h{j}", "set": "holdout", "config": hc, "seed": s, "fixed": fixed} for s in SEEDS]
    return jobs


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=448, help="table configs")
    p.add_argument("--m", type=int, default=48, help="held-out configs")
    p.add_argument("--data-root", default=None, help="folder holding fashion-mnist/ (default: the spec's data_root)")
    p.add_argument("--out", type=Path, required=True, help="folder for table.jsonl.gz and meta.json")
    p.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)))
    p.add_argument("--limit-s", type=float, default=None, help="start no job after this many seconds")
    p.add_argument("--smoke", action="store_true", help="3 configs, 1 held-out, 2 epochs, small subsets")
    args = p.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"

    fixed, space = load_spec(SPEC)
    fixed.pop("threads", None)
    if args.data_root:
        fixed["data_root"] = args.data_root
    n, m = args.n, args.m
    if args.smoke:
        n, m = 3, 1
        fixed.update(epochs=2, train_subset=1000, val_subset=500)
    configs, held_out = draw(space, n, scramble_seed=0), draw(space, m, scramble_seed=1)
    jobs = jobs_for(configs, held_out, fixed)

    args.out.mkdir(parents=True, exist_ok=True)
    t0, done, failed = time.perf_counter(), 0, 0
    with gzip.open(args.out / "table.jsonl.gz", "wt") as sink, ProcessPoolExecutor(args.jobs, initializer=_worker_init) as pool:
        pending: set[Future[dict[str, Any]]] = set()
        queue = iter(jobs)
        while True:  # rows as they finish; no new job once --limit-s has passed
            while len(pending) < args.jobs and (args.limit_s is None or time.perf_counter() - t0 < args.limit_s):
                if (job := next(queue, None)) is None:
                    break
                pending.add(pool.submit(run_job, job))
            if not pending:
                break
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for row in (f.result() for f in finished):
                sink.write(json.dumps(row) + "\n")
                sink.flush()
                done, failed = done + 1, failed + ("error" in row)
            print(f"{done}/{len(jobs)} rows ({failed} failed), {time.perf_counter() - t0:.0f} s", flush=True)
    meta = {"spec": str(SPEC.relative_to(ROOT)), "fixed": fixed, "n": n, "m": m, "seeds": list(SEEDS), "rows": done}
    meta |= {"rows_planned": len(jobs), "failed": failed, "wall_s": round(time.perf_counter() - t0, 1), "jobs": args.jobs}
    meta |= {"cpu": cpu_model(), "python": platform.python_version(), "torch": __import__("torch").__version__}
    meta["command"] = started_as("bench.tier_b_table", argv)
    (args.out / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
