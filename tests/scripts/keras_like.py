"""A Keras ``model.fit`` script as it prints with ``verbose=1`` into a pipe: ``Epoch 3/10`` on a line
of its own, progress lines with ``ETA``, then the epoch's line with its metrics. Simulated model;
knows nothing of hpsearch.

    python keras_like.py [--lr 0.001] [--epochs 10] [--batch_size 32]

val_accuracy after epoch E is ``val_accuracy(lr, batch_size, E)``: highest for lr 0.001, batch 32.
"""

from __future__ import annotations

import argparse
import math
import time


def val_accuracy(lr: float, batch_size: int, epoch: int) -> float:
    miss = abs(math.log10(lr / 1e-3)) + abs(math.log2(batch_size / 32)) / 4
    return round(max(0.05, 0.95 - 0.2 * miss - 0.3 / epoch), 4)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch_size", type=int, default=32)
    args = p.parse_args()
    steps = 1024 // args.batch_size
    for epoch in range(1, args.epochs + 1):
        print(f"Epoch {epoch}/{args.epochs}")
        acc = val_accuracy(args.lr, args.batch_size, epoch)
        half = steps // 2
        print(f"{half:>3}/{steps} [==============>...............] - ETA: 0s - loss: {1.2 - acc:.4f} - accuracy: {acc - 0.1:.4f}")
        time.sleep(0.005)
        print(
            f"{steps}/{steps} [==============================] - 0s 3ms/step - loss: {1.1 - acc:.4f} - accuracy: {acc - 0.05:.4f}"
            f" - val_loss: {1.0 - acc:.4f} - val_accuracy: {acc:.4f}"
        )


if __name__ == "__main__":
    main()
