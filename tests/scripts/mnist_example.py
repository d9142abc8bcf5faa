"""pytorch/examples' mnist/main.py as it parses its flags and prints, with a simulated model: no torch,
no data, a few milliseconds per epoch. Knows nothing of hpsearch.

    python mnist_example.py [--epochs 14] [--lr 1.0] [--gamma 0.7] [--batch-size 64] [--dry-run] [--no-cuda]

The test loss after epoch E is ``test_loss(lr, gamma, batch_size, E)``: lowest for lr 1.0 and gamma 0.7.
"""

from __future__ import annotations

import argparse
import math
import time


def test_loss(lr: float, gamma: float, batch_size: int, epoch: int) -> float:
    miss = abs(math.log10(lr)) + abs(gamma - 0.7) + abs(math.log2(batch_size / 64)) / 10
    return round(0.03 + 0.3 * miss + 0.4 / epoch, 4)


def main() -> None:
    parser = argparse.ArgumentParser(description="PyTorch MNIST Example")
    parser.add_argument("--batch-size", type=int, default=64, metavar="N", help="input batch size for training (default: 64)")
    parser.add_argument("--test-batch-size", type=int, default=1000, metavar="N", help="input batch size for testing (default: 1000)")
    parser.add_argument("--epochs", type=int, default=14, metavar="N", help="number of epochs to train (default: 14)")
    parser.add_argument("--lr", type=float, default=1.0, metavar="LR", help="learning rate (default: 1.0)")
    parser.add_argument("--gamma", type=float, default=0.7, metavar="M", help="Learning rate step gamma (default: 0.7)")
    parser.add_argument("--no-cuda", action="store_true", default=False, help="disables CUDA training")
    parser.add_argument("--no-mps", action="store_true", default=False, help="disables macOS GPU training")
    parser.add_argument("--dry-run", action="store_true", default=False, help="quickly check a single pass")
    parser.add_argument("--seed", type=int, default=1, metavar="S", help="random seed (default: 1)")
    parser.add_argument("--log-interval", type=int, default=10, metavar="N", help="how many batches to wait before logging training status")
    parser.add_argument("--save-model", action="store_true", default=False, help="For Saving the current Model")
    args = parser.parse_args()
    for epoch in range(1, args.epochs + 1):
        for batch_idx in range(0, 938, 300):  # the training loop's progress lines
            loss = test_loss(args.lr, args.gamma, args.batch_size, epoch) * (2 - batch_idx / 938)
            print(f"Train Epoch: {epoch} [{batch_idx * 64}/60000 ({100.0 * batch_idx / 938:.0f}%)]\tLoss: {loss:.6f}")
            if args.dry_run:
                break
        time.sleep(0.005)
        test = test_loss(args.lr, args.gamma, args.batch_size, epoch)
        correct = int(10000 * (1 - test / 2))
        print(f"\nTest set: Average loss: {test:.4f}, Accuracy: {correct}/10000 ({100.0 * correct / 10000:.0f}%)\n")
        if args.dry_run:
            break


if __name__ == "__main__":
    main()
