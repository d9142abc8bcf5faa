"""``hpsearch profile``: where a training step's time goes, and what a throughput knob buys.

``profile_config`` runs K optimizer steps of a config under ``torch.profiler`` (CPU, plus CUDA
when the run is on a GPU; shapes and memory recorded), writes a Chrome/Perfetto trace in the
layout of TensorBoard's profiler plugin, and splits the host time into the four phases the
training loop labels (``hpsearch.parts.loop.PHASES``). ``compare`` times K steps of each
variant (no profiler) and gives samples/s. Both need an objective with a ``build`` hook
(``train.build`` of the built-in objective), which returns the run ``train`` would train.
"""

from __future__ import annotations

import itertools
import os
import resource
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hpsearch.base.errors import UserError

MAX_VARIANTS = 16  # --compare runs their product one after another


@dataclass
class Source:
    """What to profile: the objective, its config, and a sentence saying which config was chosen."""

    objective: str
    config: dict[str, Any]
    chosen: str
    out: Path  # default folder for the trace
    where: str  # the file, for error lines


@dataclass
class Profile:
    steps: int
    phases: dict[str, float]  # phase -> host seconds over the profiled steps (CUDA-synced per phase)
    top_ops: list[tuple[str, float, float]]  # (operator, self CPU ms, self CUDA ms) over all steps
    peak_mem_mb: float
    peak_kind: str  # what peak_mem_mb measures
    trace: Path
    notes: list[str] = field(default_factory=list)


@dataclass
class Variant:
    changes: dict[str, Any]
    samples_per_s: float

    @property
    def label(self) -> str:
        return " ".join(f"{k}={_text(v)}" for k, v in self.changes.items())


# ---------------------------------------------------------------------------- what to profile


def resolve(path: str | Path, trial: int | None = None) -> Source:
    """A spec (its best trial, ``trial``, or its fixed values and the middle of its space: the log-middle of
    a log range, the middle of a linear one, the median of numeric choices, the first of other choices)
    or an exported CONFIG.yaml."""
    from hpsearch.spec.safe_yaml import read_yaml

    where = str(path)
    doc = read_yaml(where)
    if isinstance(doc, dict) and "config" in doc and "space" not in doc:
        if trial is not None:
            raise UserError(f"{where}: --trial picks a trial of a spec's study; this is an exported config")
        return _from_config(where)
    return _from_spec(where, trial)


def _from_config(where: str) -> Source:
    from hpsearch.reading.export import default_run_dir
    from hpsearch.tools.final_run import load_run_config

    doc = load_run_config(where)
    run = default_run_dir(doc)
    return Source(doc["objective"], dict(doc["config"]), f"the config in {where}", run.parent.parent / "profile" / run.name, where)


def _from_spec(where: str, number: int | None) -> Source:
    from hpsearch.reading import export as exporting
    from hpsearch.reading import results
    from hpsearch.spec.loader import load_spec
    from hpsearch.tools.lrfind import middle

    spec = load_spec(where)
    objective, out = exporting.portable_objective(spec.objective, spec), spec.study_dir / "profile"
    study = _study_or_none(spec, must=number is not None)
    if study is not None and (number is not None or results.completed(study)):
        trial = results.get_trial(study, number)
        values = ", ".join(f"{m}={v:.4g}" for m, v in zip(spec.metrics, trial.values or [], strict=False))
        which = "the best trial" if number is None else "trial"
        chosen = f"{which} {trial.number} of study {spec.study!r}" + (f" ({values})" if values else "")
        return Source(objective, dict(trial.user_attrs["config"]), chosen, out, where)
    config = spec.config_for(spec.tree.walk(lambda path, p: middle(p)))
    why = "has no finished trials" if study is not None else "has not been run"
    chosen = f"the spec's fixed values and its space's middle, as lr-find takes it (study {spec.study!r} {why})"
    return Source(objective, config, chosen, out, where)


def _study_or_none(spec: Any, must: bool) -> Any:
    from hpsearch.reading import results

    try:
        return results.load_study(spec)
    except UserError:
        if must:
            raise
        return None


# ---------------------------------------------------------------------------- --compare


def parse_compare(items: list[str]) -> list[dict[str, Any]]:
    """``["amp=off,bf16", "channels_last=false,true"]`` -> every combination, in order."""
    from hpsearch.spec.safe_yaml import parse_value

    axes: dict[str, list[Any]] = {}
    for item in items:
        key, sep, values = item.partition("=")
        texts = [v.strip() for v in values.split(",")]
        if not sep or not key.strip() or not all(texts):
            raise UserError(f"--compare {item!r}: expected KEY=VALUE1,VALUE2,..., e.g. --compare amp=off,bf16")
        if key.strip() in axes:
            raise UserError(f"--compare {key.strip()}: given twice; list all its values in one KEY=V1,V2")
        axes[key.strip()] = [_value(parse_value(text), text) for text in texts]
    combos = [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())]
    if len(combos) > MAX_VARIANTS:
        raise UserError(f"--compare: {len(combos)} combinations; at most {MAX_VARIANTS} (give fewer values)")
    return combos


def _value(parsed: Any, text: str) -> Any:
    """YAML 1.1 reads off/on/yes/no as booleans; only true/false are, here (amp=off is the text "off")."""
    return text if isinstance(parsed, bool) and text.lower() not in ("true", "false") else parsed


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


# ---------------------------------------------------------------------------- running


def load_build(source: Source) -> tuple[Any, Any]:
    """(the objective's build hook, its validate hook); UserError when it has no build hook."""
    from hpsearch.trial.objective import load_objective

    try:
        fn = load_objective(source.objective)
    except ValueError as exc:
        raise UserError(f"{source.where}: objective: {exc}") from None
    build = getattr(fn, "build", None)
    if build is None:
        raise UserError(
            f"{source.where}: objective {source.objective} has no build hook (fn.build = build(config) -> run); "
            "hpsearch profile times the built-in objective's steps (objectives/image_classification.py)"
        )
    return build, getattr(fn, "validate", None)


def checked(config: dict[str, Any], validate: Any, where: str) -> dict[str, Any]:
    problems = (validate(dict(config)) or []) if validate is not None else []
    if problems:
        raise UserError([f"{where}: config: {p}" for p in problems])
    return config


def one_process(config: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """A data-parallel config is profiled as one of its processes (the step a rank runs)."""
    processes = config.get("processes", 1)
    if isinstance(processes, int) and processes > 1:
        notes.append(f"processes: {processes}: profiled as one process (one rank's step, without the all-reduce)")
        return {**config, "processes": 1}
    return config


def profile_config(source: Source, steps: int, out: Path | None = None) -> Profile:
    """Build the run, take one warm-up step, then profile ``steps`` optimizer steps."""
    import torch
    from torch.profiler import ProfilerActivity, profile, tensorboard_trace_handler

    build, validate = load_build(source)
    notes: list[str] = []
    run = build(checked(one_process(source.config, notes), validate, source.where))
    folder = out or source.out
    folder.mkdir(parents=True, exist_ok=True)
    before = set(folder.glob("*.pt.trace.json"))
    _steps(run, 1)  # lazy init, cuDNN autotuning, torch.compile: not what a step costs
    cuda = run.device.type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats(run.device)
    # Kineto prints from level up (4 ERROR, 5 USDT start/stop markers). On CPU its only ERROR is
    # "gpuGetDeviceCount failed" (no GPU), so silence it all; on a GPU keep errors (CUPTI permissions).
    os.environ.setdefault("KINETO_LOG_LEVEL", "4" if cuda else "6")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    handler = tensorboard_trace_handler(str(folder), worker_name="hpsearch")
    with profile(activities=activities, record_shapes=True, profile_memory=True, on_trace_ready=handler) as prof:
        _steps(run, steps)
    trace = max(set(folder.glob("*.pt.trace.json")) - before, key=lambda p: p.stat().st_mtime)
    peak, kind = _peak(run.device)
    return Profile(steps, _phases(prof), _top_ops(prof), peak, kind, trace, notes)


def compare(source: Source, variants: list[dict[str, Any]], steps: int) -> list[Variant]:
    """samples/s of ``steps`` optimizer steps (after one warm-up step) for each variant of the config."""
    build, validate = load_build(source)
    notes: list[str] = []
    base = one_process(source.config, notes)
    configs = [checked({**base, **changes}, validate, f"{source.where}: --compare {Variant(changes, 0).label}") for changes in variants]
    done = []
    for changes, config in zip(variants, configs, strict=True):
        run = build(config)
        _steps(run, 1)
        start = time.perf_counter()
        samples = _steps(run, steps)  # ends with a host sync (the loss read), so the GPU work is in the time
        done.append(Variant(changes, samples / (time.perf_counter() - start)))
    return done


def _steps(run: Any, steps: int) -> int:
    """Train ``steps`` optimizer steps of ``run`` (cycling over its training split); the samples seen."""
    from hpsearch.parts.loop import train_epoch

    cfg = run.cfg
    accum = int(cfg.get("accum_steps", 1))
    result = train_epoch(
        run.model,
        _micro_batches(run.data.train, steps * accum),
        run.optimizer,
        run.scheduler,
        accum_steps=accum,
        dtype=run.dtype,
        scaler=run.scaler,
        grad_clip=float(cfg.get("grad_clip", 0.0)),
        label_smoothing=float(cfg.get("label_smoothing", 0.0)),
    )
    result.mean_loss()
    return result.samples


def _micro_batches(loader: Iterable[Any], n: int) -> Iterator[Any]:
    """``n`` batches, starting the loader again (a new epoch) when it runs out."""
    given = 0
    while given < n:
        before = given
        for batch in itertools.islice(loader, n - given):
            given += 1
            yield batch
        if given == before:
            raise UserError("the training split yields no batch: lower batch_size or raise train_subset")


def _phases(prof: Any) -> dict[str, float]:
    from hpsearch.parts.loop import PHASE_PREFIX, PHASES

    totals = {e.key: e.cpu_time_total for e in prof.key_averages()}  # microseconds, children included
    return {name: totals.get(PHASE_PREFIX + name, 0.0) / 1e6 for name in PHASES}


def _top_ops(prof: Any, limit: int = 8) -> list[tuple[str, float, float]]:
    """Operators by self time (device time first when there is any); our phase labels left out."""
    from hpsearch.parts.loop import PHASE_PREFIX

    rows = []
    for e in prof.key_averages():
        if e.key.startswith(PHASE_PREFIX) or e.key.startswith("ProfilerStep"):
            continue
        device = getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0.0))
        rows.append((e.key, e.self_cpu_time_total / 1e3, float(device) / 1e3))
    rows.sort(key=lambda r: (r[2], r[1]), reverse=True)
    return rows[:limit]


def _peak(device: Any) -> tuple[float, str]:
    import torch

    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "CUDA memory allocated by tensors, profiled steps"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10  # KiB on Linux -> MiB
    return rss, "process peak RSS (data set and libraries included)"


# ---------------------------------------------------------------------------- text


def profile_text(p: Profile) -> str:
    total = sum(p.phases.values()) or 1.0
    lines = [f"{'phase':<12} {'ms/step':>9} {'share':>7}"]
    lines += [f"{name:<12} {1e3 * s / p.steps:>9.2f} {100 * s / total:>6.1f}%" for name, s in p.phases.items()]
    device = any(row[2] for row in p.top_ops)
    lines += ["", f"{'top operators (self time)':<44} {'CPU ms':>9}" + (f" {'CUDA ms':>9}" if device else "")]
    for name, cpu_ms, dev_ms in p.top_ops:
        lines.append(f"{name[:44]:<44} {cpu_ms:>9.2f}" + (f" {dev_ms:>9.2f}" if device else ""))
    lines += ["", f"peak memory: {p.peak_mem_mb:,.0f} MiB ({p.peak_kind})"]
    return "\n".join(lines + [f"note: {n}" for n in p.notes])


def compare_text(variants: list[Variant]) -> str:
    width = max(len(v.label) for v in variants)
    fastest = max(v.samples_per_s for v in variants)
    return "\n".join(f"{v.label:<{width}}  {v.samples_per_s:>12,.0f} samples/s  {v.samples_per_s / fastest:>5.2f}x" for v in variants)


def config_text(config: dict[str, Any]) -> str:
    return yaml.safe_dump(config, default_flow_style=True, width=10**6).strip()
