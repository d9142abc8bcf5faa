"""The built-in objective on a GPU: AMP (off, bf16, fp16) x gradient accumulation (1, 2).

Fashion-MNIST, the small CNN, 12,000 training and 5,000 validation images, 3 epochs, seed 0,
through objectives/image_classification.py's own train(config, reporter): the path a search
trial takes. Prints one JSON line per run (val_acc per epoch, samples/s, peak memory) and
writes them to OUT/gpu_objective.json. Needs torch, numpy and the dataset files; no optuna.

    python bench/gpu_objective.py --data-root /usr/share/datasets --out bench/results
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class Recorder:
    def __init__(self) -> None:
        self.epochs: list[dict[str, float]] = []

    def report(self, epoch: int, metrics: dict[str, float]) -> None:
        self.epochs.append({k: float(v) for k, v in metrics.items()})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data-root", default="/usr/share/datasets")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    p.add_argument("--epochs", type=int, default=3)
    args = p.parse_args()
    import torch

    from objectives.image_classification import train

    base = {
        "dataset": "fashion_mnist",
        "data_root": args.data_root,
        "train_subset": 12000,
        "val_subset": 5000,
        "model": "cnn",
        "width": 24,
        "optimizer": "sgd",
        "lr": 0.05,
        "momentum": 0.9,
        "batch_size": 128,
        "epochs": args.epochs,
        "seed": 0,
    }
    rows = []
    for amp, accum in itertools.product(["off", "bf16", "fp16"], [1, 2]):
        rec = Recorder()
        t0 = time.perf_counter()
        out = train({**base, "amp": amp, "accum_steps": accum, "batch_size": 128 // accum}, rec)
        row = {
            "amp": amp,
            "accum_steps": accum,
            "micro_batch": 128 // accum,
            "val_acc": [round(e["val_acc"], 4) for e in rec.epochs],
            "samples_per_s": round(out["samples_per_s"]),
            "peak_mem_mb": round(out["peak_mem_mb"], 1),
            "seconds": round(time.perf_counter() - t0, 2),
        }
        print(json.dumps(row), flush=True)
        rows.append(row)
    meta = {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None, "torch": torch.__version__}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "gpu_objective.json").write_text(json.dumps({"machine": meta, "config": base, "runs": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
