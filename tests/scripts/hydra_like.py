"""A Hydra app as it takes its config (overrides ``key.path=value``, ``+key=value`` for a key the
config lacks, errors worded as Hydra's) and logs with Python's logging (to stderr), with a
simulated model. Knows nothing of hpsearch.

    python hydra_like.py optimizer.lr=0.01 model.dropout=0.1 trainer.max_epochs=4 +seed=3

The val loss after epoch E is ``val_loss(lr, dropout, E)``: lowest for lr 0.01, dropout 0.1.
"""

from __future__ import annotations

import logging
import math
import sys
import time

import yaml

CONFIG = {
    "optimizer": {"name": "adam", "lr": 0.001, "weight_decay": 0.0},
    "model": {"dropout": 0.3, "width": 64, "norm": True},
    "trainer": {"max_epochs": 10},
    "data": {"path": "data/", "workers": 2},
}


def val_loss(lr: float, dropout: float, epoch: int) -> float:
    return round(0.2 + abs(math.log10(lr / 0.01)) + abs(dropout - 0.1) + 1.0 / epoch, 4)


def fail(*lines: str) -> None:
    print("\n".join(lines) + "\n\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.", file=sys.stderr)
    sys.exit(1)


def override(config: dict, arg: str) -> None:
    key, eq, text = arg.partition("=")
    if arg.startswith("-") or not eq:
        print(f"usage: hydra_like.py [--help] [overrides ...]\nhydra_like.py: error: unrecognized arguments: {arg}", file=sys.stderr)
        sys.exit(2)
    new = key.startswith("+")
    path = key.lstrip("+").split(".")
    node = config
    for part in path[:-1]:
        node = node.setdefault(part, {}) if new else node.get(part, {})
    if new and path[-1] in node:
        fail(f"Could not append to config. An item is already at '{key.lstrip('+')}'.")
    if not new and path[-1] not in node:
        fail(
            f"Could not override '{key}'.",
            f"To append to your config use +{arg}",
            f"Key '{path[-1]}' is not in struct",
            f"    full_key: {key}",
        )
    node[path[-1]] = yaml.safe_load(text)


def main() -> None:
    if "--help" in sys.argv[1:]:
        print("hydra_like is powered by Hydra.\n\n== Config ==\nOverride anything in the config (foo.bar=value)\n")
        print(
            yaml.safe_dump(CONFIG, sort_keys=False) + "\nPowered by Hydra (https://hydra.cc)\nUse --hydra-help to view Hydra specific help"
        )
        return
    config = {k: dict(v) for k, v in CONFIG.items()}
    for arg in sys.argv[1:]:
        override(config, arg)
    logging.basicConfig(format="[%(asctime)s][%(name)s][%(levelname)s] - %(message)s", level=logging.INFO)
    log = logging.getLogger("__main__")
    log.info(f"config: {config}")
    lr, dropout = config["optimizer"]["lr"], config["model"]["dropout"]
    for epoch in range(1, config["trainer"]["max_epochs"] + 1):
        time.sleep(0.005)
        val = val_loss(lr, dropout, epoch)
        log.info(f"Epoch {epoch}: val_loss={val:.4f}, val_acc={1 - val / 4:.4f}, seed={config.get('seed', -1)}")


if __name__ == "__main__":
    main()
