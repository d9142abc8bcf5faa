"""``hpsearch train best.yaml``: the full training run of an exported config.

The very objective that ran the search trial runs again with the exported config, through
the same ``run_trial``, with a reporter that never prunes and checkpoints to
``<run dir>/checkpoint.pt`` (the objective saves it each epoch and loads it on start), so a
killed run started again continues from its last checkpoint. The run dir holds:

    config.yaml     the exported file as run (overrides applied); a restart must match it
    history.jsonl   one line of metrics per epoch, across restarts
    checkpoint.pt   the objective's resume state, written each epoch
    metrics.json    the final metrics (written once the run completes)
    model.pt        the weights, when the config says save_model: true (early_stopping: the best epoch's)
    model_last.pt   early_stopping with save_model: the last epoch's weights
    events.out.*    TensorBoard scalars and the HParams view
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hpsearch.base.errors import UserError
from hpsearch.base.text import fmt
from hpsearch.reading.export import apply_config_overrides, check_config
from hpsearch.spec.safe_yaml import load_limited

REQUIRED = ("objective", "config", "metric")
RUN_FILES = ("checkpoint.pt", "checkpoint.tmp", "history.jsonl", "metrics.json", "model.pt", "model_last.pt", "config.yaml")


@dataclass
class TrainResult:
    run_dir: Path
    state: str  # completed | pruned (diverged) | failed
    reason: str
    metrics: dict[str, float]
    epochs: int
    resumed_after: int  # epochs already done when this invocation started (0: fresh)


def load_run_config(path: str | Path, overrides: list[str] | None = None) -> dict[str, Any]:
    """Read and check an exported config; raise UserError with one line per problem."""
    where = str(path)
    file = Path(path)
    doc = load_limited(where)  # within a spec's limits: size, nesting, aliases, duplicate keys
    if not isinstance(doc, dict):
        raise UserError(f"{where}: expected an exported training config (a mapping with objective: and config:)")
    if "space" in doc and "config" not in doc:
        raise UserError(f"{where}: this is a search spec, not a training config; run `hpsearch export {where} -o best.yaml` first")
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        raise UserError(f"{where}: missing {', '.join(missing)} (is it a file written by `hpsearch export`?)")
    if not isinstance(doc["config"], dict):
        raise UserError(f"{where}: config: expected a mapping of config keys, got {type(doc['config']).__name__}")
    doc["metric"] = [doc["metric"]] if isinstance(doc["metric"], str) else list(doc["metric"])
    doc["objective"] = anchored(str(doc["objective"]), file.resolve().parent)
    if isinstance(doc.get("output"), str):  # relative to this file, as the objective is
        doc["output"] = os.path.normpath(file.resolve().parent / doc["output"])
    doc["config"] = apply_config_overrides(doc["config"], overrides or [], where)
    if overrides:
        doc.setdefault("provenance", {})["train_overrides"] = list(overrides)
    check_config(doc, where)
    return doc


def set_processes(doc: dict[str, Any], where: str, processes: int | None, devices: int | None) -> None:
    """``--processes N`` / ``--devices N``: train data-parallel with N ranks (config ``processes``).

    The batch per rank stays ``batch_size``, so the effective batch grows N times (README: Data-parallel training)."""
    if devices is not None:
        import torch

        visible = torch.cuda.device_count()
        if visible < devices:
            raise UserError(f"{where}: --devices {devices}: {visible} CUDA GPU(s) visible; on CPU use --processes {devices}")
        device = str(doc["config"].get("device", "auto"))
        if device not in ("auto", "cuda"):  # each rank takes its own GPU: cuda:N or cpu would put them all on one device
            raise UserError(f"{where}: --devices {devices}: config device is {device}; set device: auto (or use --processes on CPU)")
    ranks = devices or processes
    if ranks is not None:
        doc["config"]["processes"] = ranks
        doc.setdefault("provenance", {})["train_processes"] = ranks


def anchored(entry: str, base_dir: Path) -> str:
    """A relative ``file.py:fn`` in an exported config is relative to that file, not to the current folder."""
    module, _, fn = entry.rpartition(":")
    if module.endswith(".py") and not Path(module).is_absolute() and (base_dir / module).is_file():
        return f"{base_dir / module}:{fn}"
    return entry


def read_history(run_dir: Path) -> list[dict[str, float]]:
    """Per-epoch metrics across restarts; an epoch reported twice (killed before its checkpoint) keeps the later line."""
    file = run_dir / "history.jsonl"
    if not file.exists():
        return []
    by_epoch: dict[int, dict[str, float]] = {}
    for line in file.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
        by_epoch[int(row["epoch"])] = row
    return [by_epoch[e] for e in sorted(by_epoch)]


def prepare_run_dir(run_dir: Path, doc: dict[str, Any], fresh: bool) -> int:
    """Start, or check that a restart runs the same config; return the epochs already done."""
    if fresh:
        for name in RUN_FILES:
            (run_dir / name).unlink(missing_ok=True)
        for events in run_dir.glob("events.out.tfevents.*"):
            events.unlink()
    saved = run_dir / "config.yaml"
    if saved.exists():
        before = yaml.safe_load(saved.read_text(encoding="utf-8")) or {}
        if (run_dir / "metrics.json").exists():
            raise UserError(f"{run_dir} holds a finished run (metrics.json); pass --fresh to train again, or -o another folder")
        old, new = before.get("config") or {}, doc["config"]
        changed = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        if before.get("objective") != doc["objective"]:
            changed.insert(0, "objective")
        if changed:
            raise UserError(
                f"{run_dir} holds a run of another config (differs in {', '.join(changed)}); "
                "pass --fresh to replace it, or -o another folder"
            )
        history = read_history(run_dir)
        if not (run_dir / "checkpoint.pt").exists() or not history:
            return 0  # killed before its first checkpoint: nothing to resume
        return int(history[-1]["epoch"])  # the last epoch logged; its checkpoint may be one behind if killed in between
    run_dir.mkdir(parents=True, exist_ok=True)
    saved.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return 0


def train(doc: dict[str, Any], run_dir: Path, fresh: bool = False, quiet: bool = False, stream: Any = None) -> TrainResult:
    """Run the objective on the config without pruning; resume from ``run_dir/checkpoint.pt`` when there is one."""
    from hpsearch.trial.command.options import describe
    from hpsearch.trial.objective import FINAL_KEY, load_objective
    from hpsearch.trial.reporter import Reporter
    from hpsearch.trial.run import COMPLETE, run_trial

    stream = stream or sys.stdout
    done = prepare_run_dir(run_dir, doc, fresh)
    epochs = doc["config"].get("epochs", "?")

    def say(text: str) -> None:
        print(text, file=stream, flush=True)

    say(
        f"resuming {run_dir} from its checkpoint ({done} of {epochs} epochs done)"
        if done
        else f"training {describe(doc['objective'])} for {epochs} epochs in {run_dir}"
    )
    history_file = run_dir / "history.jsonl"

    def on_epoch(epoch: int, metrics: dict[str, float]) -> None:
        with history_file.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"epoch": epoch, **metrics}) + "\n")
        if not quiet:
            say(f"epoch {epoch}/{epochs}: " + " ".join(f"{k}={fmt(v)}" for k, v in metrics.items()))

    reporter = Reporter(trial_dir=run_dir, prune_hook=None, on_epoch=on_epoch, checkpoint_path=run_dir / "checkpoint.pt")
    objective = load_objective(doc["objective"])
    # FINAL_KEY tells the objective it is the final run (a command sees HPSEARCH_FINAL=1).
    outcome = run_trial(objective, {**doc["config"], FINAL_KEY: True}, reporter, doc["metric"])
    reporter.close(hparams=doc["config"], final=outcome.metrics)
    history = read_history(run_dir)
    total = int(history[-1]["epoch"]) if history else outcome.epochs
    if outcome.state == COMPLETE:
        (run_dir / "metrics.json").write_text(json.dumps(outcome.metrics, indent=2) + "\n", encoding="utf-8")
    return TrainResult(run_dir, outcome.state, outcome.reason, outcome.metrics, total, done)
