"""nanoGPT's train.py as it takes its settings (module globals overridden by ``--key=value``, read
with ``ast.literal_eval`` and a type check, like its configurator.py) and prints, with a simulated
model: it trains by iterations. Knows nothing of hpsearch.

    python nanogpt_like.py [--learning_rate=6e-4] [--max_iters=300] [--dropout=0.0] [--compile=False]

The val loss at iteration I is ``val_loss(learning_rate, dropout, compile, I)``: lowest for 6e-4, 0.1.
"""

from __future__ import annotations

import math
import sys
import time
from ast import literal_eval

# default config values
out_dir = "out"
eval_interval = 50
log_interval = 10
max_iters = 300
learning_rate = 6e-4  # max learning rate
dropout = 0.0  # for pretraining 0 is good, for finetuning try 0.1+
batch_size = 12
compile = True  # use PyTorch 2.0 to compile the model to be faster


def val_loss(lr: float, drop: float, compiled: bool, it: int) -> float:
    miss = abs(math.log10(lr / 6e-4)) + abs(drop - 0.1)
    return round(1.5 + miss + 9.0 * math.exp(-it / 80), 4)


def configure() -> None:
    """configurator.py: every --key=value overrides a global of the same type."""
    for arg in sys.argv[1:]:
        assert arg.startswith("--"), f"not a --key=value override: {arg}"
        key, val = arg.split("=")
        key = key[2:]
        if key not in globals():
            raise ValueError(f"Unknown config key: {key}")
        try:
            attempt = literal_eval(val)  # attempt to eval it (e.g. if bool, number, or etc)
        except (SyntaxError, ValueError):
            attempt = val  # if that goes wrong, just use the string
        if type(attempt) is not type(globals()[key]):
            sys.exit(f"type mismatch for {key}: {val!r}")
        print(f"Overriding: {key} = {attempt}")
        globals()[key] = attempt


def main() -> None:
    configure()
    for it in range(max_iters + 1):
        if it % eval_interval == 0:
            val = val_loss(learning_rate, dropout, compile, it)
            print(f"step {it}: train loss {val - 0.05:.4f}, val loss {val:.4f}")
            time.sleep(0.003)
        if it % log_interval == 0:
            loss = val_loss(learning_rate, dropout, compile, it) - 0.1
            print(f"iter {it}: loss {loss:.4f}, time {31.4:.2f}ms, mfu {12.5:.2f}%")


if __name__ == "__main__":
    main()
