"""detectron2's tools/train_net.py as it takes its settings (argparse for its own flags, then yacs
``PATH.KEY VALUE`` pairs merged into the config with ``literal_eval`` and yacs' type check) and logs
(every 20 iterations an EventWriter line on stdout and a JSON line in ``OUTPUT_DIR/metrics.json``,
appended; at every eval period the COCO AP there as ``bbox/AP``), with a simulated model. Knows
nothing of hpsearch.

    python detectron2_like.py --num-gpus 1 SOLVER.BASE_LR 0.02 SOLVER.MAX_ITER 300 SOLVER.AMP.ENABLED True

The AP after iteration I (0-based, as detectron2 counts) is ``bbox_ap(base_lr, I)``: highest for 0.02.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
from ast import literal_eval
from typing import Any

DEFAULTS: dict[str, Any] = {
    "OUTPUT_DIR": "./output",
    "SOLVER": {"BASE_LR": 0.001, "MAX_ITER": 300, "IMS_PER_BATCH": 16, "WEIGHT_DECAY": 0.0001, "AMP": {"ENABLED": False}},
    "TEST": {"EVAL_PERIOD": 100},
}


def bbox_ap(lr: float, it: int) -> float:
    return round(40.0 - 8.0 * abs(math.log10(lr / 0.02)) - 30.0 * math.exp(-(it + 1) / 100), 3)


def merge_from_list(cfg: dict[str, Any], opts: list[str]) -> None:
    """yacs' CfgNode.merge_from_list: pairs, existing keys only, values of the old value's type."""
    if len(opts) % 2:
        raise ValueError(f"Override list has odd length: {opts}; it must be a list of pairs")
    for path, text in zip(opts[0::2], opts[1::2], strict=True):
        *parents, leaf = path.split(".")
        node = cfg
        for part in parents:
            if not isinstance(node, dict) or part not in node:
                raise KeyError(f"Non-existent config key: {path}")
            node = node[part]
        if leaf not in node:
            raise KeyError(f"Non-existent config key: {path}")
        try:
            value = literal_eval(text)
        except (ValueError, SyntaxError):
            value = text
        old = node[leaf]
        if type(value) is not type(old):
            raise ValueError(f"Type mismatch ({type(old)} vs. {type(value)}) with values ({old} vs. {value}) for config key: {path}")
        node[leaf] = value


def main() -> None:
    p = argparse.ArgumentParser(description="Detectron2 training")
    p.add_argument("--config-file", default="", metavar="FILE", help="path to config file")
    p.add_argument("--resume", action="store_true", help="whether to attempt to resume from the checkpoint directory")
    p.add_argument("--eval-only", action="store_true", help="perform evaluation only")
    p.add_argument("--num-gpus", type=int, default=1, help="number of gpus *per machine*")
    p.add_argument(
        "opts",
        default=None,
        nargs=argparse.REMAINDER,
        help='Modify config options at the end of the command. For Yacs configs, use space-separated "PATH.KEY VALUE" pairs.',
    )
    args = p.parse_args()
    cfg = copy.deepcopy(DEFAULTS)
    merge_from_list(cfg, args.opts or [])
    solver = cfg["SOLVER"]
    os.makedirs(cfg["OUTPUT_DIR"], exist_ok=True)
    with open(os.path.join(cfg["OUTPUT_DIR"], "metrics.json"), "a") as log:
        for it in range(solver["MAX_ITER"]):
            if (it + 1) % 20 == 0:
                loss = round(1.0 / (1 + it / 50) + abs(math.log10(solver["BASE_LR"] / 0.02)) / 4, 4)
                print(f"[12/07 10:00:00 d2.utils.events]:  eta: 0:00:01  iter: {it}  total_loss: {loss}  lr: {solver['BASE_LR']}")
                log.write(json.dumps({"iteration": it, "total_loss": loss, "lr": solver["BASE_LR"]}) + "\n")
            if (it + 1) % cfg["TEST"]["EVAL_PERIOD"] == 0:
                ap = bbox_ap(solver["BASE_LR"], it)
                print("[12/07 10:00:00 d2.evaluation.testing]: copypaste: Task: bbox")
                print(f"[12/07 10:00:00 d2.evaluation.testing]: copypaste: AP,AP50,AP75\ncopypaste: {ap},{ap + 20},{ap + 5}")
                log.write(json.dumps({"bbox/AP": ap, "bbox/AP50": ap + 20, "iteration": it}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
