"""DDP scaling: training samples/s of `hpsearch train --devices N` against one GPU, built-in objective.

One config (resnet20 on synthetic 3x32x32 images, 50,000 per epoch, batch_size 256 per
process, bf16 where the GPU has it) trained through the CLI as a user runs it, with 1 and N
GPUs (default: every visible one), alternating 1, N, N, 1, ... The batch per process stays
256, so N GPUs step on N times the samples (weak scaling, as `--devices N` does by default;
README: Data-parallel trials and training runs). Figure per run: the median over epochs 2..E
of the epoch's samples/s (all ranks' samples over rank 0's training time; epoch 1 holds
cuDNN autotuning and is left out). Speedup = N-GPU / 1-GPU samples/s; efficiency = speedup / N.

Needs CUDA and at least 2 GPUs; --smoke runs the same code path on CPU with `--processes 2`
(gloo, digits, mlp), so its figures mean nothing.

    .venv/bin/python -m bench.ddp_scaling                  # 1 vs all GPUs, 4 epochs, 2 repeats
    .venv/bin/python -m bench.ddp_scaling --devices 2 4 8  # several sizes against 1
    .venv/bin/python -m bench.ddp_scaling --smoke --out /tmp
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench.common import hpsearch_cli, interleave, median, parser, ratio, write_result

GPU_CONFIG = {
    "dataset": "synthetic",
    "synthetic_samples": 55_556,  # 50,000 training images after the 10% validation split
    "synthetic_shape": [3, 32, 32],
    "model": "resnet20",
    "batch_size": 256,  # per process
    "epochs": 4,
    "lr": 0.1,
    "amp": "auto",
    "seed": 0,
}
SMOKE_CONFIG = {"dataset": "digits", "model": "mlp", "batch_size": 32, "epochs": 2, "seed": 0, "threads": 1}


def train(config: dict[str, Any], ranks: int, folder: Path, smoke: bool) -> dict[str, Any]:
    name = f"ranks{ranks}-{time.monotonic_ns()}"
    doc = {"objective": "hpsearch.objectives.image_classification:train", "metric": "val_acc", "config": config}
    (folder / f"{name}.yaml").write_text(yaml.safe_dump(doc))
    flag = "--processes" if smoke else "--devices"
    hpsearch_cli("train", str(folder / f"{name}.yaml"), "-o", str(folder / name), flag, str(ranks))
    history = [json.loads(line) for line in (folder / name / "history.jsonl").read_text().splitlines()]
    speeds = [h["samples_per_s"] for h in history[1:]] or [history[-1]["samples_per_s"]]
    final = json.loads((folder / name / "metrics.json").read_text())
    return {"samples_per_s": median(speeds), "val_acc": final["val_acc"], "epochs": len(history)}


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.add_argument("--devices", type=int, nargs="+", help="GPU counts to compare with 1 (default: every visible GPU)")
    p.add_argument("--epochs", type=int, default=GPU_CONFIG["epochs"], help="epochs per run (the first is left out)")
    p.add_argument("--repeats", type=int, default=2, help="runs of each size, interleaved")
    args = p.parse_args(argv)
    gpu = None
    if args.smoke:
        config, sizes, args.repeats = SMOKE_CONFIG, [2], 1
    else:
        import torch

        count = torch.cuda.device_count()
        if count < 2:
            raise SystemExit(f"bench.ddp_scaling: needs at least 2 CUDA GPUs, {count} visible; use --smoke to check it on CPU")
        config, sizes = {**GPU_CONFIG, "epochs": args.epochs}, args.devices or [count]
        gpu = f"{count} x {torch.cuda.get_device_name(0)}"
    with tempfile.TemporaryDirectory(prefix="hpsearch-ddp-") as tmp:
        variants = {n: (lambda r, n=n: train(config, n, Path(tmp), args.smoke)) for n in [1, *sizes]}
        runs = interleave({str(n): fn for n, fn in variants.items()}, args.repeats)
    speed = {n: median([r["samples_per_s"] for r in rs]) for n, rs in runs.items()}
    rows = [[n, f"{speed[n]:,.0f}", f"{ratio(speed[n], speed['1']):.2f}", f"{ratio(speed[n], speed['1']) / int(n):.2f}"] for n in runs]
    top = str(max(int(n) for n in runs))
    write_result(
        args,
        "ddp_scaling",
        "DDP scaling: samples/s on 1 vs N GPUs",
        headline=f"{top} {'processes' if args.smoke else 'GPUs'}: {ratio(speed[top], speed['1']):.2f}x the samples/s of 1 ({ratio(speed[top], speed['1']) / int(top):.0%} efficiency)",
        goal="(no target) training samples/s with N GPUs over 1 GPU, batch per GPU fixed",
        figures={"gpu": gpu, "config": config, "repeats": args.repeats, "samples_per_s": speed, "runs": runs},
        table={"columns": ["GPUs" if not args.smoke else "processes", "samples/s", "speedup", "efficiency"], "rows": rows},
    )


if __name__ == "__main__":
    main()
