"""Reusable training parts: data, models, optimizers, schedules, the AMP loop, validation."""

from __future__ import annotations

from hpsearch.parts.datasets import DATASETS, build_data
from hpsearch.parts.loop import evaluate, train_epoch
from hpsearch.parts.models import MODELS, build_model
from hpsearch.parts.optim import OPTIMIZERS, build_optimizer
from hpsearch.parts.schedules import SCHEDULES, build_scheduler, lr_factor
from hpsearch.parts.settings import DEFAULTS
from hpsearch.parts.validate import validate

__all__ = [
    "DATASETS",
    "DEFAULTS",
    "MODELS",
    "OPTIMIZERS",
    "SCHEDULES",
    "build_data",
    "build_model",
    "build_optimizer",
    "build_scheduler",
    "evaluate",
    "lr_factor",
    "train_epoch",
    "validate",
]
