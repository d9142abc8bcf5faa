"""Human-readable view of a spec: settings, the space as a tree, a few sampled configs, and how
many sampled configs the objective's own ``validate`` hook would reject at run time."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpsearch.base.errors import SpecError
from hpsearch.search.space import Choice, Const, Float, Int, Param, Space
from hpsearch.spec.loader import Spec
from hpsearch.study.storage import outage_limit, redact, sqlite_path
from hpsearch.trial.command.options import PREFIX, WORK, describe, from_entry
from hpsearch.trial.objective import load_objective

SHOWN = 3  # sampled configs printed; the rest are only checked
NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.])")  # 3, 0.25, 1e-05; not the 18 of resnet18


def describe_param(param: Param) -> str:
    if isinstance(param, Float | Int):
        kind = "float" if isinstance(param, Float) else "int"
        scale = " log" if param.log else (f" step {param.step}" if param.step and param.step != 1 else "")
        return f"{kind} [{param.low}, {param.high}]{scale}"
    if isinstance(param, Choice):
        return f"choice {list(param.options)}"
    assert isinstance(param, Const)
    return f"= {param.value!r}"


def describe_space(space: Space, indent: str = "  ") -> list[str]:
    lines = []
    for name, param in space.params.items():
        lines.append(f"{indent}{name}: {describe_param(param)}")
        if isinstance(param, Choice):
            for option, branch in param.branches.items():
                if branch.params:
                    lines.append(f"{indent}  when {name}={option}:")
                    lines.extend(describe_space(branch, indent + "    "))
    return lines


def sample_configs(spec: Spec, n: int) -> list[dict[str, Any]]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=spec.sampler.seed or 0))
    return [spec.config_for(spec.tree.suggest(study.ask())) for _ in range(n)]


@dataclass
class Check:
    """What the objective's ``validate(config)`` says about ``sampled`` configs drawn from the space."""

    sampled: int
    hooked: bool = False  # the objective has a validate hook (without one nothing is checked)
    rejected: int = 0
    reasons: Counter[str] = field(default_factory=Counter)  # problem with its numbers masked -> configs
    example: dict[str, str] = field(default_factory=dict)  # masked problem -> the first message as given

    def lines(self) -> list[str]:
        return [
            f"{n} of {self.sampled}: {self.example[why]}" + (f" (and {n - 1} more like it)" if n > 1 else "")
            for why, n in self.reasons.most_common()
        ]


def check_samples(spec: Spec, configs: list[dict[str, Any]]) -> Check:
    """Run the objective's validate hook, if it has one, on each config; group the problems by wording."""
    check = Check(len(configs))
    validate = getattr(load_objective(spec.objective, spec.base_dir), "validate", None)
    if validate is None:
        return check
    check.hooked = True
    for config in configs:
        problems = list(validate(config) or [])
        check.rejected += bool(problems)
        for problem in dict.fromkeys(problems):
            key = NUMBER.sub("…", problem)
            check.reasons[key] += 1
            check.example.setdefault(key, problem)
    return check


def validate_spec(spec: Spec, samples: int = 20) -> str:
    """``hpsearch validate``: the description, or SpecError when every sampled config would be rejected."""
    configs = sample_configs(spec, samples)
    check = check_samples(spec, configs)
    if check.sampled and check.rejected == check.sampled:
        raise SpecError(
            [
                f"{spec.path}: all {check.sampled} sampled configs would be rejected by objective {spec.objective}: {line}"
                for line in check.lines()
            ]
        )
    return describe_spec(spec, configs[:SHOWN], check)


def outage_text(spec: Spec) -> str:
    """How long a server storage's outage is ridden out (a SQLite file has none)."""
    if sqlite_path(spec.storage_url) is not None:
        return ""
    limit, source = outage_limit(spec.storage.outage_s)
    return f" (outages ridden out for up to {limit:g} s: {source})"


def describe_spec(spec: Spec, configs: list[dict[str, Any]] | int = SHOWN, check: Check | None = None) -> str:
    from hpsearch.spec.defaults import resolve
    from hpsearch.spec.registry import pruner_name, sampler_name

    budget = f"{spec.budget.trials} trials" + (f", timeout {spec.budget.timeout:g}s" if spec.budget.timeout else "")
    metrics = ", ".join(f"{m} ({d})" for m, d in zip(spec.metrics, spec.directions, strict=True))
    if isinstance(configs, int):
        configs = sample_configs(spec, configs)
    verdict = "valid"
    if check is not None and check.rejected:
        verdict = f"valid, but {check.rejected} of {check.sampled} sampled configs would be rejected by the objective"
    lines = [
        f"{spec.path}: {verdict}",
        f"study {spec.study}: objective {describe(spec.objective)}; metric {metrics}",
        f"budget {budget}; sampler {sampler_name(spec)}; pruner {pruner_name(spec)}; backend {spec.backend}",
        *(f"default {r.key}: {r.value} ({r.why})" for r in resolve(spec) if r.why != "set in the spec"),
        f"storage {redact(spec.storage_url)}{outage_text(spec)}; output {spec.study_dir}",
        f"fixed: {spec.fixed}",
        "space:",
        *describe_space(spec.tree),
    ]
    if spec.warm_start.configs:
        lines.append(f"warm starts: {len(spec.warm_start.configs)} configs evaluated first")
    if spec.warm_start.study is not None and spec.warm_storage_url is not None:
        top = f", its best {spec.warm_start.top} re-evaluated first" if spec.warm_start.top else ""
        lines.append(
            f"warm start: imports the finished trials of study {spec.warm_start.study} in {redact(spec.warm_storage_url)}{top};"
            f" they inform the sampler until {spec.warm_until} of this study's own trials finished"
        )
    for i, config in enumerate(configs):
        lines.append(f"sample {i + 1}: {config}")
    if spec.objective.startswith(PREFIX) and configs:
        lines += command_lines(spec, configs[0])
    if check is not None and check.rejected:
        lines.append(f"{check.rejected} of {check.sampled} sampled configs would fail at run time; the objective says:")
        lines += [f"  {line}" for line in check.lines()]
        lines.append("narrow the space (or change fixed:) so that these cannot be drawn")
    elif check is not None and check.hooked:
        lines.append(f"checked {check.sampled} sampled configs with the objective's validate hook: none rejected")
    return "\n".join(lines)


def command_lines(spec: Spec, config: dict[str, Any]) -> list[str]:
    """A command objective: sample 1's exact command line, the folder a trial runs in, and a
    warning when parallel trials would share the folder their metrics are read from."""
    import shlex

    from hpsearch.trial.command import trial_argv

    command = from_entry(spec.objective)
    argv = trial_argv(command, config, {})  # $HPSEARCH_* stay as written: each trial gets its own
    if command.workdir == "trial":
        where = (
            f"workdir: each trial runs in its own folder, {spec.study_dir}/trial-<n>/{WORK} (relative paths in the command: {command.cwd})"
        )
    else:
        where = f"workdir: every trial runs in {command.cwd} (the spec's folder)"
    lines = [f"argv of sample 1: {shlex.join(argv)}", where]
    if command.config_file is not None:
        import json

        from hpsearch.trial.command.config_file import merged

        values = json.dumps(merged({}, config, command.flags))
        lines.append(f"config file of sample 1: $HPSEARCH_CONFIG_FILE, the trial's copy of {command.config_file} with {values}")
    parallel = (spec.resources.workers or 1) > 1 or spec.backend == "ray"
    if command.logs and command.workdir == "spec" and not Path(command.logs).is_absolute() and parallel:
        lines.append(
            f"warning: parallel trials would all write {command.logs} in {command.cwd} and read each other's runs: "
            "set objective.workdir: trial"
        )
    return lines
