"""hpsearch: hyperparameter search for PyTorch training.

In a notebook::

    import hpsearch
    study, df = hpsearch.load("spaces/quickstart.yaml")
    df.sort_values("value").head()

    summary = hpsearch.run("spaces/quickstart.yaml", budget__trials=4)  # same as `hpsearch run`

In a training script run as a command objective (docs/your-code.md)::

    hpsearch.report(epoch, val_acc=acc, train_loss=loss)  # prints the JSON line hpsearch reads

``import hpsearch`` stays cheap (no torch, optuna or pandas): heavy imports happen inside the
functions. ``hpsearch.data`` holds the dataset helpers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpsearch.base.version import __version__

if TYPE_CHECKING:
    import optuna
    import pandas

    from hpsearch.spec.loader import Spec
    from hpsearch.study.summary import Summary

__all__ = ["__version__", "load", "report", "run"]


def report(epoch: int, **metrics: Any) -> None:
    """Print one JSON line ``{"epoch": N, "name": value, ...}`` on stdout (flushed), which a command
    objective reads as the epoch's report. Values: numbers, 0-d tensors or NumPy scalars.
    The last report is the trial's final metrics."""
    import json
    import sys

    line: dict[str, Any] = {"epoch": int(epoch)}
    for name, value in metrics.items():
        item = getattr(value, "item", None)
        line[name] = item() if callable(item) else value
    print(json.dumps(line), file=sys.stdout, flush=True)


def run(spec_or_path: str | Spec, *, quiet: bool = True, **overrides: Any) -> Summary:
    """Run the study as ``hpsearch run`` does and return its Summary (finished, pruned, failed, best).

    ``overrides`` are ``--set`` settings with ``__`` for the dots: ``budget__trials=4``,
    ``fixed__epochs=2``, ``output="/tmp/runs"``. Raises SpecError (one line per problem) for a bad spec."""
    import importlib
    import json
    from pathlib import Path

    from hpsearch.spec.loader import Spec, load_spec
    from hpsearch.spec.registry import BACKENDS
    from hpsearch.study.warmstart import check_warm_start

    if isinstance(spec_or_path, Spec):
        if overrides:
            raise ValueError("hpsearch.run: overrides need a spec path (a loaded Spec is used as it is)")
        spec = spec_or_path
    else:
        items = [f"{k.replace('__', '.')}={v if isinstance(v, str) else json.dumps(v)}" for k, v in overrides.items()]
        spec = load_spec(Path(spec_or_path), items, prepare=True)
    if spec.warm_start.study is not None:
        check_warm_start(spec)
    summary: Summary = importlib.import_module(BACKENDS[spec.backend].module).run(spec, quiet=quiet)
    return summary


def load(spec_path: str, storage: str | None = None, study: str | None = None) -> tuple[optuna.Study, pandas.DataFrame]:
    """The spec's study and one row per trial: number, state, value(s) under the metric names,
    params (``params_<name>``, conditional ones by path), reason, epochs, wall time and the
    flat config the objective got (``config_<key>``). ``storage``/``study`` override the spec's."""
    import pandas

    from hpsearch.reading.results import load_study
    from hpsearch.spec.loader import load_spec

    overrides = [f"{k}={v}" for k, v in (("storage.url", storage), ("study", study)) if v is not None]
    spec = load_spec(spec_path, overrides, check_objective=False)
    opened = load_study(spec)
    rows: list[dict[str, Any]] = []
    for t in opened.get_trials(deepcopy=False):
        row: dict[str, Any] = {"number": t.number, "state": t.state.name}
        for name, value in zip(spec.metrics, t.values or [None] * len(spec.metrics), strict=True):
            row[name] = value
        row["value"] = t.values[0] if t.values else None
        row.update({f"params_{k}": v for k, v in t.params.items()})
        row.update(reason=t.user_attrs.get("reason"), epochs=t.user_attrs.get("epochs"), wall_s=t.user_attrs.get("wall_s"))
        row.update({f"config_{k}": v for k, v in (t.user_attrs.get("config") or {}).items()})
        rows.append(row)
    return opened, pandas.DataFrame(rows)
