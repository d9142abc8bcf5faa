"""A PyTorch Lightning script as it logs: scalars to ``lightning_logs/version_N/`` under the working
folder (N: the next free number), TensorBoard events (``train_loss`` every few steps, ``val_loss``
and ``epoch`` at each epoch's end, step = the global step) or, with ``--logger csv``, a
``metrics.csv`` rewritten at each epoch's end like its CSVLogger (``epoch`` 0-based). It prints
nothing; a simulated model. Knows nothing of hpsearch.

    python lightning_like.py [--lr 0.01] [--max_epochs 5] [--logger tensorboard|csv]

val_loss after epoch E (0-based) is ``val_loss(lr, E)``: lowest, and the same, for lr from 0.003 to 0.03.
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from pathlib import Path

STEPS = 20  # training steps per epoch


def val_loss(lr: float, epoch: int) -> float:
    return round(0.1 + max(0.0, abs(math.log10(lr / 0.01)) - 0.5) + 1.0 / (epoch + 1), 4)


def version_dir() -> Path:
    root = Path("lightning_logs")
    root.mkdir(exist_ok=True)
    taken = [int(p.name.split("_")[1]) for p in root.glob("version_*") if p.name.split("_")[1].isdigit()]
    folder = root / f"version_{max(taken, default=-1) + 1}"
    folder.mkdir()
    return folder


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--max_epochs", type=int, default=5)
    p.add_argument("--logger", choices=["tensorboard", "csv"], default="tensorboard")
    args = p.parse_args()
    folder = version_dir()
    rows: list[dict[str, float]] = []
    writer = None
    if args.logger == "tensorboard":
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        writer = EventFileWriter(str(folder))
    for epoch in range(args.max_epochs):
        for step in range(epoch * STEPS, (epoch + 1) * STEPS):
            if step % 10 == 9:
                train = val_loss(args.lr, epoch) + 0.2
                rows.append({"epoch": epoch, "step": step, "train_loss": train})
                if writer is not None:
                    writer.add_event(Event(step=step, summary=Summary(value=[Summary.Value(tag="train_loss", simple_value=train)])))
        time.sleep(0.25)  # an epoch: long enough for hpsearch to read the logs while the script runs
        val, step = val_loss(args.lr, epoch), (epoch + 1) * STEPS - 1
        rows.append({"epoch": epoch, "step": step, "val_loss": val})
        if writer is not None:
            values = [Summary.Value(tag="val_loss", simple_value=val), Summary.Value(tag="epoch", simple_value=epoch)]
            writer.add_event(Event(step=step, summary=Summary(value=values)))
            writer.flush()
        else:
            with (folder / "metrics.csv").open("w", newline="") as f:
                out = csv.DictWriter(f, fieldnames=["epoch", "step", "train_loss", "val_loss"])
                out.writeheader()
                out.writerows(rows)
    if writer is not None:
        writer.close()


if __name__ == "__main__":
    main()
