"""pytorch/examples' word_language_model/main.py as it parses its flags (underscores and dashes
mixed, ``--tied`` a store_true flag) and prints, with a simulated model. Knows nothing of hpsearch.

    python word_lm.py [--lr 20] [--dropout 0.2] [--epochs 40] [--batch_size 20] [--log-interval 200] [--tied]

The validation loss after epoch E is ``valid_loss(lr, dropout, tied, E)``: lowest for lr 20, dropout 0.2, tied.
"""

from __future__ import annotations

import argparse
import math
import time


def valid_loss(lr: float, dropout: float, tied: bool, epoch: int) -> float:
    miss = abs(math.log10(lr / 20)) + abs(dropout - 0.2) + (0.0 if tied else 0.3)
    return round(4.5 + miss + 2.0 / epoch, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description="PyTorch Wikitext-2 RNN/LSTM/GRU/Transformer Language Model")
    parser.add_argument("--data", type=str, default="./data/wikitext-2", help="location of the data corpus")
    parser.add_argument("--lr", type=float, default=20, help="initial learning rate")
    parser.add_argument("--clip", type=float, default=0.25, help="gradient clipping")
    parser.add_argument("--epochs", type=int, default=40, help="upper epoch limit")
    parser.add_argument("--batch_size", type=int, default=20, metavar="N", help="batch size")
    parser.add_argument("--dropout", type=float, default=0.2, help="dropout applied to layers (0 = no dropout)")
    parser.add_argument("--tied", action="store_true", help="tie the word embedding and softmax weights")
    parser.add_argument("--seed", type=int, default=1111, help="random seed")
    parser.add_argument("--log-interval", type=int, default=200, metavar="N", help="report interval")
    parser.add_argument("--dry-run", action="store_true", help="verify the code and the model")
    args = parser.parse_args()
    batches = 2983
    for epoch in range(1, args.epochs + 1):
        start = time.time()
        for batch in range(args.log_interval, batches, args.log_interval):
            loss = valid_loss(args.lr, args.dropout, args.tied, epoch) + 1.0 - batch / batches
            print(
                f"| epoch {epoch:3d} | {batch:5d}/{batches:5d} batches | lr {args.lr:02.2f} | ms/batch {45.6:5.2f} | "
                f"loss {loss:5.2f} | ppl {math.exp(loss):8.2f}"
            )
        time.sleep(0.005)
        val = valid_loss(args.lr, args.dropout, args.tied, epoch)
        print("-" * 89)
        print(f"| end of epoch {epoch:3d} | time: {time.time() - start:5.2f}s | valid loss {val:5.2f} | valid ppl {math.exp(val):8.2f}")
        print("-" * 89)
    test = valid_loss(args.lr, args.dropout, args.tied, args.epochs) - 0.05
    print("=" * 89)
    print(f"| End of training | test loss {test:5.2f} | test ppl {math.exp(test):8.2f}")
    print("=" * 89)


if __name__ == "__main__":
    main()
