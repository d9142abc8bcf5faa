"""GPU packing: trials per hour with `trials_per_gpu: auto` against 1 trial per GPU, on spaces/fashion.yaml.

The Fashion-MNIST search (cnn width 24, 12,000-image subset, 8 epochs per trial) through the
CLI as a user runs it, on every visible GPU (`resources.gpus_per_trial=1`, `workers=null`),
with pruning off so every trial trains its full 8 epochs whichever configs the sampler picks
(batch_size 64-256 still varies the memory per trial, which is what auto re-plans on). Runs
alternate 1, auto, auto, 1, ... Figures per run: wall time from the command's start to its
exit (process starts, dataset loading and the last trial's tail included, as a user waits
for them), trials per hour, epochs per hour, the most slots per GPU auto planned, and the
out-of-memory retries.

Needs a CUDA GPU and the Fashion-MNIST idx files where the objective finds them (data/ or /usr/share/datasets/fashion-mnist/;
the spec downloads them otherwise, which an offline GPU machine cannot); --smoke runs the same code path on CPU with the engine's fake GPUs
(HPSEARCH_FAKE_GPUS=1, HPSEARCH_FAKE_GPU_MEM_MB) and the torch-free memory fixture, so its
figures mean nothing.

    .venv/bin/python -m bench.gpu_packing                  # 24 trials per run, 2 repeats (about 10-20 minutes on one GPU)
    .venv/bin/python -m bench.gpu_packing --trials 12 --repeats 1
    .venv/bin/python -m bench.gpu_packing --smoke
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import ROOT, hpsearch_cli, interleave, median, parser, ratio, write_result

MEMORY = ROOT / "tests" / "fixtures" / "memory.py"
PLAN = re.compile(r"plan: GPU (\S+): (\d+) slots?")


FASHION = ROOT / "spaces" / "fashion.yaml"
# --smoke: the torch-free fixture on a fake GPU, the code path and not a measurement
SMOKE_SETS = [f"objective={MEMORY}:objective", "fixed.epochs=1", "fixed.sleep=0.1"]
FAKE_GPU = {"HPSEARCH_FAKE_GPUS": "1", "HPSEARCH_FAKE_GPU_MEM_MB": "24000"}


def run_cli(
    mode: str, trials: int, most: int, folder: Path, spec: Path = FASHION, extra: list[str] | None = None, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """`hpsearch run SPEC` on every visible GPU, `trials_per_gpu: MODE`, pruning off: the run's
    figures, and where its study is (bench.gpu_check reads its trials)."""
    import optuna

    study = f"pack-{mode}-{time.monotonic_ns()}"
    sets = ["pruner.name=none", "budget.timeout=36000", "budget.max_failures=5", "resources.workers=null", "resources.gpus_per_trial=1"]
    sets += [f"resources.trials_per_gpu={mode}", f"resources.trials_per_gpu_max={most}", *(extra or [])]
    args = ["run", str(spec), "--trials", str(trials), "--study", study, "--output", str(folder)]
    stdout, seconds = hpsearch_cli(*args, sets=sets, env=env)
    print(stdout[-6000:], flush=True)  # the plan lines and trial lines, for the log
    storage = f"sqlite:///{folder / study / 'study.db'}"
    done = [
        tr
        for tr in optuna.load_study(study_name=study, storage=storage).get_trials()
        if tr.state.is_finished() and tr.state != optuna.trial.TrialState.FAIL
    ]
    epochs = sum(int(tr.user_attrs.get("epochs") or 0) for tr in done)
    peaks = [float(tr.user_attrs["peak_mem_mb"]) for tr in done if tr.user_attrs.get("peak_mem_mb")]
    planned = [int(n) for _, n in PLAN.findall(stdout)]
    return {
        "wall_s": seconds,
        "trials": len(done),
        "trials_per_hour": 3600 * len(done) / seconds,
        "epochs_per_hour": 3600 * epochs / seconds,
        "most_slots_per_gpu": max(planned, default=1),
        "oom_retries": sum(int(tr.user_attrs.get("oom_retries") or 0) for tr in done),
        "peak_mem_mb_max": max(peaks, default=None),
        "plan_lines": [line.strip() for line in stdout.splitlines() if "plan: GPU" in line],
        "study": study,
        "storage": storage,
    }


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.add_argument("--trials", type=int, default=24, help="finished trials per run")
    p.add_argument("--repeats", type=int, default=2, help="runs of each variant, interleaved")
    p.add_argument("--max", type=int, default=4, help="resources.trials_per_gpu_max for auto (the spec's default is 4)")
    args = p.parse_args(argv)
    gpu = None
    if not args.smoke:
        import torch

        if not torch.cuda.is_available():
            raise SystemExit("bench.gpu_packing: no CUDA device; run it on a machine with a GPU, or use --smoke to check it on CPU")
        gpu = f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}"
    else:
        args.trials, args.repeats = 1, 1
    extra, env = (SMOKE_SETS, FAKE_GPU) if args.smoke else ([], None)
    with tempfile.TemporaryDirectory(prefix="hpsearch-packing-") as tmp:
        variants = {m: (lambda r, m=m: run_cli(m, args.trials, args.max, Path(tmp), extra=extra, env=env)) for m in ("1", "auto")}
        runs = interleave(variants, args.repeats)
    report(args, runs, gpu, "GPU packing: auto vs one trial per GPU", "(no target) trials per hour, auto vs 1 per GPU")


def report(args: Any, runs: dict[str, list[dict[str, Any]]], gpu: str | None, title: str, goal: str, least: float | None = None) -> Path:
    """OUT/gpu_packing.json from runs of "1" and "auto" (ARGS: a bench parser's, with trials, repeats
    and max); goal_met: auto's trials per hour >= LEAST x 1's, where LEAST is given."""
    med = {m: {k: median([r[k] for r in rs]) for k in ("wall_s", "trials_per_hour", "epochs_per_hour")} for m, rs in runs.items()}
    speedup = ratio(med["auto"]["trials_per_hour"], med["1"]["trials_per_hour"])
    most = max(r["most_slots_per_gpu"] for r in runs["auto"])
    rows = [
        [m, *(f"{med[m][k]:.0f}" for k in ("wall_s", "trials_per_hour", "epochs_per_hour"))]
        + [max(r["most_slots_per_gpu"] for r in rs), sum(r["oom_retries"] for r in rs)]
        for m, rs in runs.items()
    ]
    figures = {"gpu": gpu, "trials": args.trials, "repeats": args.repeats, "trials_per_gpu_max": args.max, "auto_over_1": speedup}
    return write_result(
        args,
        "gpu_packing",
        title,
        headline=f"auto: {speedup:.2f}x the trials per hour of 1 per GPU (up to {most} slots per GPU)",
        goal=goal,
        goal_met=None if least is None else speedup >= least,
        figures={**figures, "medians": med, "runs": runs},
        table={"columns": ["trials_per_gpu", "wall s", "trials/h", "epochs/h", "most slots per GPU", "OOM retries"], "rows": rows},
    )


if __name__ == "__main__":
    main()
