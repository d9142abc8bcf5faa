"""An MMEngine training script (mmdetection's tools/train.py) as it takes its settings (a config
file, then ``--cfg-options key.path=value ...``, parsed like MMEngine's DictAction) and logs (JSON
lines in ``work_dirs/<config>/<timestamp>/vis_data/scalars.json``: a training line every 10
iterations with ``epoch`` and ``iter``, a validation line per epoch with ``coco/bbox_mAP`` and
``step``, the epoch), with a simulated model. Knows nothing of hpsearch.

    python mmdet_like.py configs/retinanet.py --cfg-options optim_wrapper.optimizer.lr=0.01 train_cfg.max_epochs=4

The bbox mAP after epoch E (from 1) is ``bbox_map(lr, E)``: highest for lr 0.01.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

CONFIG: dict[str, Any] = {"optim_wrapper": {"optimizer": {"type": "SGD", "lr": 0.02, "momentum": 0.9}}, "train_cfg": {"max_epochs": 12}}


def bbox_map(lr: float, epoch: int) -> float:
    return round(0.4 - 0.08 * abs(math.log10(lr / 0.01)) - 0.25 * math.exp(-epoch / 2), 4)


def parse_value(text: str) -> Any:
    """MMEngine's DictAction: int, float, bool (any case), else the string."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def main() -> None:
    p = argparse.ArgumentParser(description="Train a detector")
    p.add_argument("config", nargs="?", default="configs/retinanet.py", help="train config file path")
    p.add_argument("--work-dir", help="the dir to save logs and models")
    p.add_argument("--cfg-options", nargs="+", default=[], help="override some settings in the used config, xxx=yyy format")
    args = p.parse_args()
    cfg = json.loads(json.dumps(CONFIG))
    for option in args.cfg_options:
        path, _, value = option.partition("=")
        *parents, leaf = path.split(".")
        node = cfg
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = parse_value(value)
    stamp = time.strftime("%Y%m%d_%H%M%S")
    run = Path(args.work_dir or f"work_dirs/{Path(args.config).stem}") / stamp / "vis_data"
    run.mkdir(parents=True, exist_ok=True)
    lr = float(cfg["optim_wrapper"]["optimizer"]["lr"])
    with open(run / "scalars.json", "a") as log:
        for epoch in range(1, int(cfg["train_cfg"]["max_epochs"]) + 1):
            for it in (10, 20):
                step = (epoch - 1) * 20 + it
                log.write(
                    json.dumps({"lr": lr, "loss": round(1.2 - bbox_map(lr, epoch), 4), "epoch": epoch, "iter": it, "step": step}) + "\n"
                )
            log.write(
                json.dumps({"coco/bbox_mAP": bbox_map(lr, epoch), "coco/bbox_mAP_50": bbox_map(lr, epoch) + 0.2, "step": epoch}) + "\n"
            )
            log.flush()
            print(f"Epoch(val) [{epoch}][8/8]    coco/bbox_mAP: {bbox_map(lr, epoch)}", flush=True)


if __name__ == "__main__":
    main()
