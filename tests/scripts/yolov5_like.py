"""YOLOv5's train.py as it takes its settings (argparse flags with dashes; the hyperparameters from
the YAML file ``--hyp`` names, every key of it required) and logs (``hyperparameters: lr0=0.01,
...`` on start; per epoch, counted from 0, a row of ``<save_dir>/results.csv`` with names and
values padded to 20 characters; save_dir ``runs/train/exp``, ``exp2``... in the working folder),
with a simulated model. Knows nothing of hpsearch.

    python yolov5_like.py --hyp data/hyps/hyp.scratch-low.yaml --epochs 4 --batch-size 16

The mAP@0.5:0.95 after epoch E is ``map50_95(lr0, momentum, E)``: highest for lr0 0.01, momentum 0.937.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import yaml

KEYS = ("lr0", "lrf", "momentum", "weight_decay", "warmup_epochs", "box", "cls", "obj")


def map50_95(lr0: float, momentum: float, epoch: int) -> float:
    return round(0.45 - 0.08 * abs(math.log10(lr0 / 0.01)) - abs(momentum - 0.937) - 0.3 * math.exp(-(epoch + 1) / 2), 5)


def increment_path(path: Path) -> Path:
    if not path.exists():
        return path
    n = 2
    while Path(f"{path}{n}").exists():
        n += 1
    return Path(f"{path}{n}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--weights", type=str, default="yolov5s.pt", help="initial weights path")
    p.add_argument("--hyp", type=str, default="data/hyps/hyp.scratch-low.yaml", help="hyperparameters path")
    p.add_argument("--epochs", type=int, default=100, help="total training epochs")
    p.add_argument("--batch-size", type=int, default=16, help="total batch size for all GPUs, -1 for autobatch")
    p.add_argument("--project", default="runs/train", help="save to project/name")
    p.add_argument("--name", default="exp", help="save to project/name")
    p.add_argument("--exist-ok", action="store_true", help="existing project/name ok, do not increment")
    opt = p.parse_args()
    with open(opt.hyp, errors="ignore") as f:
        hyp = yaml.safe_load(f)
    missing = [k for k in KEYS if k not in hyp]
    if missing:
        raise KeyError(f"hyp.yaml lacks {missing}")
    print("hyperparameters: " + ", ".join(f"{k}={v}" for k, v in hyp.items()), flush=True)
    save_dir = increment_path(Path(opt.project) / opt.name)
    save_dir.mkdir(parents=True)
    (save_dir / "hyp.yaml").write_text(yaml.safe_dump(hyp, sort_keys=False))
    names = ["epoch", "train/box_loss", "metrics/mAP_0.5", "metrics/mAP_0.5:0.95", "x/lr0"]
    for epoch in range(opt.epochs):
        m = map50_95(hyp["lr0"], hyp["momentum"], epoch)
        values = [epoch, round(0.1 - m / 10, 5), round(m + 0.2, 5), m, hyp["lr0"]]
        file = save_dir / "results.csv"
        head = "" if file.exists() else ("%20s," * len(names) % tuple(names)).rstrip(",") + "\n"
        with open(file, "a") as f:
            f.write(head + ("%20.5g," * len(values) % tuple(values)).rstrip(",") + "\n")
        print(f"{epoch}/{opt.epochs - 1}  all  128  929  {m + 0.2:.3g}  {m:.3g}", flush=True)


if __name__ == "__main__":
    main()
