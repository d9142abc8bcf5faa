"""A Hugging Face ``Trainer`` script as it takes its arguments (HfArgumentParser: ``--name value``,
underscores, booleans as ``--fp16 true``) and logs (Python dict reprs every few steps at a
fractional epoch, one per evaluation, a summary at the end; tqdm bars on stderr), with a
simulated model. Knows nothing of hpsearch.

    python hf_trainer_like.py --learning_rate 5e-5 --num_train_epochs 3 --warmup_ratio 0.1 [--fp16 true]

The eval loss after epoch E is ``eval_loss(learning_rate, warmup_ratio, E)``: lowest for 5e-5, 0.1.
"""

from __future__ import annotations

import argparse
import math
import sys
import time


def string_to_bool(v: str) -> bool:
    if v.lower() in ("yes", "true", "t", "y", "1"):
        return True
    if v.lower() in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(
        f"Truthy value expected: got {v} but expected one of yes/no, true/false, t/f, y/n, 1/0 (case insensitive)."
    )


def eval_loss(lr: float, warmup: float, epoch: int) -> float:
    return round(0.3 + 0.2 * abs(math.log10(lr / 5e-5)) + abs(warmup - 0.1) + 0.5 / epoch, 4)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--output_dir", type=str, default="trainer_output")
    p.add_argument("--learning_rate", type=float, default=5e-5)
    p.add_argument("--num_train_epochs", type=float, default=3.0)
    p.add_argument("--per_device_train_batch_size", type=int, default=8)
    p.add_argument("--warmup_ratio", type=float, default=0.0)
    p.add_argument("--fp16", type=string_to_bool, nargs="?", const=True, default=False)
    args = p.parse_args()
    epochs, steps = int(args.num_train_epochs), 4  # logging steps per epoch
    for epoch in range(1, epochs + 1):
        for step in range(1, steps + 1):
            at = epoch - 1 + step / steps
            sys.stderr.write(f"\r{100 * step // steps:3d}%|{'█' * step}{' ' * (steps - step)}| {step}/{steps} [00:00<00:00, 50.0it/s]")
            if step < steps:
                lr_now = args.learning_rate * (1 - at / epochs)
                print(
                    {"loss": round(eval_loss(args.learning_rate, args.warmup_ratio, epoch) + 0.2, 4), "learning_rate": lr_now, "epoch": at}
                )
        time.sleep(0.005)
        sys.stderr.write("\n")
        val = eval_loss(args.learning_rate, args.warmup_ratio, epoch)
        print({"eval_loss": val, "eval_accuracy": round(1 - val / 2, 4), "eval_runtime": 0.01, "epoch": float(epoch)})
    print({"train_runtime": 0.1, "train_samples_per_second": 1000.0, "train_loss": 0.5, "epoch": float(epochs)})


if __name__ == "__main__":
    main()
