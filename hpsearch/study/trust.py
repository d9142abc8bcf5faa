"""The pruning trust gate as the study records it: its settings, kept beside the study when it
opens, and its table now, for ``hpsearch status``, the report and the audit."""

from __future__ import annotations

from typing import Any

import optuna

from hpsearch.search.trust import StepTrust, table

TRUST = "trust"  # study user attribute: {"threshold", "curves"} of the gate, or None without one


def record(study: optuna.Study, settings: dict[str, Any] | None) -> None:
    if study.user_attrs.get(TRUST, "unset") != settings:
        study.set_user_attr(TRUST, settings)


def rows(study: optuna.Study) -> list[StepTrust] | None:
    """The gate's verdict per step now; None when the study runs without one (or several metrics)."""
    settings = study.user_attrs.get(TRUST)
    if not isinstance(settings, dict) or len(study.directions) > 1:
        return None
    return table(study.get_trials(deepcopy=False), float(settings["threshold"]), int(settings["curves"]))


def line(study: optuna.Study, unit: str = "epoch") -> str | None:
    """One line: ``pruning trust: epoch 1: rank corr 0.21 (9 curves): not pruning; epoch 3: ...``."""
    found = rows(study)
    if found is None:
        return None
    if not found:
        settings = study.user_attrs[TRUST]
        return f"pruning trust: no completed curves yet: nothing is pruned until {settings['curves']} trials complete"
    return "pruning trust: " + "; ".join(r.text(unit) for r in changes(found))


def changes(found: list[StepTrust], most: int = 8) -> list[StepTrust]:
    """Iterations give hundreds of steps: the first, each change of verdict, the last (at most ``most``)."""
    if len(found) <= most:
        return found
    keep = [r for i, r in enumerate(found) if i in (0, len(found) - 1) or r.trusted != found[i - 1].trusted]
    return keep[: most - 1] + keep[-1:] if len(keep) > most else keep
