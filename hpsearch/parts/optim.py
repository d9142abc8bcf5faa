"""Optimizer registry and weight-decay parameter groups.

Builders take (param_groups, config, fused) and read their own hyperparameters from the
flat config, so adding an optimizer is adding one entry to OPTIMIZERS.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from hpsearch.parts.settings import setting

OptimizerBuilder = Callable[[list[dict[str, Any]], dict[str, Any], bool], torch.optim.Optimizer]


def param_groups(model: nn.Module, weight_decay: float, wd_norm_bias: bool = False) -> list[dict[str, Any]]:
    """Decay only ≥2-D weights unless wd_norm_bias: biases and norm scales/shifts are 1-D."""
    params = [p for p in model.parameters() if p.requires_grad]
    if wd_norm_bias or weight_decay == 0:
        return [{"params": params, "weight_decay": weight_decay}]
    return [
        {"params": [p for p in params if p.ndim > 1], "weight_decay": weight_decay},
        {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0},
    ]


def _lr(c: dict[str, Any]) -> float:
    return float(setting(c, "lr"))


def _sgd(groups: list[dict[str, Any]], c: dict[str, Any], fused: bool) -> torch.optim.Optimizer:
    momentum = float(_get(c, "momentum", 0.9))
    nesterov = bool(setting(c, "nesterov"))
    return torch.optim.SGD(groups, lr=_lr(c), momentum=momentum, nesterov=nesterov, fused=fused or None)


def _adam_like(cls: type[torch.optim.Adam]) -> OptimizerBuilder:  # Adam or AdamW (a subclass)
    def build(groups: list[dict[str, Any]], c: dict[str, Any], fused: bool) -> torch.optim.Optimizer:
        betas = (float(setting(c, "beta1")), float(setting(c, "beta2")))
        return cls(groups, lr=_lr(c), betas=betas, eps=float(_get(c, "eps", 1e-8)), fused=fused or None)

    return build


def _rmsprop(groups: list[dict[str, Any]], c: dict[str, Any], fused: bool) -> torch.optim.Optimizer:
    return torch.optim.RMSprop(
        groups,
        lr=_lr(c),
        alpha=float(setting(c, "alpha")),
        momentum=float(_get(c, "momentum", 0.0)),
        eps=float(_get(c, "eps", 1e-8)),
    )


def _adagrad(groups: list[dict[str, Any]], c: dict[str, Any], fused: bool) -> torch.optim.Optimizer:
    return torch.optim.Adagrad(groups, lr=_lr(c), lr_decay=float(setting(c, "lr_decay")), eps=float(_get(c, "eps", 1e-10)))


FUSED = ("sgd", "adam", "adamw")  # the optimizers with fused kernels (CUDA and CPU, torch >= 2.4)

OPTIMIZERS: dict[str, OptimizerBuilder] = {
    "sgd": _sgd,
    "adam": _adam_like(torch.optim.Adam),
    "adamw": _adam_like(torch.optim.AdamW),
    "rmsprop": _rmsprop,
    "adagrad": _adagrad,
}


def _get(c: dict[str, Any], key: str, default: float | bool) -> float | bool:
    """Shared keys (momentum, eps) whose default differs per optimizer; None means default."""
    value = c.get(key)
    return default if value is None else value


def build_optimizer(model: nn.Module, config: dict[str, Any], device: torch.device) -> torch.optim.Optimizer:
    """Fused kernels, on CUDA and CPU, for the optimizers that have them (`fused_optimizer`, default on).

    On CUDA one launch per step instead of several per parameter. On CPU PyTorch's default is a
    loop over the parameters, several small ops each, and at small batches that loop is a large
    part of a step: AdamW at batch 32 on the Fashion-MNIST MLP took 0.79x the seconds fused, random
    configs of that space 0.88x (docs/experiments/2026-12-fused-optimizer.md). Same update rule; the arithmetic is
    ordered differently, so a run can part from the unfused one at the rounding level."""
    groups = param_groups(model, float(setting(config, "weight_decay")), bool(setting(config, "wd_norm_bias")))
    name = setting(config, "optimizer")
    fused = bool(setting(config, "fused_optimizer")) and device.type in ("cuda", "cpu") and name in FUSED
    return OPTIMIZERS[name](groups, config, fused)
