"""Every config key of the built-in objective and its default: the one place defaults live.

``validate.DEFAULTS`` re-exports it; builders read a value with ``setting(config, key)``.
A default of None means "decided from other keys" (documented in the objective's table).
"""

from __future__ import annotations

from typing import Any

# None: the default depends on another key (dataset, model, optimizer or schedule); subsets: all images.
DEFAULTS: dict[str, Any] = {
    "dataset": "digits",
    "data_root": "data",
    "download": False,
    "val_fraction": 0.1,
    "split_seed": 0,
    "train_subset": None,
    "val_subset": None,
    "test_subset": None,
    "image_size": 64,
    "synthetic_shape": [3, 32, 32],
    "synthetic_classes": 10,
    "synthetic_samples": 4096,
    "aug_crop_padding": None,
    "aug_hflip": None,
    "aug_cutout": 0,
    "num_workers": 2,
    "eval_batch_size": None,
    "model": "resnet20",
    "width": None,
    "shortcut": None,
    "mlp_hidden": [256],
    "dropout": 0.0,
    "optimizer": "sgd",
    "lr": 0.1,
    "weight_decay": 0.0,
    "wd_norm_bias": False,
    "momentum": None,
    "nesterov": False,
    "beta1": 0.9,
    "beta2": 0.999,
    "eps": None,
    "alpha": 0.99,
    "lr_decay": 0.0,
    "schedule": "cosine",
    "warmup_epochs": 0.0,
    "warmup_fraction": None,
    "warmup_start_factor": 0.01,
    "min_lr_ratio": 0.0,
    "gamma": None,
    "step_epochs": 30,
    "div_factor": 25.0,
    "final_div_factor": 1e4,
    "batch_size": 128,
    "accum_steps": 1,
    "epochs": 10,
    "amp": "auto",
    "channels_last": "auto",
    "compile": False,
    "grad_clip": 0.0,
    "label_smoothing": 0.0,
    "seed": 0,
    "device": "auto",
    "threads": None,
    "fused_optimizer": True,  # sgd/adam/adamw: the fused kernel on CUDA and CPU; see the objective's table
    "flush_denormal": True,  # CPU: subnormal floats as zero (torch.set_flush_denormal); see the objective's table
    "processes": 1,  # data-parallel ranks under torch.distributed (hpsearch/trial/ranks.py starts them)
    "evaluate_test": False,
    "save_model": False,
    "checkpoint_every": 1,  # epochs between checkpoints through reporter.save_checkpoint; 0 = off
    "early_stopping": None,  # {patience, min_delta, monitor}; None = off
}


def setting(config: dict[str, Any], key: str) -> Any:
    """The config's value for ``key``, or its default."""
    return config.get(key, DEFAULTS[key])
