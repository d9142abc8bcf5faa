"""YAML spec -> typed ``Spec``. Every problem is collected and raised once, naming file and key.

Validation order: YAML syntax, then the schema (types, unknown keys with a did-you-mean,
ranges), then the space tree, then cross-field checks, then the objective (importable,
and its own ``validate`` on one config per choice option). Nothing touches storage.
The YAML limits are spec/safe_yaml.py's, ``--set`` is spec/overrides.py's.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from hpsearch.base.cores import cpu_cores
from hpsearch.base.errors import SpecError
from hpsearch.base.text import did_you_mean
from hpsearch.search.space import Const, Space, parse_space
from hpsearch.spec.defaults import TRUST_CURVES, TRUST_THRESHOLD
from hpsearch.spec.overrides import apply_overrides, from_cwd
from hpsearch.spec.plugins import check_plugins, class_kwargs, plugin_name
from hpsearch.spec.registry import BACKENDS, PRUNERS, RAY_SCHEDULERS, SAMPLERS, sampler_name
from hpsearch.spec.safe_yaml import read_yaml
from hpsearch.spec.schema_errors import schema_errors
from hpsearch.trial.objective import BUILTIN, load_objective

Direction = Literal["maximize", "minimize"]
if TYPE_CHECKING:  # the registries' keys are known only at run time: a type checker sees a str
    BackendName: TypeAlias = str
    SchedulerName: TypeAlias = str
else:  # pydantic checks the name against the registry (and the error lists the names)
    BackendName = Literal[tuple(BACKENDS)]
    SchedulerName = Literal[tuple(RAY_SCHEDULERS)]


class Section(BaseModel):
    # strict: `trials: true` is not 1 and `workers: "2"` is not 2 (a float field still takes an int)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Budget(Section):
    trials: int = Field(20, ge=1)  # finished trials (completed + pruned) the study aims for, across resumes
    timeout: float | None = Field(None, gt=0)  # seconds of wall time for this invocation
    max_failures: int | None = Field(5, ge=1)  # stop after this many failed trials in a row (null: never)


class SamplerSpec(Section):
    name: str | None = None  # a registry name (default auto: chosen by the space's shape and the budget) or 'package.module:Class'
    seed: int | None = Field(None, ge=0, le=2**32 - 1)  # NumPy's (and so Optuna's) seed range
    startup_trials: int | None = Field(None, ge=0)  # random trials before the model kicks in (tpe, gp, cmaes)
    population_size: int | None = Field(None, ge=2)  # nsga2
    kwargs: dict[str, Any] = {}  # a class's keyword arguments: the other keys beside its name

    @model_validator(mode="before")
    @classmethod
    def _kwargs(cls, value: Any) -> Any:
        return class_kwargs(value, ("name", "seed"))

    @field_validator("name")
    @classmethod
    def _known(cls, value: str | None) -> str | None:
        return plugin_name(value, SAMPLERS)


class PrunerSpec(Section):
    name: str | None = None  # a registry name (default: by the budget, spec/defaults.py) or 'package.module:Class'
    warmup_epochs: int | None = Field(None, ge=0)  # epochs a trial always runs before it may be pruned (unset: spec/defaults.py)
    startup_trials: int = Field(5, ge=0)  # trials that finish unpruned before pruning starts (median, percentile)
    interval_epochs: int = Field(1, ge=1)
    percentile: float = Field(25.0, gt=0, lt=100)  # percentile pruner: keep trials above this percentile
    reduction_factor: int | None = Field(None, ge=2)  # successive_halving (4), hyperband (3)
    max_epochs: int | None = Field(None, ge=1)  # hyperband's max resource; defaults to fixed.epochs
    # rank correlation with the final value an epoch needs before any trial is pruned there (null: no gate)
    trust: float | None = Field(TRUST_THRESHOLD, ge=-1, le=1)
    trust_curves: int = Field(TRUST_CURVES, ge=2)  # completed trials needed to measure it; fewer: nothing is pruned
    kwargs: dict[str, Any] = {}  # a class's keyword arguments: the other keys beside its name

    @model_validator(mode="before")
    @classmethod
    def _kwargs(cls, value: Any) -> Any:
        return class_kwargs(value, ("name", "trust", "trust_curves"))

    @field_validator("name")
    @classmethod
    def _known(cls, value: str | None) -> str | None:
        return plugin_name(value, PRUNERS)


class Resources(Section):
    # Trial slots run at once on this machine; null: one per GPU share (GPUs x trials_per_gpu), or 1 without GPUs.
    workers: int | None = Field(None, ge=1)
    gpus_per_trial: float = Field(1, ge=0)  # devices per trial: 1, 2, ... or a share (0.5 = two trials per GPU); 0 = CPU only
    trials_per_gpu: int | Literal["auto"] = 1  # slots sharing one device (same as gpus_per_trial: 1/k); auto: by measured memory
    gpus: list[int] | None = None  # device indices to use; default all visible
    cpus_per_trial: float | None = Field(None, gt=0)  # threads per trial (Ray: CPUs); default cores // slots
    memory_margin: float = Field(0.15, ge=0, lt=1)  # trials_per_gpu: auto: share of a GPU's free memory left unused
    trials_per_gpu_max: int = Field(4, ge=1)  # trials_per_gpu: auto: most slots on one GPU

    @property
    def per_gpu(self) -> int:
        """Slots per GPU at the start: trials_per_gpu, or 1 with auto (packing.py adds more once peaks are measured)."""
        return 1 if self.trials_per_gpu == "auto" else self.trials_per_gpu

    @field_validator("gpus_per_trial")
    @classmethod
    def _whole_or_share(cls, value: float) -> float:
        if value > 1 and not float(value).is_integer():
            raise ValueError("must be a whole number of GPUs (1, 2, ...) or a share below 1 (0.5, 0.25)")
        return value

    @field_validator("trials_per_gpu", mode="before")
    @classmethod
    def _count_or_auto(cls, value: Any) -> Any:
        if value == "auto" or (isinstance(value, int) and value >= 1):  # a bool is an int: true stays 1, as before auto
            return value
        if isinstance(value, float) and value.is_integer() and value >= 1:
            return int(value)
        hint = "; did you mean 'auto'?" if isinstance(value, str) and difflib.get_close_matches(value.lower(), ["auto"]) else ""
        raise ValueError(f"must be a whole number of trials >= 1 or auto, got {value!r}{hint}")

    @field_validator("trials_per_gpu")
    @classmethod
    def _one_way_to_share(cls, value: int | str, info: ValidationInfo) -> int | str:
        share = info.data.get("gpus_per_trial", 1)
        if value != 1 and 0 < share < 1:
            raise ValueError("set either trials_per_gpu or gpus_per_trial (a share like 0.5), not both")
        if value == "auto" and share > 1:
            raise ValueError(f"auto packs one-GPU trials by memory; it needs gpus_per_trial: 1, got gpus_per_trial={share:g}")
        return value

    @field_validator("gpus")
    @classmethod
    def _indices(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and (not value or min(value) < 0 or len(set(value)) != len(value)):
            raise ValueError("must be distinct device indices >= 0, e.g. [0, 2, 3]")
        return value


DEFAULT_WARM_UNTIL = 10  # WarmSampler's own default (a spec resolves warm_start.until from its start-up trials)


class WarmStart(Section):
    """``warm_start:`` as a mapping: learn from an earlier study (a list is the ``configs`` alone)."""

    study: str | None = Field(None, min_length=1)  # earlier study whose finished trials are imported when this study is created
    storage: str | None = None  # where it is; default: this spec's storage:, else <output>/<study>/study.db
    top: int = Field(0, ge=0)  # also re-evaluate its best K configs first (they count toward the budget)
    until: int | None = Field(None, ge=1)  # own trials (completed or pruned) after which imported ones stop informing the sampler
    configs: list[dict[str, Any]] = []  # configs evaluated first (they count toward the budget)


class StorageSpec(Section):
    """``storage:`` as a mapping; a plain URL is the ``url`` alone."""

    url: str | None = None  # default sqlite:///<output>/<study>/study.db; postgresql://USER:PW@HOST/DB for many machines
    # seconds a process waits out an unreachable PostgreSQL server before it stops; HPSEARCH_OUTAGE_S, when set, overrides it
    outage_s: float = Field(120.0, ge=0, allow_inf_nan=False)


class RaySpec(Section):
    address: str | None = None  # "auto" or HOST:PORT joins a running cluster; unset starts a local one
    scheduler: SchedulerName = "asha"  # grace: pruner.warmup_epochs, rate: pruner.reduction_factor
    perturbation_interval: int = Field(2, ge=1)  # pbt: epochs between exploit/explore steps


class Spec(Section):
    study: str = Field(..., min_length=1)
    objective: str = BUILTIN
    metric: str | list[str] = "val_acc"
    direction: Direction | list[Direction] = "maximize"
    budget: Budget = Budget()
    sampler: SamplerSpec = SamplerSpec()
    pruner: PrunerSpec = PrunerSpec()
    storage: StorageSpec = StorageSpec()  # a URL, or {url: URL, outage_s: SECONDS}
    output: str = "runs"
    backend: BackendName = "optuna"
    resources: Resources = Resources()
    ray: RaySpec = RaySpec()
    fixed: dict[str, Any] = {}
    space: dict[str, Any] = {}
    warm_start: WarmStart = WarmStart()  # a list is read as {configs: LIST}
    description: str | None = None

    # Filled by load_spec, not by the user.
    _path: str = PrivateAttr("")
    _tree: Space = PrivateAttr(default_factory=Space)
    _threads_cap: int | None = PrivateAttr(None)  # a slot process's share of the cores (slots.spec_from_env)

    @property
    def path(self) -> str:
        return self._path

    @property
    def tree(self) -> Space:
        return self._tree

    @field_validator("study")
    @classmethod
    def _study_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", value):
            raise ValueError(f"must be letters, digits, '.', '_' or '-', got {value!r}")
        return value

    @field_validator("sampler", "pruner", mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @field_validator("storage", mode="before")
    @classmethod
    def _url_alone(cls, value: Any) -> Any:
        if value is None or isinstance(value, str):
            return {"url": value}
        if not isinstance(value, dict):
            raise ValueError(f"must be a URL or a mapping {{url: URL, outage_s: SECONDS}}, got {value!r}")
        return value

    @field_validator("warm_start", mode="before")
    @classmethod
    def _config_list(cls, value: Any) -> Any:
        return {"configs": value} if isinstance(value, list) else value

    @property
    def metrics(self) -> list[str]:
        return [self.metric] if isinstance(self.metric, str) else list(self.metric)

    @property
    def directions(self) -> list[Direction]:
        return [self.direction] if isinstance(self.direction, str) else list(self.direction)

    # Paths: a relative output:, sqlite:/// storage or objective file in the spec is relative to the
    # spec's folder, so the spec finds its study from any folder; load_spec has made paths given
    # as flags (--output, --storage, --set) absolute against the current folder.
    @property
    def study_dir(self) -> Path:
        return Path(os.path.normpath(self.base_dir / self.output)) / self.study

    @property
    def storage_url(self) -> str:
        url = self.storage.url
        if url is None:
            return f"sqlite:///{self.study_dir / 'study.db'}"
        path = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else None
        if path and not Path(path).is_absolute():
            return f"sqlite:///{os.path.normpath(self.base_dir / path)}"
        return url

    @property
    def warm_until(self) -> int:
        """Own finished trials (completed or pruned) after which imported ones stop informing the
        sampler (``warm_start.until``): by default as many as the sampler's random start-up, which
        the imported trials stand in for (at least 1: with no start-up they would inform nothing)."""
        if self.warm_start.until is not None:
            return self.warm_start.until
        from hpsearch.spec.defaults import startup_trials

        n: int = startup_trials(self).value
        return max(1, n)

    @property
    def warm_storage_url(self) -> str | None:
        """Where ``warm_start.study`` is: its ``storage:`` (a relative sqlite path is relative to the
        spec's folder), else this spec's ``storage:``, else where this spec would keep a study of that
        name by default (``<output>/<study>/study.db``)."""
        source = self.warm_start
        if source.study is None:
            return None
        if source.storage is not None:
            return self.model_copy(update={"storage": StorageSpec(url=source.storage)}).storage_url
        if self.storage.url is not None:
            return self.storage_url
        return f"sqlite:///{Path(os.path.normpath(self.base_dir / self.output)) / source.study / 'study.db'}"

    @property
    def base_dir(self) -> Path:
        """The spec's folder (absolute): what its relative paths are relative to."""
        return Path(os.path.abspath(self.path)).parent if self.path else Path.cwd()

    def config_for(self, sampled: dict[str, Any]) -> dict[str, Any]:
        """The trial's config: fixed values, overridden by what was sampled. A ``threads`` above a
        slot's share of the cores is lowered to it: more would only make the slots take turns.
        ``gpus_per_trial: N`` (N >= 2) sets ``processes: N`` unless the spec sets it (hpsearch/trial/ranks.py)."""
        config = {**self.fixed, **sampled}
        if self.resources.gpus_per_trial >= 2 and "processes" not in config:  # N GPUs per trial: N data-parallel ranks
            config["processes"] = int(self.resources.gpus_per_trial)
        threads, cap = config.get("threads"), self._threads_cap
        if cap and isinstance(threads, int) and not isinstance(threads, bool) and threads > cap:
            config["threads"] = cap
        return config


def load_spec(path: str | Path, overrides: list[str] | tuple[str, ...] = (), check_objective: bool = True, prepare: bool = False) -> Spec:
    """Read, override (``key.path=value``), validate. Raises SpecError with every problem.

    ``prepare``: also run the objective's ``prepare`` hook (a study is about to start: e.g. download
    the dataset now, so that a failure is one line instead of a failed trial per config)."""
    where = str(path)
    raw = read_yaml(where)
    if isinstance(raw.get("storage"), str):  # `storage: URL` is {url: URL}, so --storage and --set storage.outage_s=S edit one key
        raw["storage"] = {"url": raw["storage"]}
    raw = apply_overrides(raw, overrides, where)
    from_cwd(raw, {item.partition("=")[0].strip() for item in overrides})
    errors: list[str] = []
    raw.setdefault("study", Path(where).stem)
    command_entry(raw, Path(os.path.abspath(where)).parent, errors)
    spec = validate_schema(raw, errors)
    tree = parse_space(raw.get("space"), "space", errors) if isinstance(raw.get("space", {}), dict) else Space()
    if spec is not None:
        spec._path, spec._tree = where, tree
        check_consistency(spec, errors)
        if check_objective and not errors:
            check_objective_entry(spec, errors, prepare)
    if errors or spec is None:
        raise SpecError([f"{where}: {e}" for e in errors])
    return spec


def command_entry(raw: dict[str, Any], base_dir: Path, errors: list[str]) -> None:
    """``objective: {command: ...}`` becomes the entry string every layer above stores and ships."""
    if not isinstance(raw.get("objective"), dict):
        return
    from hpsearch.trial.command.options import parse_mapping

    entry, problems = parse_mapping(raw["objective"], base_dir)
    errors.extend(problems)
    raw["objective"] = entry if entry is not None else BUILTIN


def validate_schema(raw: dict[str, Any], errors: list[str]) -> Spec | None:
    try:
        return Spec.model_validate(raw)
    except ValidationError as exc:
        errors.extend(schema_errors(exc, Spec))
        return None


MAX_WORKERS_PER_CORE = 16  # trial slots per core before `workers` is refused (GPU slots wait on the GPU, not a core)


def not_plain(value: Any) -> str | None:
    """Why a value cannot travel as a trial's JSON config (None when it can)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value!r} is not a finite number"
    if isinstance(value, (bytes, set, frozenset, tuple)) or not isinstance(value, (str, int, float, bool, list, dict, type(None))):
        return f"a {type(value).__name__} ({str(value)[:40]!r}) is not plain data"
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for _, item in items:
        if problem := not_plain(item):
            return problem
    return None


def check_consistency(spec: Spec, errors: list[str]) -> None:
    if len(spec.metrics) != len(spec.directions):
        errors.append(f"direction: {len(spec.metrics)} metric(s) {spec.metrics} but {len(spec.directions)} direction(s)")
    if len(set(spec.metrics)) != len(spec.metrics):
        errors.append(f"metric: names repeat: {spec.metrics}")
    tree: Space = spec.tree
    if not any(not isinstance(p, Const) for _, p in tree.parameters()) and not any(e.startswith("space") for e in errors):
        errors.append(
            f"space: nothing to search (no range or choice): all {spec.budget.trials} trials would run the same config; "
            "add parameters under space:, or train one fixed config with `hpsearch train FILE` "
            "(FILE holds objective:, metric: and config:, as `hpsearch export` writes it)"
        )
    for key, value in spec.fixed.items():
        problem = not_plain(value)
        if problem:
            errors.append(f"fixed.{key}: {problem}; a trial's config is plain data (numbers, text, booleans, lists, mappings)")
    workers, most = spec.resources.workers, MAX_WORKERS_PER_CORE * cpu_cores()
    if workers is not None and workers > most:
        errors.append(
            f"resources.workers: {workers} trial slots on {cpu_cores()} cores; at most {most} here "
            f"({MAX_WORKERS_PER_CORE} per core): more only thrash the machine"
        )
    top = set(tree.params)
    for key in sorted(top & set(spec.fixed)):
        errors.append(f"fixed.{key}: also a parameter in space.{key}; keep it in one place")
    for path, _ in tree.parameters():
        key = path.rsplit(".", 1)[-1]
        if "." in path and key in top:
            errors.append(f"space.{path}: {key!r} is also a top-level parameter; a conditional parameter needs its own name")
    if spec.sampler.name == "grid" and tree.grid() is None:
        errors.append(
            "sampler.name: grid needs every parameter to be a choice, an int range or a stepped float, without conditional options"
        )
    if len(spec.metrics) > 1 and (spec.sampler.name == "bo" or spec.pruner.name == "model"):
        errors.append("sampler.name: bo and pruner model score one metric; with several, leave sampler and pruner unset (nsga2)")
    elif spec.pruner.name == "model" and sampler_name(spec) != "bo":
        errors.append(f"pruner.name: model asks sampler bo's model; the sampler is {sampler_name(spec)}: set sampler: bo")
    if spec.sampler.name != "nsga2" and spec.sampler.population_size is not None:
        errors.append(f"sampler.population_size: only nsga2 takes a population size, not {spec.sampler.name}")
    ranks = spec.fixed.get("processes")
    fixed_ranks = isinstance(ranks, int) and not isinstance(ranks, bool) and ranks > 1
    if spec.backend == "ray" and (spec.resources.gpus_per_trial > 1 or fixed_ranks or "processes" in tree.config_keys()):
        errors.append(
            "backend: ray runs a trial as one process; data-parallel trials (resources.gpus_per_trial > 1 or processes > 1) "
            "need backend: optuna (hpsearch/trial/ranks.py starts the ranks), or Ray Train's TorchTrainer inside your objective"
        )
    if spec.backend == "ray" and spec.resources.trials_per_gpu == "auto":
        errors.append(
            "resources.trials_per_gpu: auto packs the optuna backend's slots by measured GPU memory; Ray places trials "
            "by its own GPU shares: give backend ray a number, or gpus_per_trial: 0.25 (four trials per GPU)"
        )
    warm = spec.warm_start
    where = "warm_start.configs" if warm.study is not None or warm.top else "warm_start"
    for i, config in enumerate(warm.configs):
        unknown = sorted(set(config) - tree.config_keys() - set(spec.fixed))
        for key in unknown:
            errors.append(f"{where}[{i}].{key}: not a parameter of the space{did_you_mean(key, sorted(tree.config_keys()))}")
        if not unknown:
            try:
                tree.params_from_config(config)
            except KeyError as exc:
                errors.append(f"{where}[{i}]: missing a value for {exc.args[0]!r}")
    if warm.top and warm.study is None:
        errors.append(f"warm_start.top: re-evaluates the best {warm.top} trials of an earlier study: name it in warm_start.study")
    if warm.study is not None and warm.study == spec.study and warm.storage is None:
        errors.append(f"warm_start.study: {warm.study!r} is this study itself; name an earlier study")


def check_objective_entry(spec: Spec, errors: list[str], prepare: bool = False) -> None:
    check_plugins(spec, errors)
    if errors:
        return
    try:
        fn = load_objective(spec.objective, spec.base_dir)
    except ValueError as exc:
        errors.append(f"objective: {exc}")
        return
    fns = (getattr(fn, "validate", None), getattr(fn, "prepare", None) if prepare else None)
    hooks = [(fns[0], "rejects the config"), (fns[1], "cannot start")]
    seen: set[str] = set()
    for hook, verdict in hooks:
        if hook is None or errors:  # prepare (a download, say) only for configs that validate accepts
            continue
        for sampled in spec.tree.representative_configs():
            for problem in hook(spec.config_for(sampled)) or []:
                if problem not in seen:
                    seen.add(problem)
                    errors.append(f"objective {spec.objective} {verdict}: {problem}")
        if hook is fns[0] and not errors:
            check_range_ends(spec, hook, errors)


def check_range_ends(spec: Spec, validate: Any, errors: list[str]) -> None:
    """A range whose end the objective rejects with the spec's fixed values (warmup_epochs up to 5
    with fixed.epochs 1): one line naming the range and the problem, before trial 0, not trial by trial."""
    for path, end, value, sampled in spec.tree.range_ends():
        problems = validate(spec.config_for(sampled)) or []
        if problems:
            fixed = [f"fixed.{k}" for k in spec.fixed if k in problems[0]]
            also = f" (with {', '.join(fixed)} as the spec fixes it)" if fixed else ""
            errors.append(f"space.{path}: its {end} end {value!r} does not fit{also}: {problems[0]}")
