"""Ray Tune backend: the same spec and objective, trials scheduled by Ray on a local or existing cluster.

Every Ray trial is an Optuna trial of the spec's own study, so ``best``, ``trials``,
``export``, ``report`` and optuna-dashboard read a Ray run exactly like an Optuna run.
Ray is optional and heavy: only this package imports it.

- ``driver``: ``run``, Tuner rounds until the budget is met;
- ``search``: the spec's sampler through OptunaSearch, the spec's Ray scheduler;
- ``recorder``: a Tune callback that writes every trial into the study, and the driver's stamp and beat;
- ``trial``: inside the Ray trial (reporter, outcome);
- ``cluster``: joining or starting Ray, resources per trial;
- ``leftovers``: the processes of a local Ray whose driver was killed, ended by the next run.
"""

from __future__ import annotations

from hpsearch.engine.ray.driver import run

__all__ = ["run"]
