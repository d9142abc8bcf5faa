"""Every task and method of the search-quality harness, by name: what ``--tier``, ``--tasks``
and ``--methods`` of ``python -m bench.search_quality`` read.

Adding a method is one entry in ``METHODS``: a ``(task, budget, seed) -> Trace`` function
(methods.py's loop makes one from an Optuna sampler and pruner), or ``hpsearch(**spec keys)``
for hpsearch with some spec keys set. An entry whose settings follow the budget says so with
``plan``, so that the harness runs it once per distinct plan instead of once per budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from importlib.util import find_spec
from typing import Any

from bench.quality import methods as m
from bench.quality.live import LiveTask
from bench.quality.peers import dehb_search, smac_hb_search
from bench.quality.ray_methods import hpsearch_ray, ray_asha, ray_bohb
from bench.quality.table import TableTask
from bench.quality.tasks import MFH, Hartmann, Shaped, Task

TASKS: dict[str, Callable[[], Task]] = {
    **{name: partial(Hartmann, int(name[3]), name.split("_", 1)[1]) for name in MFH},
    "shaped": Shaped,
    "fashion_table": TableTask,
    "fashion_live": LiveTask,
}
TIERS = {"synthetic": [*MFH, "shaped"], "table": ["fashion_table"], "live": ["fashion_live"]}


@dataclass(frozen=True)
class Entry:
    run: m.Method
    # the method's settings from (task, budget), for one that plans with the budget: searches at
    # budgets with the same plan are one search (at 72 and 144 epochs hpsearch resolves the same
    # 3 start-up trials), read at each; None: one search at the largest budget, read at every one
    plan: Callable[[Task, int], Any] | None = None
    needs: tuple[str, ...] = ()  # packages it imports (found, not imported: ray and dask take seconds)


def hpsearch(noise_aware: bool = True, **keys: Any) -> Entry:
    """hpsearch with these spec keys set (none: its shipped defaults), built as ``hpsearch run`` builds them;
    scored on its noise-aware answer (``hpsearch best``), or with ``noise_aware=False`` on the best observed."""
    return Entry(partial(m.hpsearch_defaults, noise_aware=noise_aware, **keys), plan=partial(m.startup_plan, **keys))


METHODS: dict[str, Entry] = {
    "random": Entry(m.random_search),
    "sobol": Entry(m.sobol),
    "optuna_default": Entry(m.optuna_default),
    "tpe_hyperband": Entry(m.tpe_hyperband),
    "hpsearch": hpsearch(),
    "hpsearch_warm": Entry(m.hpsearch_warm, plan=m.warm_plan),
    # peers outside Optuna (make bench installs them)
    "dehb": Entry(dehb_search, needs=("dehb",)),
    "smac_hb": Entry(smac_hb_search, needs=("smac",)),
    "ray_asha": Entry(ray_asha, needs=("ray",)),
    "hpsearch_ray": Entry(hpsearch_ray, plan=m.startup_plan, needs=("ray",)),
    "ray_bohb": Entry(ray_bohb, needs=("ray", "hpbandster")),
    # calibration (bench/results/calibration/): the second and third attempts at the defaults, on
    # seeds below 200. hpsearch with spec keys set, then Optuna's defaults with one of hpsearch's
    # choices each: Optuna 5's TPE is already multivariate for one objective, so t3_group differs
    # from Optuna's defaults only by group=True; t3_univariate_w1 is independent TPE with
    # hpsearch's median setting (epoch 1 never pruned)
    "hp_median": hpsearch(pruner={"name": "median"}),
    "hp_median_w2": hpsearch(pruner={"name": "median", "warmup_epochs": 2, "startup_trials": 3}),
    "hp_hb_min2": hpsearch(pruner={"name": "hyperband", "warmup_epochs": 2}),
    "hp_median_k10": hpsearch(sampler={"startup_trials": 10}, pruner={"name": "median"}),
    "hp_hb_k10": hpsearch(sampler={"startup_trials": 10}, pruner={"name": "hyperband"}),
    "t3_group": Entry(m.tpe_median(multivariate=True, group=True)),
    # the fourth attempt (issue #38), a design rather than knobs: the sampler chosen by the space's
    # shape, the trust gate on every pruner, the noise-aware answer (calibration seeds 0-199)
    "hp_bo": hpsearch(sampler={"name": "bo"}),
    "hp_bo3": hpsearch(sampler={"name": "bo", "startup_trials": 3}),
    "hp_bo6": hpsearch(sampler={"name": "bo", "startup_trials": 6}),
    "hp_bo10": hpsearch(sampler={"name": "bo", "startup_trials": 10}),
    "hp_tpe_hb": hpsearch(sampler={"name": "tpe"}, pruner={"name": "hyperband"}),
    "hp_tpe_median": hpsearch(sampler={"name": "tpe"}, pruner={"name": "median"}),
    "hp_tpe_hb_ungated": hpsearch(sampler={"name": "tpe"}, pruner={"name": "hyperband", "trust": None}),
    "hp_tpe10_median": hpsearch(sampler={"name": "tpe", "startup_trials": 10}, pruner={"name": "median"}),
    "hp_tpe10_median_ungated": hpsearch(sampler={"name": "tpe", "startup_trials": 10}, pruner={"name": "median", "trust": None}),
    "hp_tpe10_median_raw": hpsearch(False, sampler={"name": "tpe", "startup_trials": 10}, pruner={"name": "median"}),
    "hp_tpe_median_raw": hpsearch(False, sampler={"name": "tpe"}, pruner={"name": "median"}),
    "t3_univariate_w1": Entry(m.tpe_median(2, multivariate=False, group=False)),
    # diagnosis of `shaped` at 72 epochs (bench/results/diagnosis/): t3_group with hpsearch's
    # median pruner start (epoch 1 never pruned)
    "t3_group_w1": Entry(m.tpe_median(2, multivariate=True, group=True)),
    "hp_w1": hpsearch(pruner={"warmup_epochs": 1}),  # before #38's follow-up: epoch 1 never pruned
}


def available() -> dict[str, Entry]:
    """The methods whose packages are installed."""
    return {name: e for name, e in METHODS.items() if all(find_spec(package) is not None for package in e.needs)}


def make_task(name: str) -> Task:
    if name not in TASKS:
        raise SystemExit(f"unknown task {name!r}; the tasks are {', '.join(TASKS)}")
    return TASKS[name]()
