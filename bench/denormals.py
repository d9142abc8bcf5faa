"""Subnormal floats on CPU: random configs of bench/spaces/bench_fashion.yaml with `flush_denormal` off and on.

The built-in objective sets torch.set_flush_denormal (default on): x86 CPUs compute with
subnormal floats (below 1.2e-38) many times slower than with normal ones, and training makes
them. AdamW's moments of a weight whose gradient is zero (a dead ReLU unit's) shrink by beta1 and
beta2 every step, and with a low beta2 they turn subnormal within the run; each step's update
then computes with them. Which configs suffer depends on the config: a search samples them all.

Two groups of configs, at the spec's full setting (12,000 images, 6 epochs, one thread):

    random  16 configs drawn at random from the space: what flushing does for a search's
            average config
    corner  6 other draws moved into the corner where a search's TPE often ends up (the warm
            start's first trials on seed 4 were there): AdamW, lr 3e-3 to 1e-2, beta2 0.9 to
            0.93, batch 32 (their schedule, warmup, weight decay, label smoothing kept)

Each config trains with flush off and on in one process, in alternating order (off, on; then
on, off for the next config), after a throw-away warm-up run. The figures are the ratios of
total seconds on / off per group; per config, the ratio and the final val_acc of both.

Flushing treats subnormal inputs and results as zero (DAZ and FTZ in the x86 MXCSR register, per
thread: torch.set_flush_denormal sets the calling thread's, which with threads: 1 does all the
math); a value that small is below anything a float32 weight or its update can resolve. Why the
corner: with a low beta2 AdamW's second moment of a dead ReLU unit's weight crosses 1e-38 within
the run (from 1e-8: ~700 steps at beta2 0.905, ~6,900 at 0.99; batch 32 runs 2,250 steps in 6
epochs). Checked by hand on one corner config (lr 0.006, beta2 0.905, batch 32, a plain PyTorch
loop): after 2 epochs 207 of the 256 hidden units were dead and 48 % of the first layer's second
moments subnormal, 77 % after 3.

    .venv/bin/python -m bench.denormals                # 16 + 6 configs, ~4 min on 2 cores
    .venv/bin/python -m bench.denormals --smoke
"""

from __future__ import annotations

import math
import random
from typing import Any

from bench.common import BENCH_SPEC, PAIR_COLUMNS, ROOT, key_pairs, parser, write_result

KEY = "flush_denormal"
GOAL = 0.8  # flush on, corner configs: total seconds at most this share of flush off; random ones not slower, the same accuracy
NOT_SLOWER = 1.05  # random configs: flush on at most this share of off (noise: single runs vary by +-30 % here)
CORNER = {"optimizer": "adamw", "batch_size": 32}  # and lr, beta2 drawn log-uniform / uniform from CORNER_RANGES
CORNER_RANGES = {"lr": (3e-3, 1e-2), "beta2": (0.9, 0.93)}
SAME = 2 / 5000  # val_acc counted the same within 2 images of 5,000 (flushing changes the arithmetic of tiny values)


def corner(base: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``base`` configs (their other values) moved into the corner: AdamW, high lr, low beta2, batch 32."""
    rng = random.Random(0)
    (lo, hi), (b_lo, b_hi) = CORNER_RANGES["lr"], CORNER_RANGES["beta2"]
    out = []
    for config in base:
        moved = {k: v for k, v in config.items() if k not in ("momentum", "nesterov")}
        lr = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        out.append({**moved, **CORNER, "lr": lr, "beta2": rng.uniform(b_lo, b_hi)})
    return out


def main(argv: list[str] | None = None) -> None:
    args = parser(__doc__).parse_args(argv)
    run = key_pairs(KEY, "corner", corner, args.smoke)
    per = run["random"]["per"] + run["corner"]["per"]
    rand, corn = run["random"]["figures"], run["corner"]["figures"]
    gaps = [abs(x["on"]["val_acc"] - x["off"]["val_acc"]) for x in per]
    same = sum(g <= SAME + 1e-12 for g in gaps)
    figures = {
        "spec": str(BENCH_SPEC.relative_to(ROOT)),
        "random": rand,
        "corner": {**corn, "fixed": CORNER, "ranges": CORNER_RANGES},
        "configs_same_val_acc": same,
        "max_val_acc_gap": max(gaps),
        "per_config": per,
    }
    write_result(
        args,
        "denormals",
        "Subnormal floats on CPU: flush_denormal off vs on",
        headline=f"flush_denormal on: {corn['ratio_total_on_to_off']:.2f}x the seconds of off on {corn['configs']} AdamW configs "
        f"with a low beta2 at batch 32, {rand['ratio_total_on_to_off']:.2f}x on {rand['configs']} random configs of the "
        f"Fashion-MNIST space; val_acc the same within 2 images in {same} of {len(per)}",
        goal=f"flush on: ≤ {GOAL:g}x the total seconds of off on the corner configs, ≤ {NOT_SLOWER:g}x on random ones, "
        "val_acc within 2 images of 5,000 per config",
        goal_met=corn["ratio_total_on_to_off"] <= GOAL and rand["ratio_total_on_to_off"] <= NOT_SLOWER and same == len(per),
        figures=figures,
        table={"columns": PAIR_COLUMNS, "rows": run["rows"]},
    )


if __name__ == "__main__":
    main()
