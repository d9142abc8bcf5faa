"""GPU check: `hpsearch run spaces/resnet.yaml` and the GPU paths around it, one step per call.

bench/gpu_check.sh runs the steps in order, each as `python -m bench.gpu_check --step N` in its
own process under its own timeout, then `--collect` merges what they wrote into
OUT/gpu_check.json. Searches go through the CLI as a user types them: spaces/resnet.yaml changed
by --set only, on files in CIFAR-10's on-disk format written here (10,000 learnable 32x32 images;
the GPU machine has no network), with `objective=bench.gpu_check:observed`: the built-in
objective called unchanged, noting in the trial's folder the device and AMP dtype it built.

  1 mission  8 trials x 3 epochs, trials_per_gpu: auto: per trial the device, AMP dtype,
             peak_mem_mb; trials at once after the first peaks; nothing left RUNNING, finished == budget
  2 packing  the same search with trials_per_gpu 1, then auto: trials per hour (OUT/gpu_packing.json)
  3 oom      batch_size 65,536 in fp16 (73,000 synthetic images): a real CUDA out-of-memory, then
             the retry's micro-batch and accumulation; the trial completes
  4 amp      fp32, bf16, fp16 + GradScaler, 2 epochs from one seed: final train loss within 10 % of
             fp32's; one step at 256 x 1 against 64 x 4 (norm statistics frozen, no TF32): grads within 1e-4
  5 compile  one trial with compile: true against the same trial without: compile s, samples/s
  6 export   hpsearch export of step 1's best trial, then hpsearch train best.yaml: test accuracy
  7 gpu      bench.gpu at batch 512, bf16, channels_last, compile off and on (OUT/gpu.json)

--smoke: the same steps on CPU, a fake GPU (HPSEARCH_FAKE_GPUS=1) and tiny sizes; what needs CUDA
(the out-of-memory, bf16/fp16, compile) records "skipped: no CUDA" and no figure.
"""

from __future__ import annotations

import json
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench import gpu, gpu_packing
from bench.common import ROOT, cpu_model, hpsearch_cli, interleave, parser, write_result

SPEC = ROOT / "spaces" / "resnet.yaml"
OBSERVED = "bench.gpu_check:observed"
NOTE = "observed.json"  # in the trial's folder: what the objective built


@dataclass(frozen=True)
class Size:
    per_file: int  # images per CIFAR file: five for training (10% of them validate), one for test
    epochs: int
    trials: int  # per search
    most: int  # trials_per_gpu_max for auto
    model: str  # fixed.model (resnet.yaml's is resnet18)
    batch: int  # step 4's batch size


SIZES = {False: Size(2000, 3, 8, 4, "resnet18", 256), True: Size(48, 1, 2, 2, "resnet8", 16)}  # --smoke: 2 cores, a fake GPU
LOSS_TOLERANCE, GRAD_TOLERANCE = 0.10, 1e-4  # final train loss relative to fp32's; max |grad diff| / max |grad|
GOAL_MFU, GOAL_PACKING = 0.25, 1.5
SKIPPED = "skipped: no CUDA"
FIELDS = {  # step -> its fields: every one is in gpu_check.json, None where the step did not measure it
    "mission": ["device", "amp", "failed", "finished", "budget", "running_left", "budget_exact", "peak_mem_mb_max", "planned_slots_per_gpu"]
    + ["most_at_once_after_first_peak", "tensorboard_ok", "wall_s", "trials", "plan_lines", "study", "storage"],
    "packing": ["trials_per_hour_1", "trials_per_hour_auto", "auto_over_1", "most_slots_per_gpu", "wall_s_1", "wall_s_auto"],
    "oom": ["state", "reason", "oom_retries", "batch_size_asked", "batch_size_ran", "accum_steps_ran", "amp", "grad_scaler", "peak_mem_mb"],
    "amp": ["runs", "loss_tolerance", "losses_within_tolerance", "grad_max_rel_diff", "grad_tolerance", "grads_equal"],
    "compile": ["compile_s", "samples_per_s_eager", "samples_per_s_compiled", "compiled_over_eager"],
    "export": ["best_trial", "test_acc", "val_acc", "device", "amp", "train_wall_s"],
    "gpu": ["batch_size", "combinations", "mfu_bf16_eager", "mfu_bf16_compiled", "compile_s"],
}
STEPS = list(FIELDS)


def observed(config: dict[str, Any], reporter: Any) -> dict[str, float]:
    """The built-in objective, unchanged; NOTE in the trial's folder says what it built."""
    import torch

    from objectives import image_classification as ic

    built, note = ic.build, dict[str, Any]()

    def spy(cfg: dict[str, Any]) -> Any:
        run = built(cfg)
        cuda = run.device.type == "cuda"
        name = torch.cuda.get_device_name(run.device) if cuda else cpu_model()
        amp = str(run.dtype).removeprefix("torch.") if run.dtype else "float32"
        note.update(device=f"{run.device.type}: {name}", amp=amp, grad_scaler=run.scaler is not None, compile=bool(run.cfg["compile"]))
        return run

    ic.build = spy
    try:
        metrics: dict[str, float] = ic.train(config, reporter)
        return metrics
    finally:
        ic.build = built
        if note and getattr(reporter, "trial_dir", None):  # no note: build() raised, and that error is the trial's
            Path(reporter.trial_dir).mkdir(parents=True, exist_ok=True)
            (Path(reporter.trial_dir) / NOTE).write_text(json.dumps(note))


observed.accum_steps = True  # type: ignore[attr-defined]  # as the built-in: the engine's out-of-memory retry applies


def data_root(work: Path, smoke: bool) -> Path:
    """CIFAR-10's files (cifar-10-batches-py/: five pickled training batches, a test batch), learnable:
    a coarse colour pattern per class, at half contrast, under pixel noise."""
    import pickle

    import numpy as np

    folder = work / "data" / "cifar-10-batches-py"
    if (folder / "test_batch").is_file():
        return folder.parent
    folder.mkdir(parents=True)
    rng, n = np.random.default_rng(0), SIZES[smoke].per_file
    patterns = rng.integers(0, 256, (10, 3, 8, 8)).repeat(4, 2).repeat(4, 3)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        labels = rng.integers(0, 10, n)
        pixels = np.clip(0.5 * patterns[labels] + 64 + rng.normal(0, 40, (n, 3, 32, 32)), 0, 255).astype(np.uint8)
        with open(folder / name, "wb") as f:
            pickle.dump({b"data": pixels.reshape(n, -1), b"labels": labels.tolist()}, f)
    return folder.parent


def search_sets(args: Any, *extra: str) -> list[str]:
    """spaces/resnet.yaml's --set lines here: this data, fewer epochs (warm-up scaled to them), `observed`."""
    size = SIZES[args.smoke]
    sets = [f"objective={OBSERVED}", f"fixed.data_root={data_root(args.work, args.smoke)}", "fixed.download=false"]
    sets += [f"fixed.epochs={size.epochs}", f"fixed.model={size.model}", "space.warmup_epochs.float=[0.0, 0.5]"]
    sets += ["space.batch_size=16", "space.accum_steps=1"] if args.smoke else []  # 2 cores: the space's batches would take minutes
    return [*sets, *extra]


def search(args: Any, mode: str, trials: int, *extra: str) -> dict[str, Any]:
    """`hpsearch run spaces/resnet.yaml` with --set only (bench.gpu_packing.run_cli): its figures."""
    env = gpu_packing.FAKE_GPU if args.smoke else None
    return gpu_packing.run_cli(mode, trials, SIZES[args.smoke].most, args.work / "runs", SPEC, search_sets(args, *extra), env)


def trial_rows(run: dict[str, Any]) -> list[dict[str, Any]]:
    import optuna

    rows = []
    for t in optuna.load_study(study_name=run["study"], storage=run["storage"]).get_trials():
        folder = Path(run["storage"].removeprefix("sqlite:///")).parent / f"trial-{t.number}"
        note = json.loads((folder / NOTE).read_text()) if (folder / NOTE).is_file() else {}
        a, config = t.user_attrs, t.user_attrs.get("config", {})
        history = a.get("history") or []
        rows.append(
            {"trial": t.number, "state": t.state.name, "reason": a.get("reason"), **note, "peak_mem_mb": a.get("peak_mem_mb")}
            | {"batch_size": config.get("batch_size"), "accum_steps": config.get("accum_steps"), "oom_retries": a.get("oom_retries", 0)}
            | {"samples_per_s": [h.get("samples_per_s") for h in history], "epoch_s": [h.get("epoch_time_s") for h in history]}
            | {"tensorboard_files": len(list(folder.rglob("events.out.tfevents*")))}
            | {"start": t.datetime_start.timestamp() if t.datetime_start else None}
            | {"end": t.datetime_complete.timestamp() if t.datetime_complete else None}
        )
    return rows


def most_at_once(rows: list[dict[str, Any]], since: float) -> int:
    """The most trials running at one time after `since` (seconds since the epoch)."""
    spans = [(max(r["start"], since), r["end"]) for r in rows if r["start"] and r["end"] and r["end"] > since]
    now = most = 0
    for _, change in sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans]):
        now += change
        most = max(most, now)
    return most


def mission(args: Any) -> dict[str, Any]:
    size = SIZES[args.smoke]
    run = search(args, "auto", size.trials)
    rows = trial_rows(run)
    finished, failed = (sum(r["state"] in states for r in rows) for states in (("COMPLETE", "PRUNED"), ("FAIL",)))
    running = sum(r["state"] == "RUNNING" for r in rows)
    first_end = min((r["end"] for r in rows if r["end"]), default=0.0)
    return {
        "device": sorted({str(r.get("device")) for r in rows}),
        "amp": sorted({str(r.get("amp")) for r in rows}),
        "failed": failed,
        "finished": finished,
        "budget": size.trials,
        "running_left": running,
        "budget_exact": finished == size.trials and not running,
        "peak_mem_mb_max": run["peak_mem_mb_max"],
        "planned_slots_per_gpu": run["most_slots_per_gpu"],
        "most_at_once_after_first_peak": most_at_once(rows, first_end),
        "tensorboard_ok": all(r["tensorboard_files"] > 0 for r in rows if r["state"] == "COMPLETE"),
        **{k: run[k] for k in ("wall_s", "plan_lines", "study", "storage")},
        "trials": rows,
    }


def packing(args: Any) -> dict[str, Any]:
    size = SIZES[args.smoke]
    runs = interleave({m: (lambda r, m=m: search(args, m, size.trials)) for m in ("1", "auto")}, 1)
    args.trials, args.repeats, args.max = size.trials, 1, size.most
    title = f"GPU packing: {size.trials} trials of the ResNet-18 small-data search, auto vs 1 per GPU"
    goal = f"auto >= {GOAL_PACKING}x the trials per hour of 1 per GPU"
    path = gpu_packing.report(args, runs, gpu_name(), title, goal, None if args.smoke else GOAL_PACKING)
    relabel(path, "bash bench/gpu_check.sh (step 2)")
    most = runs["auto"][0]["most_slots_per_gpu"]
    figures = {f"{k}_{m}": r[0][k] for m, r in runs.items() for k in ("trials_per_hour", "wall_s")}
    return figures | {"auto_over_1": figures["trials_per_hour_auto"] / figures["trials_per_hour_1"], "most_slots_per_gpu": most}


def oom(args: Any) -> dict[str, Any]:
    sets = ["fixed.dataset=synthetic", "fixed.synthetic_samples=73000", "space.batch_size=65536", "space.accum_steps=1"]
    sets += ["fixed.amp=fp16", "fixed.eval_batch_size=1024", "fixed.epochs=1"]  # 65,536 x 2 to evaluate would run out again
    if not gpu_name():
        return skipped(args, "oom", sets, batch_size_asked=65536)
    t = trial_rows(search(args, "1", 1, *sets))[0]
    keys = ("state", "reason", "oom_retries", "amp", "grad_scaler", "peak_mem_mb")
    return {k: t.get(k) for k in keys} | {"batch_size_asked": 65536, "batch_size_ran": t["batch_size"], "accum_steps_ran": t["accum_steps"]}


def amp(args: Any) -> dict[str, Any]:
    size = SIZES[args.smoke]
    config = {"dataset": "cifar10", "data_root": str(data_root(args.work, args.smoke)), "model": size.model, "lr": 0.05}
    config |= {"epochs": 1 if args.smoke else 2, "batch_size": size.batch, "optimizer": "sgd", "seed": 0, "checkpoint_every": 0}
    runs: dict[str, Any] = {}
    for mode in ("off", "bf16", "fp16"):
        if mode != "off" and not gpu_name():
            runs[mode] = SKIPPED
            continue
        metrics, note = observe({**config, "amp": mode})
        runs[mode] = {"train_loss": metrics["train_loss"], "val_acc": metrics["val_acc"], **note}
    base = runs["off"]["train_loss"]
    within = {m: abs(r["train_loss"] - base) <= LOSS_TOLERANCE * base for m, r in runs.items() if isinstance(r, dict) and m != "off"}
    diff = accumulation_diff(size.model, 2 * size.batch if args.smoke else 256)
    figures = {"runs": runs, "loss_tolerance": LOSS_TOLERANCE, "losses_within_tolerance": within or None}
    return figures | {"grad_max_rel_diff": diff, "grad_tolerance": GRAD_TOLERANCE, "grads_equal": diff <= GRAD_TOLERANCE}


def observe(config: dict[str, Any]) -> tuple[dict[str, float], dict[str, Any]]:
    """One training of the built-in objective in this process: its final metrics and observed()'s note."""
    import tempfile
    from types import SimpleNamespace

    with tempfile.TemporaryDirectory() as tmp:
        metrics = observed(config, SimpleNamespace(trial_dir=tmp, report=lambda epoch, metrics: None))
        return metrics, json.loads((Path(tmp) / NOTE).read_text())


def accumulation_diff(model_name: str, batch: int) -> float:
    """One train_epoch step on BATCH samples at accum_steps 1 against 4 x BATCH/4: max |grad diff| / max |grad|.
    Norm layers keep their statistics (eval mode), which differ per micro-batch by design; no TF32."""
    import copy

    import torch

    from hpsearch.parts.loop import train_epoch
    from hpsearch.parts.models import build_model

    class Frozen(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.inner(x)  # type: ignore[no-any-return]

        def train(self, mode: bool = True) -> Frozen:
            super().train(mode)
            self.inner.eval()
            return self

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    model = Frozen(build_model(model_name, 10, (3, 32, 32), {})).to(device)
    x, y = torch.randn(batch, 3, 32, 32, device=device), torch.randint(0, 10, (batch,), device=device)
    grads: list[list[torch.Tensor]] = []
    for accum in (1, 4):
        copied, n = copy.deepcopy(model), batch // accum
        sgd = torch.optim.SGD(copied.parameters(), lr=0.0)  # moves nothing; the hook keeps the gradients it would apply
        sgd.register_step_pre_hook(lambda opt, *_: grads.append([p.grad.clone() for g in opt.param_groups for p in g["params"]]))
        train_epoch(copied, [(x[i : i + n], y[i : i + n]) for i in range(0, batch, n)], sgd, None, accum_steps=accum, check_every=0)
    diff = max(float((a - b).abs().max()) for a, b in zip(*grads, strict=True))
    return diff / max(float(a.abs().max()) for a in grads[0])


def compile_step(args: Any) -> dict[str, Any]:
    # 23,040 training and 2,560 validation images: whole batches of 256 and 512, no odd last batch to compile again for
    sets = ["fixed.dataset=synthetic", "fixed.synthetic_samples=25600", "space.batch_size=256", "space.accum_steps=1"]
    if not gpu_name():
        return skipped(args, "compile", [*sets, "fixed.compile=true"])
    rows = {flag: trial_rows(search(args, "1", 1, *sets, f"fixed.compile={flag}"))[0] for flag in ("false", "true")}
    eager, compiled = (statistics.median(rows[f]["samples_per_s"][1:]) for f in ("false", "true"))
    compile_s = rows["true"]["epoch_s"][0] - rows["false"]["epoch_s"][0]  # epoch 1's extra seconds: compiling train and eval graphs
    return {
        "compile_s": compile_s,
        "samples_per_s_eager": eager,
        "samples_per_s_compiled": compiled,
        "compiled_over_eager": compiled / eager,
    }


def export(args: Any) -> dict[str, Any]:
    """Step 1's study (a 1-trial search of its own when step 1 left none): export, then train best.yaml."""
    first = args.work / "step1.json"
    run = json.loads(first.read_text()) if first.is_file() else search(args, "1", 1)
    best, out = args.work / "best.yaml", args.work / "train"
    where = ["--study", run["study"], "--storage", run["storage"], "--output", str(args.work / "runs")]
    hpsearch_cli("export", str(SPEC), *where, "-o", str(best))
    _, seconds = hpsearch_cli("train", str(best), "-o", str(out), "--quiet", sets=["evaluate_test=true"])
    metrics, note = (json.loads((out / name).read_text()) for name in ("metrics.json", NOTE))
    figures = {"best_trial": yaml.safe_load(best.read_text())["provenance"]["trial"], "train_wall_s": seconds}
    return figures | {k: metrics.get(k) for k in ("test_acc", "val_acc")} | {k: note.get(k) for k in ("device", "amp")}


def gpu_step(args: Any) -> dict[str, Any]:
    """bench.gpu in this process: bf16, channels_last, compile off and on, batch 512 (--smoke: its own tiny run)."""
    argv = ["--amp", "bf16", "--channels-last", "on", "--compile", "off", "on", "--batch-size", "512"]
    gpu.main(["--smoke", "--channels-last", "on", "--out", str(args.work)] if args.smoke else [*argv, "--out", str(args.out)])
    path = (args.work if args.smoke else args.out) / "gpu.json"
    relabel(path, " ".join([".venv/bin/python -m bench.gpu", *argv]))
    combos = json.loads(path.read_text())["figures"]["combinations"]
    bf16 = {m["compile"]: m for m in combos.values() if m["amp"] == "bf16"}
    figures = {"batch_size": 8 if args.smoke else 512, "combinations": combos, "compile_s": bf16.get("on", {}).get("compile_s")}
    return figures | {"mfu_bf16_eager": bf16.get("off", {}).get("mfu"), "mfu_bf16_compiled": bf16.get("on", {}).get("mfu")}


def skipped(args: Any, step: str, sets: list[str], **known: Any) -> dict[str, Any]:
    """No CUDA: the step's search is only validated (its --set lines must load), nothing measured."""
    validate = [f"--set={s}" for s in search_sets(args, *sets)]
    hpsearch_cli("validate", str(SPEC), "--samples", "1", *validate)
    return {**dict.fromkeys(FIELDS[step]), **known, "status": f"{SKIPPED} (its spec validated)"}


def gpu_name() -> str | None:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def relabel(path: Path, command: str) -> None:
    """A result written from a step says the command that reruns it, not the step's own argv."""
    result = json.loads(path.read_text())
    path.write_text(json.dumps({**result, "command": command}, indent=2) + "\n")


def collect(args: Any) -> Path:
    """OUT/gpu_check.json: every step's fields (None where not measured), its status, exit code and seconds."""
    steps = {}
    for n, name in enumerate(STEPS, 1):
        got = json.loads(p.read_text()) if (p := args.work / f"step{n}.json").is_file() else {}
        rc = (args.work / f"step{n}.rc").read_text().split() if (args.work / f"step{n}.rc").is_file() else ["skip", "0", "0"]
        log = args.work / "logs" / f"step{n}.log"
        last = log.read_text(errors="replace").strip().splitlines()[-1:] if log.is_file() else []
        status = got.pop("status", "ok") if got else f"failed: {' '.join(last)[:300]}"
        status = {"124": "timed out", "137": "timed out", "skip": "skipped: no time left"}.get(rc[0], status) if not got else status
        steps[name] = {**dict.fromkeys(FIELDS[name]), **got, "status": status, "exit": rc[0], "seconds": rc[1], "limit_s": rc[2]}
    ok = [s for s in steps.values() if s["status"] == "ok"]
    mfu, ratio = steps["gpu"]["mfu_bf16_compiled"], steps["packing"]["auto_over_1"]
    met = len(ok) == len(STEPS) and (mfu or 0) >= GOAL_MFU and (ratio or 0) >= GOAL_PACKING
    headline = f"{len(ok)} of {len(STEPS)} steps ok" + (f"; ResNet-18 bf16 compiled MFU {100 * mfu:.0f}%" if mfu else "")
    rows = [[n, name, s["status"], s["seconds"]] for n, (name, s) in enumerate(steps.items(), 1)]
    print("\n".join(f"step {n} {name}: {status} ({seconds} s)" for n, name, status, seconds in rows), flush=True)
    path = write_result(
        args,
        "gpu_check",
        "GPU check: hpsearch run spaces/resnet.yaml and the GPU paths around it on one GPU",
        headline=headline + (f"; packing {ratio:.2f}x trials/h" if ratio else ""),
        goal=f"every step ok; ResNet-18 bf16 MFU >= {GOAL_MFU:.0%}; packing >= {GOAL_PACKING}x trials/h",
        goal_met=met,
        figures={"gpu": gpu_name(), "steps": steps},
        table={"columns": ["step", "name", "status", "seconds"], "rows": rows},
    )
    relabel(path, "bash bench/gpu_check.sh")
    return path


def main(argv: list[str] | None = None) -> None:
    p = parser(__doc__)
    p.add_argument("--step", type=int, choices=range(1, len(STEPS) + 1), help="run this step, write WORK/stepN.json")
    p.add_argument("--collect", action="store_true", help="merge WORK/step*.json into OUT/gpu_check.json")
    p.add_argument("--work", type=Path, help="the run's scratch folder (data, studies, step results)")
    args = p.parse_args(argv)
    if args.collect:
        collect(args)
    elif args.step:
        step = [mission, packing, oom, amp, compile_step, export, gpu_step][args.step - 1]
        (args.work / f"step{args.step}.json").write_text(json.dumps(step(args), indent=2, default=str) + "\n")
    else:  # python -m bench.gpu_check (bench.run_all): the whole check, into --out
        script = ["bash", str(ROOT / "bench" / "gpu_check.sh"), *(["--smoke"] if args.smoke else [])]
        os.execvpe("bash", script, {**os.environ, "OUT": str(args.out)})


if __name__ == "__main__":
    main()
