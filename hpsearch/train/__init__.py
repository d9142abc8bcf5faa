"""Reusable training parts: data, models, optimizers, schedules, the AMP loop, validation."""

from __future__ import annotations

from hpsearch.train.data import DATASETS, build_data
from hpsearch.train.defaults import DEFAULTS
from hpsearch.train.loop import evaluate, train_epoch
from hpsearch.train.models import MODELS, build_model
from hpsearch.train.optim import OPTIMIZERS, build_optimizer
from hpsearch.train.schedules import SCHEDULES, build_scheduler, lr_factor
from hpsearch.train.validate import validate

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
