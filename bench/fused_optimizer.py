"""Fused optimizer kernels on CPU: random configs of bench/spaces/bench_fashion.yaml with `fused_optimizer` off and on.

PyTorch's Adam, AdamW and SGD take `fused=True` on CPU as on CUDA (torch >= 2.4), but default to a
loop over the parameters there: several small ops per tensor per step, each paying the
dispatcher's fixed cost. At small batches a step's math is small, and that loop is a large part
of it; a search that favours small batches (the warm start's did: 72 % of its trials at batch 32
on the narrow space) pays it on most of its steps.

Two groups of configs, at the spec's full setting (12,000 images, 6 epochs, one thread):

    random  16 configs drawn at random from the space: what fusing does for a search's average config
    small   6 other draws moved to AdamW at batch 32 (their lr, weight decay, schedule, warmup and
            label smoothing kept; beta2 drawn from the space's range, an SGD lr scaled by 1/50)

Each config trains with fused_optimizer off and on in one process, in alternating order, after a
throw-away run (bench.common.key_pairs, as bench.denormals). The figures are the ratios of total
seconds on / off per group, and per batch size: the optimizer's cost per step is the same at any
batch size, so the gain is at small batches; per config, the ratio and both final val_acc. The
fused kernel orders the arithmetic differently, so the runs part at the rounding level and end a
few images apart: the accuracy goal is that they part both ways, not that they agree.

    .venv/bin/python -m bench.fused_optimizer          # 16 + 6 configs, ~3 min on 2 cores
    .venv/bin/python -m bench.fused_optimizer --smoke
"""

from __future__ import annotations

import random
from typing import Any

from bench.common import BENCH_SPEC, PAIR_COLUMNS, ROOT, key_pairs, median, parser, ratio, write_result

KEY = "fused_optimizer"
GOAL = 0.85  # fused, AdamW at batch 32: total seconds at most this share of unfused
NOT_SLOWER = 1.05  # random configs: fused at most this share of unfused (single runs vary by +-30 % here)
DRIFT = 0.002  # mean val_acc change on - off within +-0.2 points (10 images of 5,000): no systematic loss
SMALL = {"optimizer": "adamw", "batch_size": 32}


def small(base: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``base`` configs moved to AdamW at batch 32, beta2 uniform in the space's 0.9-0.999."""
    rng = random.Random(0)
    out = []
    for config in base:
        moved = {k: v for k, v in config.items() if k not in ("momentum", "nesterov", "beta2")}
        if config["optimizer"] != "adamw":  # an SGD lr is ~30x AdamW's: move it into AdamW's range by the same share
            moved["lr"] = config["lr"] * (1e-2 / 0.5)
        out.append({**moved, **SMALL, "beta2": rng.uniform(0.9, 0.999)})
    return out


def main(argv: list[str] | None = None) -> None:
    args = parser(__doc__).parse_args(argv)
    run = key_pairs(KEY, "small", small, args.smoke)
    per = run["random"]["per"] + run["small"]["per"]
    rand, sm = run["random"]["figures"], run["small"]["figures"]
    diffs = [x["on"]["val_acc"] - x["off"]["val_acc"] for x in per]
    mean_diff = sum(diffs) / len(diffs)
    by_batch: dict[int, list[float]] = {}
    for x in per:
        by_batch.setdefault(int(x["config"]["batch_size"]), []).append(ratio(x["on"]["s"], x["off"]["s"]))
    higher, lower, same = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs), sum(d == 0 for d in diffs)
    figures = {
        "spec": str(BENCH_SPEC.relative_to(ROOT)),
        "random": rand,
        "small": {**sm, "fixed": SMALL},
        "mean_val_acc_change": mean_diff,
        "median_abs_val_acc_change": median([abs(d) for d in diffs]),
        "max_abs_val_acc_change": max(abs(d) for d in diffs),
        "configs_higher_lower_same": [higher, lower, same],
        "median_ratio_by_batch_size": {str(b): median(r) for b, r in sorted(by_batch.items())},
        "per_config": per,
    }
    write_result(
        args,
        "fused_optimizer",
        "Fused optimizer kernels on CPU: fused_optimizer off vs on",
        headline=f"fused_optimizer on: {sm['ratio_total_on_to_off']:.2f}x the seconds of off on {sm['configs']} AdamW configs "
        f"at batch 32, {rand['ratio_total_on_to_off']:.2f}x on {rand['configs']} random configs of the Fashion-MNIST space; "
        f"val_acc change on - off {100 * mean_diff:+.2f} points on average ({higher} higher, {lower} lower, {same} same)",
        goal=f"fused on: ≤ {GOAL:g}x the total seconds of off on AdamW at batch 32, ≤ {NOT_SLOWER:g}x on random configs, "
        f"mean val_acc change within ±{100 * DRIFT:.1f} points",
        goal_met=sm["ratio_total_on_to_off"] <= GOAL and rand["ratio_total_on_to_off"] <= NOT_SLOWER and abs(mean_diff) <= DRIFT,
        figures=figures,
        table={"columns": PAIR_COLUMNS, "rows": run["rows"]},
    )


if __name__ == "__main__":
    main()
