"""Config defaults and `validate(config) -> list[str]`: every problem, one line each.

Cheap checks only (names, ranges, path existence); never loads data or builds a model.
"""

from __future__ import annotations

from typing import Any

import torch

from hpsearch.parts.datasets import dataset_problems
from hpsearch.parts.early_stopping import early_stopping_problems
from hpsearch.parts.loop import AMP_MODES
from hpsearch.parts.models import model_problems
from hpsearch.parts.names import hint, unknown_name
from hpsearch.parts.optim import OPTIMIZERS
from hpsearch.parts.schedules import SCHEDULES
from hpsearch.parts.settings import DEFAULTS as DEFAULTS  # the objective's defaults; validate.DEFAULTS is the public name

# key: (integer?, low, high, low_inclusive, high_inclusive); None values are left to defaults.
_RANGES: dict[str, tuple[bool, float | None, float | None, bool, bool]] = {
    "batch_size": (True, 1, None, True, True),
    "accum_steps": (True, 1, None, True, True),
    "epochs": (True, 1, None, True, True),
    "eval_batch_size": (True, 1, None, True, True),
    "threads": (True, 1, None, True, True),
    "processes": (True, 1, None, True, True),
    "width": (True, 1, None, True, True),
    "image_size": (True, 1, None, True, True),
    "synthetic_classes": (True, 2, None, True, True),
    "synthetic_samples": (True, 2, None, True, True),
    "aug_crop_padding": (True, 0, None, True, True),
    "aug_cutout": (True, 0, None, True, True),
    "num_workers": (True, 0, None, True, True),
    "seed": (True, 0, None, True, True),
    "checkpoint_every": (True, 0, None, True, True),  # epochs; 0 = off
    "split_seed": (True, 0, None, True, True),
    "train_subset": (True, 1, None, True, True),  # images; None = all
    "val_subset": (True, 1, None, True, True),
    "test_subset": (True, 1, None, True, True),
    "lr": (False, 0, None, False, True),
    "weight_decay": (False, 0, None, True, True),
    "val_fraction": (False, 0, 1, False, False),
    "momentum": (False, 0, 1, True, False),
    "beta1": (False, 0, 1, True, False),
    "beta2": (False, 0, 1, True, False),
    "alpha": (False, 0, 1, True, False),
    "eps": (False, 0, None, False, True),
    "lr_decay": (False, 0, None, True, True),
    "warmup_epochs": (False, 0, None, True, True),
    "warmup_fraction": (False, 0, 1, True, False),
    "warmup_start_factor": (False, 0, 1, True, True),
    "min_lr_ratio": (False, 0, 1, True, True),
    "gamma": (False, 0, None, False, True),
    "step_epochs": (False, 0, None, False, True),
    "div_factor": (False, 0, None, False, True),
    "final_div_factor": (False, 0, None, False, True),
    "grad_clip": (False, 0, None, True, True),
    "label_smoothing": (False, 0, 1, True, False),
    "dropout": (False, 0, 1, True, False),
}
_BOOLS = (
    "download",
    "aug_hflip",
    "wd_norm_bias",
    "nesterov",
    "compile",
    "evaluate_test",
    "save_model",
    "flush_denormal",
    "fused_optimizer",
)


def validate(config: dict[str, Any]) -> list[str]:
    """Human-readable one-line problems with `config`; empty when it can run.

    Keys outside DEFAULTS are reported (typos would otherwise be searched silently),
    except keys starting with "_", which are left for the caller.
    """
    cfg = {**DEFAULTS, **config}
    problems = [_unknown_key(k) for k in config if k not in DEFAULTS and not str(k).startswith("_")]
    problems += _name_problems(cfg)
    problems += [p for key, spec in _RANGES.items() if (p := _range_problem(key, cfg[key], *spec))]
    problems += [f"{k} must be true or false, got {cfg[k]!r}" for k in _BOOLS if cfg[k] not in (None, True, False)]
    problems += _list_problems(cfg) + _combination_problems(config, cfg) + early_stopping_problems(cfg["early_stopping"])
    if not isinstance(cfg["data_root"], str):
        return problems + [f"data_root must be a folder path, got {cfg['data_root']!r}"]
    return problems + dataset_problems(cfg)  # unknown name, or the files it looked for


def _unknown_key(key: object) -> str:
    return f"unknown config key {key!r}{hint(key, DEFAULTS)}; the keys are listed in objectives/image_classification.py"


def _name_problems(cfg: dict[str, Any]) -> list[str]:
    problems = model_problems(cfg["model"])
    for kind, known in (("optimizer", OPTIMIZERS), ("schedule", SCHEDULES), ("amp", AMP_MODES)):
        if not (isinstance(cfg[kind], str) and cfg[kind] in known):
            problems.append(unknown_name(f"{kind} value" if kind == "amp" else kind, cfg[kind], known))
    if cfg["channels_last"] not in ("auto", True, False):
        problems.append(f"channels_last must be auto, true or false, got {cfg['channels_last']!r}")
    if cfg["shortcut"] is not None and str(cfg["shortcut"]).upper() not in ("A", "B"):
        problems.append(f"shortcut must be A (zero-pad) or B (1x1 conv), got {cfg['shortcut']!r}")
    return problems + _device_problems(cfg["device"])


def _device_problems(name: object) -> list[str]:
    if name == "auto":
        return []
    try:
        device = torch.device(str(name))
    except RuntimeError:
        return [f"device must be auto, cpu, cuda or cuda:N, got {name!r}"]
    if device.type == "cuda" and not torch.cuda.is_available():
        return [f"device {name!r} requested but no CUDA GPU is visible (torch.cuda.is_available() is False)"]
    return []


def _range_problem(key: str, value: Any, integer: bool, low: float | None, high: float | None, low_in: bool, high_in: bool) -> str | None:
    if value is None:
        return None
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        return f"{key} must be {kind}, got {value!r}{_yaml_hint(value)}"
    too_low = low is not None and (value < low if low_in else value <= low)
    too_high = high is not None and (value > high if high_in else value >= high)
    if not (too_low or too_high):
        return None
    bounds = []
    if low is not None:
        bounds.append(f"{'>=' if low_in else '>'} {low}")
    if high is not None:
        bounds.append(f"{'<=' if high_in else '<'} {high}")
    return f"{key} must be {kind} {' and '.join(bounds)}, got {value!r}"


def _yaml_hint(value: Any) -> str:
    if not isinstance(value, str):
        return ""
    try:
        float(value)
    except ValueError:
        return ""
    return " (text, not a number: YAML reads 1e-3 as text; write 1.0e-3)"


def _positive_ints(value: Any) -> bool:
    if not isinstance(value, (list, tuple)):
        return False
    return all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in value)


def _list_problems(cfg: dict[str, Any]) -> list[str]:
    problems = []
    if not (_positive_ints(cfg["synthetic_shape"]) and len(cfg["synthetic_shape"]) == 3):
        shape = cfg["synthetic_shape"]
        problems.append(f"synthetic_shape must be [channels, height, width] of positive integers, got {shape!r}")
    if not _positive_ints(cfg["mlp_hidden"]):
        problems.append(f"mlp_hidden must be a list of positive integers, got {cfg['mlp_hidden']!r}")
    return problems


def _combination_problems(config: dict[str, Any], cfg: dict[str, Any]) -> list[str]:
    problems = []
    if config.get("warmup_epochs") is not None and config.get("warmup_fraction") is not None:
        problems.append(
            f"give warmup_epochs or warmup_fraction, not both (got warmup_epochs={config['warmup_epochs']!r}, "
            f"warmup_fraction={config['warmup_fraction']!r})"
        )
    warmup, epochs = cfg["warmup_epochs"], cfg["epochs"]
    if all(isinstance(v, (int, float)) for v in (warmup, epochs)) and warmup is not None and warmup >= epochs:
        problems.append(f"warmup_epochs must be < epochs, got warmup_epochs={warmup!r} epochs={epochs!r}")
    if cfg["optimizer"] == "sgd" and cfg["nesterov"] is True and cfg["momentum"] == 0:
        problems.append("nesterov: true needs momentum > 0 (sgd)")
    return problems
