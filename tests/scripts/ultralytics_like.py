"""Ultralytics' ``yolo train`` as it takes its settings (``key=value`` words after the mode, no
dashes; booleans ``True``/``true``; an unknown key refused) and logs (a progress table on stdout
and, rewritten whole after each epoch as pandas does, ``runs/detect/train/results.csv``, epochs
from 1, columns such as ``metrics/mAP50-95(B)``; ``train2``, ``train3``... when the folder exists),
with a simulated model. Knows nothing of hpsearch.

    python ultralytics_like.py train model=yolov8n.pt data=coco8.yaml epochs=3 lr0=0.01 amp=False

The mAP50-95 after epoch E (from 1) is ``map50_95(lr0, E)``: highest for lr0 0.01.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

DEFAULTS = {"model": "yolov8n.pt", "data": "coco8.yaml", "epochs": 100, "lr0": 0.01, "momentum": 0.937, "amp": True, "batch": 16}


def map50_95(lr0: float, epoch: int) -> float:
    return round(0.5 - 0.1 * abs(math.log10(lr0 / 0.01)) - 0.3 * math.exp(-epoch / 2), 5)


def smart_value(text: str) -> object:
    lower = text.lower()
    if lower in ("true", "false", "none"):
        return {"true": True, "false": False, "none": None}[lower]
    try:
        return int(text) if text.lstrip("-").isdigit() else float(text)
    except ValueError:
        return text


def main() -> None:
    words = sys.argv[1:]
    mode = words.pop(0) if words and "=" not in words[0] else "train"
    cfg = dict(DEFAULTS)
    for word in words:
        key, _, value = word.partition("=")
        if key not in cfg:
            raise SyntaxError(f"'{key}' is not a valid YOLO argument. Similar arguments are i.e. {sorted(cfg)}.")
        cfg[key] = smart_value(value)
    assert mode == "train", mode
    save = Path("runs/detect/train")
    n = 2
    while save.exists():
        save, n = Path(f"runs/detect/train{n}"), n + 1
    save.mkdir(parents=True)
    names = ["epoch", "train/box_loss", "metrics/mAP50(B)", "metrics/mAP50-95(B)", "lr/pg0"]
    rows: list[str] = []
    print(f"{'Epoch':>11}{'GPU_mem':>11}{'box_loss':>11}{'Instances':>11}{'Size':>11}")
    for epoch in range(1, int(cfg["epochs"]) + 1):
        m = map50_95(float(cfg["lr0"]), epoch)
        progress = f"{epoch}/{cfg['epochs']}"
        print(f"{progress:>11}{'0G':>11}{1 - m:>11.4g}{16:>11}{640:>11}: 100%|██████████| 4/4")
        print(f"{'all':>22}{4:>11}{17:>11}{m + 0.2:>11.3g}{m:>11.3g}")
        rows.append(",".join(str(v) for v in (epoch, round(1 - m, 5), round(m + 0.2, 5), m, cfg["lr0"])))
        (save / "results.csv").write_text(",".join(names) + "\n" + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
