"""hpsearch: hyperparameter search for PyTorch training.

In a notebook::

    import hpsearch
    study, df = hpsearch.load("spaces/quickstart.yaml")
    df.sort_values("value").head()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hpsearch.base.version import __version__

if TYPE_CHECKING:
    import optuna
    import pandas

__all__ = ["__version__", "load"]


def load(spec_path: str, storage: str | None = None, study: str | None = None) -> tuple[optuna.Study, pandas.DataFrame]:
    """The spec's study and one row per trial: number, state, value(s) under the metric names,
    params (``params_<name>``, conditional ones by path), reason, epochs, wall time and the
    flat config the objective got (``config_<key>``). ``storage``/``study`` override the spec's."""
    import pandas

    from hpsearch.reading.results import load_study
    from hpsearch.spec.loader import load_spec

    overrides = [f"{k}={v}" for k, v in (("storage", storage), ("study", study)) if v is not None]
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
