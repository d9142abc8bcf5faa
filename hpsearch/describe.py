"""Human-readable view of a spec: settings, the space as a tree, a few sampled configs."""

from __future__ import annotations

from typing import Any

from hpsearch.space import Choice, Const, Float, Int, Param, Space
from hpsearch.spec import Spec
from hpsearch.storage import redact


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


def describe_spec(spec: Spec, samples: int = 3) -> str:
    from hpsearch.registry import sampler_name

    budget = f"{spec.budget.trials} trials" + (f", timeout {spec.budget.timeout:g}s" if spec.budget.timeout else "")
    metrics = ", ".join(f"{m} ({d})" for m, d in zip(spec.metrics, spec.directions))
    lines = [
        f"{spec.path}: valid",
        f"study {spec.study}: objective {spec.objective}; metric {metrics}",
        f"budget {budget}; sampler {sampler_name(spec)}; pruner {spec.pruner.name}; backend {spec.backend}",
        f"storage {redact(spec.storage_url)}; output {spec.study_dir}",
        f"fixed: {spec.fixed}",
        "space:",
        *describe_space(spec.tree),
    ]
    if spec.warm_start:
        lines.append(f"warm starts: {len(spec.warm_start)} configs evaluated first")
    for i, config in enumerate(sample_configs(spec, samples)):
        lines.append(f"sample {i + 1}: {config}")
    return "\n".join(lines)
