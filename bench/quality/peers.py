"""Peers outside Optuna, driven through their own ask/tell: DEHB and SMAC3's Hyperband facade.

Both get the task's space as a ConfigSpace (conditional options as conditions), ask for a
(config, fidelity) pair, and are told the observed value at that fidelity. A job at fidelity f
trains from scratch for round(f) epochs and costs them (neither continues a lower-fidelity run);
a job at the full 6 epochs is a completed trial and may become the incumbent. registry.py
offers each only where its package is installed (``make bench`` installs them).
"""

from __future__ import annotations

import logging
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.quality.methods import Incumbent, Trace
from bench.quality.tasks import Task


def configspace(task: Task, seed: int) -> Any:
    """The task's hpsearch space as a ConfigSpace, parameters named by their hpsearch path."""
    from ConfigSpace import Categorical, ConfigurationSpace, EqualsCondition, Float, Integer

    from hpsearch.search.space import Choice, Const, parse_space
    from hpsearch.search.space import Float as HFloat
    from hpsearch.search.space import Int as HInt

    tree = parse_space(task.space, "space", [])
    cs = ConfigurationSpace(seed=seed)
    made: dict[str, Any] = {}
    conditions = []
    for path, p in tree.parameters():
        hp: Any
        if isinstance(p, Const):
            continue
        if isinstance(p, HFloat):
            hp = Float(path, (p.low, p.high), log=p.log)
        elif isinstance(p, HInt):
            hp = Integer(path, (p.low, p.high), log=p.log)
        elif isinstance(p, Choice):
            hp = Categorical(path, [str(o) for o in p.options])
        else:
            continue
        made[path] = hp
        cs.add(hp)
        parent, _, _ = path.rpartition(".")
        if parent:  # optimizer.sgd.lr: active when the choice at "optimizer" is "sgd"
            choice_path, _, option = parent.rpartition(".")
            conditions.append((path, choice_path, option))
    for child, choice_path, option in conditions:
        cs.add(EqualsCondition(made[child], made[choice_path], option))
    return tree, cs


def flat_config(tree: Any, values: dict[str, Any]) -> dict[str, Any]:
    """A ConfigSpace configuration (strings for choices) as hpsearch's flat config."""
    from hpsearch.search.space import Choice

    params = {}
    for path, p in tree.parameters():
        if path in values:
            v = values[path]
            if isinstance(p, Choice):
                v = next(o for o in p.options if str(o) == v)
            params[path] = v
    config: dict[str, Any] = tree.config_from_params(params)
    return config


def _run(task: Task, budget: int, seed: int, ask: Any, tell: Any) -> Trace:
    """The shared loop: ask (config, fidelity), spend its epochs, tell the observed value."""
    trace, best, spent, own = Trace(), Incumbent(task), 0, 0.0
    sign = -1.0 if task.direction == "maximize" else 1.0  # both peers minimise
    while spent < budget:
        t = time.perf_counter()
        config, epochs, token = ask()
        own += time.perf_counter() - t
        epochs = max(1, min(task.max_epochs, int(round(epochs))))
        if spent + epochs > budget:
            break  # cut off: it would end past the budget
        trace.trials += 1
        values = task.curve(config, epochs, seed * 100_003 + trace.trials)
        spent += epochs
        if epochs == task.max_epochs:
            best.offer(config, values[-1])
        else:
            trace.pruned_epochs += epochs  # a lower-fidelity job: spent on a run that stops early
        t = time.perf_counter()
        tell(token, sign * values[-1], epochs)
        own += time.perf_counter() - t
        trace.record(spent, best.true)
    trace.sampler_s = own
    return trace


def dehb_search(task: Task, budget: int, seed: int) -> Trace:
    from dehb import DEHB

    tree, cs = configspace(task, seed)
    logging.getLogger("distributed").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory() as out:
        # save_freq="end": the end is run()'s, which ask/tell never calls; "incumbent" (the default)
        # wrote history and incumbent files on each new incumbent, 1/3 of DEHB's time here
        fidelity = {"min_fidelity": 1, "max_fidelity": task.max_epochs}
        opt = DEHB(cs=cs, **fidelity, eta=3, n_workers=1, seed=seed, output_path=out, log_level="ERROR", save_freq="end")

        def ask() -> tuple[dict[str, Any], float, Any]:
            job = opt.ask()
            config = job["config"]
            values = dict(config) if hasattr(config, "keys") else dict(opt.vector_to_configspace(config))
            return flat_config(tree, values), job["fidelity"], job

        def tell(job: Any, loss: float, epochs: int) -> None:
            opt.tell(job, {"fitness": loss, "cost": float(epochs)})

        return _run(task, budget, seed, ask, tell)


def smac_hb_search(task: Task, budget: int, seed: int) -> Trace:
    from smac import HyperbandFacade, Scenario
    from smac.runhistory.dataclasses import TrialValue

    tree, cs = configspace(task, seed)
    with tempfile.TemporaryDirectory() as out:
        scenario = Scenario(
            cs, deterministic=True, n_trials=10_000, min_budget=1, max_budget=task.max_epochs, seed=seed, output_directory=Path(out)
        )
        intensifier = HyperbandFacade.get_intensifier(scenario, eta=3)
        smac = HyperbandFacade(scenario, lambda config, seed=0, budget=1: 0.0, intensifier=intensifier, overwrite=True, logging_level=40)

        def ask() -> tuple[dict[str, Any], float, Any]:
            info = smac.ask()
            return flat_config(tree, dict(info.config)), info.budget or task.max_epochs, info

        def tell(info: Any, loss: float, epochs: int) -> None:
            # save=False: no runhistory JSON rewritten after every tell (2/3 of SMAC's time here);
            # what SMAC does next does not depend on it
            smac.tell(info, TrialValue(cost=loss if math.isfinite(loss) else 1e9), save=False)

        return _run(task, budget, seed, ask, tell)
