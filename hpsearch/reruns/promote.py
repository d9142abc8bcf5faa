"""``hpsearch promote``: re-run the top K configs with other seeds and pick the one that holds up."""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpsearch.base.errors import UserError
from hpsearch.base.text import fmt
from hpsearch.spec.loader import Spec

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from hpsearch.study.rerun_queue import Run
from hpsearch.reading.export import apply_config_overrides, check_config, export_doc, portable_objective, write_export
from hpsearch.reading.results import directions, load_study, metric_names, ranked, short_name
from hpsearch.reruns.fixed import run_fixed, run_outcome

PROMOTE_SUFFIX = "-promote"  # promotion runs go into the study "<study>-promote", same storage


@dataclass
class Candidate:
    """One top config re-run with several seeds: the first metric per finished run, in ``seeds`` order."""

    trial: FrozenTrial
    config: dict[str, Any]
    seeds: list[int] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.values) if self.values else math.nan

    @property
    def std(self) -> float:
        """Sample standard deviation (n-1); 0 for a single run."""
        return statistics.stdev(self.values) if len(self.values) > 1 else 0.0


def top_configs(study: optuna.Study, k: int) -> list[FrozenTrial]:
    """The k best completed trials by the first metric, one per distinct config (the study's own:
    an imported trial's config ran in another setting)."""
    picked: list[FrozenTrial] = []
    seen: list[Any] = []
    for trial in ranked(study):
        config = trial.user_attrs.get("config")
        if config is None or config in seen or "imported_from" in trial.user_attrs:
            continue
        seen.append(config)
        picked.append(trial)
        if len(picked) == k:
            break
    return picked


def pick(candidates: list[Candidate], direction: str) -> Candidate:
    """Best mean; ties go to the lower spread, then to the better-ranked trial."""
    scored = [c for c in candidates if c.values]
    if not scored:
        raise UserError("promote: every re-run failed; " + (candidates[0].failures[0] if candidates and candidates[0].failures else ""))
    sign = -1.0 if direction == "maximize" else 1.0
    return min(scored, key=lambda c: (sign * c.mean, c.std))


def promote_table(candidates: list[Candidate], metric: str, winner: Candidate | None) -> tuple[list[str], list[list[Any]]]:
    params: list[str] = []
    for c in candidates:
        params += [short_name(k) for k in c.trial.params if short_name(k) not in params]
    head = ["trial", f"search {metric}", f"mean {metric}", "± std", "runs", *params, "per seed"]
    rows = []
    for c in candidates:
        mark = " *" if c is winner else ""
        shown = {short_name(k): v for k, v in c.trial.params.items()}
        per_seed = " ".join(f"{fmt(v)}" for v in c.values) + (f" ({len(c.failures)} failed)" if c.failures else "")
        rows.append(
            [
                f"{c.trial.number}{mark}",
                c.trial.values[0],
                c.mean if c.values else None,
                c.std if c.values else None,
                len(c.values),
                *(shown.get(p) for p in params),
                per_seed,
            ]
        )
    return head, rows


def promote_study(spec: Spec, study: optuna.Study) -> optuna.Study:
    """The study "<study>-promote" beside the searched one: every re-run is a trial the dashboard shows."""
    from hpsearch.study.rerun_queue import derived_study

    return derived_study(spec, study, PROMOTE_SUFFIX, "promote")


@dataclass
class Promotion:
    candidates: list[Candidate]
    winner: Candidate
    out: Path  # the exported config of the winner
    metric: str  # the metric the candidates are ranked by (the study's first)


def promote(
    spec: Spec,
    k: int,
    seeds: int,
    seed_base: int = 0,
    config_overrides: list[str] | None = None,
    out: Path | None = None,
    quiet: bool = False,
    stream: Any = None,
    queue_only: bool = False,
) -> Promotion | None:
    """Re-run the top ``k`` configs with ``seeds`` seeds each (config "seed" = seed_base + i) as queued
    trials of the study "<study>-promote", run by the engine (``spec.resources.workers`` slots, and any
    ``hpsearch worker`` that joins); export the config with the best mean to ``out``.
    ``queue_only``: queue the runs for workers and return None."""
    from hpsearch.study.rerun_queue import Run, finished

    stream = stream or sys.stdout
    study = load_study(spec)
    names = metric_names(study, spec)
    top = top_configs(study, k)
    if not top:
        raise UserError(f"study {study.study_name!r}: no completed trials yet")
    overrides = list(config_overrides or [])
    candidates = [
        Candidate(t, apply_config_overrides(t.user_attrs["config"], overrides, "promote", warn=i == 0)) for i, t in enumerate(top)
    ]
    entry = portable_objective(study.user_attrs.get("objective") or spec.objective, spec)
    for c in candidates:
        check_config({"objective": entry, "config": c.config}, f"promote: trial {c.trial.number}")
    pstudy = promote_study(spec, study)
    numbers = ", ".join(str(c.trial.number) for c in candidates)
    print(
        f"{study.study_name}: promoting the top {len(candidates)} configs by {names[0]} ({numbers}), {seeds} seeds each "
        f"({seed_base}..{seed_base + seeds - 1}); runs go to study {pstudy.study_name!r}",
        file=stream,
        flush=True,
    )
    runs = [(c, Run(c.trial, seed, {**c.config, "seed": seed})) for c in candidates for seed in range(seed_base, seed_base + seeds)]
    earlier = {id(r) for _, r in runs if finished(pstudy, r) is not None}
    for c, r in runs:
        if id(r) in earlier:
            print(f"trial {c.trial.number} seed {r.seed}: {run_line(pstudy, r, names[0], True)}", file=stream, flush=True)
    stopped = run_fixed(spec, pstudy, [r for _, r in runs], quiet, stream, queue_only)
    if queue_only:
        return None
    for c, r in runs:
        value, how = run_outcome(pstudy, r, names[0], id(r) in earlier)
        if value is None:
            c.failures.append(f"seed {r.seed}: {how}")
        else:
            c.seeds.append(int(r.seed or 0))
            c.values.append(value)
        if id(r) not in earlier:
            print(f"trial {c.trial.number} seed {r.seed}: {run_line(pstudy, r, names[0], False)}", file=stream, flush=True)
    if stopped:
        print(f"re-runs stopped early: {stopped}", file=stream, flush=True)
    winner = pick(candidates, directions(study)[0])
    out = out or spec.study_dir / "promoted.yaml"
    doc = export_doc(study, spec, winner.trial.number, overrides, warn=False)
    doc["provenance"]["promotion"] = {
        "metric": names[0],
        "seeds": winner.seeds,
        "values": winner.values,
        "mean": winner.mean,
        "std": winner.std,
        "runs_study": pstudy.study_name,
        "candidates": [
            {
                "trial": c.trial.number,
                "mean": c.mean if c.values else None,
                "std": c.std if c.values else None,
                "runs": len(c.values),
                "failed": len(c.failures),
            }
            for c in candidates
        ],
    }
    write_export(doc, out)
    return Promotion(candidates, winner, out, names[0])


def run_line(rstudy: optuna.Study, run: Run, metric: str, earlier: bool) -> str:
    value, how = run_outcome(rstudy, run, metric, earlier)
    return how if value is None else f"{metric}={fmt(value)} ({how})"
