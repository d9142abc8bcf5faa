"""Open the study both engines share: sampler and pruner from the registry, create or resume, label it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import optuna

from hpsearch.spec.registry import PRUNERS, SAMPLERS, build_plugin, is_import_path, pruner_name, sampler_name, trusted
from hpsearch.study.storage import (
    open_storage,
)
from hpsearch.study.trust import record

if TYPE_CHECKING:
    from hpsearch.spec.loader import Spec
from hpsearch.study.counts import imported_count
from hpsearch.study.definition import DEFINITION, definition, label, refuse_changes
from hpsearch.study.warmstart import warm_sampler, warm_start


def build_sampler(spec: Spec, offset: int = 0) -> optuna.samplers.BaseSampler:
    """``offset`` shifts the seed (resume, other processes), so they do not replay the same samples."""
    seed = None if spec.sampler.seed is None else spec.sampler.seed + offset
    if is_import_path(spec.sampler.name):
        sampler: optuna.samplers.BaseSampler = build_plugin(spec, "sampler", seed)
        return sampler
    return SAMPLERS[sampler_name(spec)].build(spec, seed)


def build_pruner(spec: Spec) -> optuna.pruners.BasePruner:
    if is_import_path(spec.pruner.name):
        pruner: optuna.pruners.BasePruner = build_plugin(spec, "pruner")
        return pruner
    name = pruner_name(spec)
    pruner = PRUNERS[name].build(spec)
    return pruner if name == "none" else trusted(spec, pruner)


def open_study(spec: Spec, seed_salt: int = 0, storage: Any = None) -> optuna.Study:
    """Create the study or load it (resume); warm starts are imported and enqueued only on creation.

    A study remembers what defines it (``definition``: objective, metrics, directions, the
    ``fixed:`` values, the space). Resuming it with another objective, metric, direction or
    fixed value raises UserError before anything is written (``adopt_definition`` is the
    explicit way past it); a changed space is allowed with one warning line on stderr.

    ``seed_salt`` tells processes sharing one study apart: with the same seed they would all
    draw the same random start-up configs."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage = storage or open_storage(spec.storage_url, outage_s=spec.storage.outage_s)
    existing = {s.study_name: s for s in optuna.get_all_study_summaries(storage, include_best_trial=False)}
    old = existing.get(spec.study)
    new = definition(spec)
    if old is not None:
        refuse_changes(spec, old, new)
    offset = old.n_trials if old is not None else 0
    study = optuna.create_study(
        storage=storage,
        sampler=build_sampler(spec, offset + seed_salt),
        pruner=build_pruner(spec),
        study_name=spec.study,
        directions=spec.directions,
        load_if_exists=True,
    )
    if old is None:
        label(study, spec)
        study.set_user_attr(DEFINITION, new)
        warm_start(study, spec)
        for config in spec.warm_start.configs:
            study.enqueue_trial(spec.tree.params_from_config({**spec.fixed, **config}), user_attrs={"warm_start": True})
    elif old.user_attrs.get(DEFINITION) != new:  # created before studies kept one, or the space changed (warned)
        study.set_user_attr(DEFINITION, new)
    ungated = is_import_path(spec.pruner.name) or pruner_name(spec) == "none" or spec.pruner.trust is None or len(spec.metrics) > 1
    record(study, None if ungated else {"threshold": spec.pruner.trust, "curves": spec.pruner.trust_curves})
    imported = imported_count(study)
    if imported:  # the median/percentile pruners count completed trials, imported ones too: wait for this study's own
        startup = spec.pruner.startup_trials + imported
        study.pruner = build_pruner(spec.model_copy(update={"pruner": spec.pruner.model_copy(update={"startup_trials": startup})}))
        study.sampler = warm_sampler(study, study.sampler, spec.warm_until)
    return study
