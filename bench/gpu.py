"""GPU: samples/s, GPU-busy fraction and model FLOP utilisation of the objective's training step.

ResNet-18 (hpsearch.parts.models, small-image stem) on synthetic CIFAR-shaped data held on
the GPU, through the objective's own parts (build_data's TensorLoader with crop+flip on the
device, build_optimizer's fused SGD, train_epoch with AMP), for every combination of
amp off / bf16 / fp16, channels_last off / on, torch.compile off / on.

  samples/s  training samples per second over --steps steps after --warmup steps (wall clock,
             synchronized at both ends; the loop itself never synchronizes)
  busy       share of a profiled window of steps in which a CUDA kernel was running (union of
             kernel intervals from torch.profiler / window wall time)
  MFU        FLOPs per step (torch.utils.flop_counter.FlopCounterMode on forward+backward) x
             steps/s / the GPU's peak for the dtype (dense tensor-core figures, table below;
             amp off runs in TF32, as the objective sets matmul precision "high")
  compile_s  seconds of the first --warmup steps beyond the same steps uncompiled

One prepared run for a machine with a GPU (about 5-8 minutes on one H100-class GPU):

    .venv/bin/python -m bench.gpu                          # all 12 combinations
    .venv/bin/python -m bench.gpu --compile off            # skip torch.compile (about 1 minute)
    .venv/bin/python -m bench.gpu --smoke                  # tiny, runs on CPU too (no busy/MFU figures)
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

from bench.common import parser, write_result

# Dense peak TFLOP/s by GPU name fragment (vendor datasheets, no sparsity): bf16/fp16 tensor, tf32 tensor.
PEAK_TFLOPS: dict[str, dict[str, float]] = {
    "H200": {"bf16": 989.0, "fp16": 989.0, "tf32": 494.0},
    "H100 SXM": {"bf16": 989.0, "fp16": 989.0, "tf32": 494.0},
    "H100 PCIe": {"bf16": 756.0, "fp16": 756.0, "tf32": 378.0},
    "H100": {"bf16": 989.0, "fp16": 989.0, "tf32": 494.0},
    "A100": {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0},
    "L40S": {"bf16": 362.0, "fp16": 362.0, "tf32": 183.0},
    "L4": {"bf16": 121.0, "fp16": 121.0, "tf32": 60.0},
    "A10": {"bf16": 125.0, "fp16": 125.0, "tf32": 62.5},
    "RTX 4090": {"bf16": 165.0, "fp16": 165.0, "tf32": 82.6},
    "RTX 3090": {"bf16": 71.0, "fp16": 71.0, "tf32": 35.6},
    "V100": {"bf16": 0.0, "fp16": 125.0, "tf32": 15.7},  # no bf16 or tf32 tensor cores: fp32 peak
    "T4": {"bf16": 0.0, "fp16": 65.0, "tf32": 8.1},
}
AMP = ("off", "bf16", "fp16")


def peak_tflops(gpu: str | None, amp: str) -> float | None:
    if not gpu:
        return None
    key = {"off": "tf32", "bf16": "bf16", "fp16": "fp16"}[amp]
    for fragment, peaks in PEAK_TFLOPS.items():  # most specific names first
        if fragment in gpu:
            return peaks[key] or None
    return None


def cycle(loader: Any) -> Iterator[Any]:
    while True:
        yield from loader


def flops_per_step(model: Any, x: Any, y: Any) -> int:
    """Forward + backward FLOPs of one micro-batch (the optimizer step is negligible)."""
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        F.cross_entropy(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def busy_fraction(run_steps: Any, device: Any) -> float | None:
    """Union of CUDA kernel intervals / wall time over a profiled window of steps."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if device.type != "cuda":
        return None
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        start = time.perf_counter()
        run_steps()
        torch.cuda.synchronize()
        wall_us = (time.perf_counter() - start) * 1e6
    intervals = sorted(
        (e.time_range.start, e.time_range.end)
        for e in prof.events()
        if e.device_type == torch.profiler.DeviceType.CUDA and e.time_range.end > e.time_range.start
    )
    busy, end = 0.0, float("-inf")
    for a, b in intervals:
        if b > end:
            busy += b - max(a, end)
            end = b
    return min(1.0, busy / wall_us) if wall_us > 0 else None


def measure(cfg: dict[str, Any], device: Any, steps: int, warmup: int, profile_steps: int) -> dict[str, Any]:
    import torch

    from hpsearch.parts.datasets import build_data
    from hpsearch.parts.loop import amp_dtype, grad_scaler, train_epoch
    from hpsearch.parts.models import build_model
    from hpsearch.parts.optim import build_optimizer

    torch.manual_seed(0)
    data = build_data(cfg, device)
    raw = build_model(cfg["model"], data.num_classes, data.image_shape, cfg).to(device)
    if cfg["channels_last"]:
        raw = raw.to(memory_format=torch.channels_last)
        data.transform.channels_last = True
    model: Any = torch.compile(raw) if cfg["compile"] else raw
    optimizer = build_optimizer(raw, cfg, device)
    dtype = amp_dtype(cfg["amp"], device)
    scaler = grad_scaler(device, dtype)
    batches = cycle(data.train)

    def run(n: int) -> float:
        """n optimizer steps; seconds of wall time, synchronized at the ends only."""
        sync: Callable[[], None] = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
        sync()
        start = time.perf_counter()
        result = train_epoch(model, itertools.islice(batches, n), optimizer, None, dtype=dtype, scaler=scaler, check_every=0)
        sync()
        seconds = time.perf_counter() - start
        if not torch.isfinite(result.loss_sum):
            raise FloatingPointError(f"loss not finite in {cfg}")
        return seconds

    warm_s = run(warmup)
    seconds = run(steps)
    busy = busy_fraction(lambda: run(profile_steps), device)
    x, y = next(batches)
    flops = flops_per_step(raw, x, y)
    return {
        "samples_per_s": steps * cfg["batch_size"] / seconds,
        "step_ms": 1000 * seconds / steps,
        "warmup_s": warm_s,
        "busy": busy,
        "tflops_per_s": flops * steps / seconds / 1e12,
        "gflops_per_step": flops / 1e9,
        "peak_mem_mb": torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None,
    }


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.add_argument("--amp", nargs="+", default=list(AMP), choices=AMP)
    p.add_argument("--channels-last", nargs="+", default=["off", "on"], choices=["off", "on"])
    p.add_argument("--compile", nargs="+", default=["off", "on"], choices=["off", "on"])
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--steps", type=int, default=100, help="timed optimizer steps per combination")
    p.add_argument("--warmup", type=int, default=15, help="untimed steps first (compilation, cudnn autotuning)")
    p.add_argument("--profile-steps", type=int, default=10)
    p.add_argument("--model", default="resnet18")
    args = p.parse_args(argv)

    import torch

    cuda = torch.cuda.is_available()
    if not cuda and not args.smoke:
        raise SystemExit("bench.gpu: no CUDA device; run it on a machine with a GPU, or use --smoke to check it on CPU")
    if args.smoke:
        args.steps, args.warmup, args.profile_steps, args.batch_size = 2, 1, 2, 8
        args.compile = ["off"]
        if not cuda:
            args.amp, args.model = ["off"], "resnet8"
    if cuda:
        torch.backends.cudnn.benchmark = True  # as the objective sets it
        torch.set_float32_matmul_precision("high")
    gpu = torch.cuda.get_device_name(0) if cuda else None
    results = measure_all(args, torch.device("cuda" if cuda else "cpu"), gpu)
    write(args, gpu, results)


def measure_all(args: Any, device: Any, gpu: str | None) -> dict[str, dict[str, Any]]:
    """Every combination of --amp, --channels-last and --compile that the GPU has, by name."""
    import torch

    base = {
        "dataset": "synthetic",
        "synthetic_shape": [3, 32, 32],
        "synthetic_samples": 16384 if not args.smoke else 64,
        "aug_crop_padding": 4,
        "aug_hflip": True,
        "model": args.model,
        "batch_size": args.batch_size,
        "optimizer": "sgd",
        "lr": 0.05,
        "momentum": 0.9,
        "weight_decay": 5e-4,
        "val_fraction": 0.1,
    }
    results: dict[str, dict[str, Any]] = {}
    uncompiled_warm: dict[tuple[str, str], float] = {}
    for amp, cl, comp in itertools.product(args.amp, args.channels_last, args.compile):
        if amp == "bf16" and gpu and not torch.cuda.is_bf16_supported():
            continue
        cfg = {**base, "amp": amp, "channels_last": cl == "on", "compile": comp == "on"}
        if gpu:
            torch.cuda.reset_peak_memory_stats()
        m = measure(cfg, device, args.steps, args.warmup, args.profile_steps)
        if comp == "off":
            uncompiled_warm[(amp, cl)] = m["warmup_s"]
        elif (amp, cl) in uncompiled_warm:
            m["compile_s"] = m["warmup_s"] - uncompiled_warm[(amp, cl)]
        peak = peak_tflops(gpu, amp)
        m.update(amp=amp, channels_last=cl, compile=comp, mfu=m["tflops_per_s"] / peak if peak else None)
        name = f"amp={amp} channels_last={cl} compile={comp}"
        results[name] = m
        print(f"{name}: {m['samples_per_s']:.0f} samples/s, busy {m['busy']}, MFU {m['mfu']}", flush=True)
    return results


def write(args: Any, gpu: str | None, results: dict[str, dict[str, Any]]) -> None:
    def pct(v: float | None, digits: int) -> str:
        return "-" if v is None else f"{100 * v:.{digits}f}%"

    rows = [
        [m["amp"], m["channels_last"], m["compile"], f"{m['samples_per_s']:.0f}", f"{m['step_ms']:.1f}", pct(m["busy"], 0)]
        + [f"{m['tflops_per_s']:.1f}", pct(m["mfu"], 1), "-" if m.get("compile_s") is None else f"{m['compile_s']:.0f}"]
        for m in results.values()
    ]
    fastest = max(results, key=lambda k: results[k]["samples_per_s"])
    plain = results.get("amp=off channels_last=off compile=off")
    over_plain = results[fastest]["samples_per_s"] / plain["samples_per_s"] if plain else None
    figures = {"gpu": gpu, "model": args.model, "batch_size": args.batch_size, "steps": args.steps, "combinations": results}
    best = results[fastest]
    headline = f"fastest {fastest}: {best['samples_per_s']:.0f} samples/s" + (f", MFU {100 * best['mfu']:.0f}%" if best["mfu"] else "")
    write_result(
        args,
        "gpu",
        f"GPU training step ({args.model}, synthetic 3x32x32, batch {args.batch_size})",
        headline=headline,
        goal="(no target) samples/s, GPU-busy share and MFU per setting",
        figures={**figures, "fastest": fastest, "fastest_over_fp32_plain": over_plain},
        table={
            "columns": ["amp", "channels_last", "compile", "samples/s", "ms/step", "GPU busy", "TFLOP/s", "MFU", "compile s"],
            "rows": rows,
        },
        notes=[f"Fastest: {fastest}." + (f" {over_plain:.2f}x the fp32, NCHW, eager step." if over_plain else "")],
    )


if __name__ == "__main__":
    main()
