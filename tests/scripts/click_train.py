"""A training script with a click command line (``show_default=True``, ``--amp/--no-amp``, an
``is_flag`` option, a choice) that prints one line per epoch. Simulated model; knows nothing of hpsearch.

    python click_train.py [--lr 0.001] [--batch-size 32] [--epochs 6] [--optimizer adam] [--amp/--no-amp] [--tied]

val_loss after epoch E is ``val_loss(lr, batch_size, E)``: lowest for lr 0.003, batch 32.
"""

from __future__ import annotations

import math
import time

import click


def val_loss(lr: float, batch_size: int, epoch: int) -> float:
    return round(0.2 + abs(math.log10(lr / 3e-3)) + abs(math.log2(batch_size / 32)) / 5 + 1.0 / epoch, 4)


@click.command()
@click.option("--lr", type=float, default=1e-3, show_default=True, help="learning rate")
@click.option("--batch-size", type=int, default=32, show_default=True, help="samples per step")
@click.option("--epochs", type=int, default=6, show_default=True, help="passes over the data")
@click.option("--optimizer", type=click.Choice(["sgd", "adam"]), default="adam", show_default=True)
@click.option("--amp/--no-amp", default=True, show_default=True, help="mixed precision")
@click.option("--tied", is_flag=True, help="tie the embedding weights")
def main(lr: float, batch_size: int, epochs: int, optimizer: str, amp: bool, tied: bool) -> None:
    for epoch in range(1, epochs + 1):
        time.sleep(0.005)
        val = val_loss(lr, batch_size, epoch)
        print(f"Epoch {epoch}/{epochs} | train_loss {val + 0.1:.4f} | val_loss {val:.4f} | val_acc {1 - val / 3:.4f}")


if __name__ == "__main__":
    main()
