"""A fastai script as it prints into a pipe (``learn.fine_tune`` / ``fit_one_cycle`` with the
console progress): its metrics as a table, a header ``epoch  train_loss  valid_loss  accuracy
time`` over one row per epoch counted from 0, progress bars before a carriage return, and
SaveModelCallback's ``Better model found at epoch 0 with valid_loss value: ...``. Arguments as
fastai's ``@call_parse`` makes them (``--lr``, ``--epochs``, a boolean as a flag). Simulated model;
knows nothing of hpsearch.

    python fastai_like.py [--lr 0.002] [--epochs 4] [--bs 64] [--mixup]

The accuracy after epoch E (from 0) is ``accuracy(lr, E)``: highest for lr 0.002.
"""

from __future__ import annotations

import argparse
import math
import sys


def accuracy(lr: float, epoch: int) -> float:
    return round(max(0.1, 0.93 - 0.1 * abs(math.log10(lr / 2e-3)) - 0.2 / (epoch + 1)), 6)


def main() -> None:
    p = argparse.ArgumentParser(description="Train a classifier with fastai")
    p.add_argument("--lr", type=float, default=2e-3, help="learning rate")
    p.add_argument("--epochs", type=int, default=4, help="number of epochs")
    p.add_argument("--bs", type=int, default=64, help="batch size")
    p.add_argument("--mixup", action="store_true", help="use MixUp")
    args = p.parse_args()
    print(f"{'epoch':<10}{'train_loss':<12}{'valid_loss':<12}{'accuracy':<10}{'time':<8}")
    best = math.inf
    for epoch in range(args.epochs):
        sys.stdout.write(f"\r |{'█' * 10}| 100.00% [24/24 00:01<00:00 0.4123]")
        acc = accuracy(args.lr, epoch)
        valid = round(1.5 * (1 - acc), 6)
        print(f"\r{epoch:<10}{valid + 0.05:<12.6f}{valid:<12.6f}{acc:<10.6f}{'00:01':<8}")
        if valid < best:
            best = valid
            print(f"Better model found at epoch {epoch} with valid_loss value: {valid}.")


if __name__ == "__main__":
    main()
