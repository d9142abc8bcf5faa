"""A plain training script that knows nothing of hpsearch: argparse flags in, metrics printed out.

A tiny MLP on synthetic 2-class data (a fixed random teacher), full-batch SGD/Adam: a few
milliseconds per epoch and the same numbers on every run of the same flags, resumed or not.

    python train_mlp.py --epochs 5 --lr 0.1 [--optimizer sgd --momentum 0.9] [--checkpoint ckpt.pt]
        [--log kv|json] [--tb-dir DIR] [--pause-after N] [--crash-at N]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--optimizer", choices=["sgd", "adam"], default="sgd")
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--checkpoint", default=None, help="save every epoch; resume when it exists")
    p.add_argument("--log", choices=["kv", "json"], default="kv")
    p.add_argument("--tb-dir", default=None, help="write TensorBoard scalars there and print nothing")
    p.add_argument("--pause-after", default=None, help="FILE: after epoch 2 write our pid to FILE and sleep until killed")
    p.add_argument("--crash-at", type=int, default=0)
    return p.parse_args()


def data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(600, 10, generator=g)
    y = (x @ torch.randn(10, generator=g) > 0).long()
    return x[:400], y[:400], x[400:], y[400:]


def main() -> None:
    args = parse()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(10, args.hidden), torch.nn.ReLU(), torch.nn.Linear(args.hidden, 2))
    if args.optimizer == "sgd":
        opt: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    else:
        opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    first = 1
    if args.checkpoint and Path(args.checkpoint).exists():
        state = torch.load(args.checkpoint)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        first = state["epoch"] + 1
        print(f"resumed from {args.checkpoint} at epoch {first}")
    writer = None
    if args.tb_dir:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(args.tb_dir)
    xt, yt, xv, yv = data()
    print(f"training {args.epochs} epochs, lr={args.lr}")  # a settings line: no epoch, not a report
    for epoch in range(first, args.epochs + 1):
        if epoch == args.crash_at:
            raise RuntimeError(f"boom at epoch {epoch}")
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(xt), yt)
            loss.backward()
            opt.step()
        with torch.no_grad():
            acc = (model(xv).argmax(1) == yv).float().mean().item()
        if args.checkpoint:
            # write then rename: a kill mid-save leaves the previous checkpoint whole
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": epoch}, args.checkpoint + ".tmp")
            os.replace(args.checkpoint + ".tmp", args.checkpoint)
        if writer is not None:
            writer.add_scalar("train/loss", loss.item(), epoch)
            writer.add_scalar("val/acc", acc, epoch)
            writer.flush()
        elif args.log == "json":
            print(json.dumps({"epoch": epoch, "train_loss": loss.item(), "val_acc": acc}))
        else:
            print(f"Epoch {epoch}/{args.epochs}: train_loss={loss.item():.6f} val_acc={acc:.6f}")
        if args.pause_after and epoch == 2 and not Path(args.pause_after).exists():
            Path(args.pause_after).write_text(str(os.getpid()))
            time.sleep(600)
    if writer is not None:
        writer.close()


if __name__ == "__main__":
    main()
