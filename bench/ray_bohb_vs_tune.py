"""Does ray_bohb's stand-in for Tune's controller (bench/quality/ray_methods.py) drive TuneBOHB and
HyperBandForBOHB as a real ``tune.Tuner`` does? Both run the same search (mfh3_good, seed 200, one
trial at a time); every call TuneBOHB receives is recorded, with a digest of numpy's global random
state at each ``suggest``, and the two call lists are compared. The Tuner stops after ``--trials``
trials (``num_samples``), so the lists agree up to the stand-in's suggest of the next trial.

    .venv/bin/python -m bench.ray_bohb_vs_tune --trials 26    # about 2 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.quality.peers import configspace, flat_config
from bench.quality.ray_methods import ray_bohb
from bench.quality.registry import make_task

TASK, SEED = "mfh3_good", 200
CALLS: list[tuple[str, str, str]] = []  # (method, trial id, epoch:budget or random-state digest)


def record_searcher_calls() -> None:
    import numpy as np
    from ray.tune.search.bohb import TuneBOHB

    def wrap(name: str) -> None:
        orig = getattr(TuneBOHB, name)

        def call(self: Any, trial_id: str, *args: Any, **kwargs: Any) -> Any:
            note = ""
            if name == "suggest":
                _, keys, pos, *_ = np.random.get_state()
                note = hashlib.md5(keys.tobytes() + str(pos).encode()).hexdigest()[:8]
            elif name == "on_trial_result":
                result = args[0] if args else kwargs["result"]
                note = f"{result['epoch']}:{result.get('hyperband_info', {}).get('budget')}"
            out = orig(self, trial_id, *args, **kwargs)
            CALLS.append((name, trial_id, note))
            return out

        setattr(TuneBOHB, name, call)

    for name in ("suggest", "on_trial_result", "on_trial_complete", "on_pause", "on_unpause"):
        wrap(name)


def tuner_run(trials: int) -> float:
    """What a Ray user writes: a training function that reports each epoch with a checkpoint
    (so that a paused trial resumes), TuneBOHB + HyperBandForBOHB, one CPU."""
    import numpy as np
    import ray
    from ray import tune
    from ray.tune.schedulers import HyperBandForBOHB
    from ray.tune.search.bohb import TuneBOHB

    task = make_task(TASK)
    tree, cs = configspace(task, SEED)

    def train(config: dict[str, Any]) -> None:
        curve = task.curve(flat_config(tree, config), task.max_epochs, 0)
        done = 0
        if checkpoint := tune.get_checkpoint():
            with checkpoint.as_directory() as folder:
                done = int(Path(folder, "epoch").read_text())
        for epoch in range(done + 1, task.max_epochs + 1):
            with tempfile.TemporaryDirectory() as folder:
                Path(folder, "epoch").write_text(str(epoch))
                tune.report({"epoch": epoch, "value": curve[epoch - 1]}, checkpoint=tune.Checkpoint.from_directory(folder))

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    t0 = time.perf_counter()
    np.random.seed(SEED)  # what ray_bohb seeds: hpbandster draws from numpy's global state
    searcher = TuneBOHB(space=cs, metric="value", mode="min", seed=SEED)
    scheduler = HyperBandForBOHB(time_attr="epoch", metric="value", mode="min", max_t=task.max_epochs)
    with tempfile.TemporaryDirectory() as out:
        config = tune.TuneConfig(search_alg=searcher, scheduler=scheduler, num_samples=trials)
        tune.Tuner(train, tune_config=config, run_config=tune.RunConfig(storage_path=out, verbose=0)).fit()
    wall = time.perf_counter() - t0
    ray.shutdown()
    return wall


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=26, help="the Tuner's num_samples")
    args = p.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    record_searcher_calls()

    tuner_s = tuner_run(args.trials)
    real = list(CALLS)
    results = sum(1 for name, _, _ in real if name == "on_trial_result")  # all epochs but those the scheduler stopped at
    CALLS.clear()
    t0 = time.perf_counter()
    ray_bohb(make_task(TASK), 2 * results, SEED)
    mine_s = time.perf_counter() - t0

    def by_order(calls: list[tuple[str, str, str]]) -> list[tuple[str, int, str]]:
        ids: dict[str, int] = {}  # Tune's trial ids are random hex: number them by first appearance
        return [(name, ids.setdefault(t, len(ids) + 1), note) for name, t, note in calls]

    a, b = by_order(CALLS), by_order(real)
    first = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
    print(
        f"Tuner: {args.trials} trials ({results} results to the searcher) in {tuner_s:.1f} s; stand-in: the same search in {mine_s:.2f} s"
    )
    print(f"the first {first} of the Tuner's {len(b)} calls to TuneBOHB are the stand-in's, call for call")
    if first < len(b):
        print(f"  then: stand-in {a[first] if first < len(a) else None}, Tuner {b[first]}")
    ok = first == len(b) or a[first] == ("suggest", args.trials + 1, a[first][2])  # the Tuner had no more trials to ask for
    print("MATCH" if ok else "DIFFERENT")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
