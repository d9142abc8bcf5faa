"""pytorch/examples' imagenet/main.py as it parses its flags (dashes, ``--pretrained`` a store_true
flag; ``--amp/--no-amp`` as argparse's BooleanOptionalAction) and prints (0-based epochs,
``Epoch: [0][ 10/50]`` progress, `` * Acc@1 75.200 Acc@5 92.100`` after validation), with a
simulated model. Knows nothing of hpsearch.

    python imagenet_like.py [--epochs 90] [--lr 0.1] [--weight-decay 1e-4] [--pretrained] [--no-amp]

Acc@1 after epoch E (0-based) is ``acc1(lr, weight_decay, pretrained, amp, E)``: highest for lr 0.1,
weight decay 1e-4, pretrained; --no-amp costs 1 point.
"""

from __future__ import annotations

import argparse
import math
import time


def acc1(lr: float, weight_decay: float, pretrained: bool, amp: bool, epoch: int) -> float:
    miss = abs(math.log10(lr / 0.1)) + abs(math.log10(weight_decay / 1e-4)) / 2
    return round(76.0 - 20 * miss - (0 if pretrained else 5) - (0 if amp else 1) - 30 / (epoch + 1), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description="PyTorch ImageNet Training")
    parser.add_argument("--epochs", default=90, type=int, metavar="N", help="number of total epochs to run")
    parser.add_argument("-b", "--batch-size", default=256, type=int, metavar="N", help="mini-batch size (default: 256)")
    parser.add_argument("--lr", "--learning-rate", default=0.1, type=float, metavar="LR", help="initial learning rate", dest="lr")
    parser.add_argument("--momentum", default=0.9, type=float, metavar="M", help="momentum")
    parser.add_argument(
        "--wd", "--weight-decay", default=1e-4, type=float, metavar="W", help="weight decay (default: 1e-4)", dest="weight_decay"
    )
    parser.add_argument("--pretrained", dest="pretrained", action="store_true", help="use pre-trained model")
    parser.add_argument("--amp", action=argparse.BooleanOptionalAction, default=True, help="mixed precision")
    args = parser.parse_args()
    for epoch in range(args.epochs):
        top1 = acc1(args.lr, args.weight_decay, args.pretrained, args.amp, epoch)
        for i in (0, 10, 20):
            print(
                f"Epoch: [{epoch}][{i:3d}/50]\tTime  0.123 ( 0.130)\tLoss {7 - top1 / 20:.4e} ({7 - top1 / 20:.4e})\tAcc@1 {top1 - 5:6.2f} ({top1 - 6:6.2f})"
            )
        time.sleep(0.005)
        print(f"Test: [ 0/10]\tTime  0.050 ( 0.050)\tLoss {6 - top1 / 20:.4e} ({6 - top1 / 20:.4e})\tAcc@1 {top1:6.2f} ({top1:6.2f})")
        print(f" * Acc@1 {top1:.3f} Acc@5 {min(99.0, top1 + 17):.3f}")


if __name__ == "__main__":
    main()
