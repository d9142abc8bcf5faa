"""Tasks the search-quality harness runs methods on: what a trial of a config reports per epoch.

Every task has the same fidelity axis: ``max_epochs`` (6) epochs of one full trial. A task's
``space`` is written in hpsearch's spec form, so every method samples it through hpsearch's own
``Space`` (conditional options included) and a flat config means the same thing everywhere.

Tier A (synthetic, seconds): mf-prior-bench's multi-fidelity Hartmann functions mfh3/mfh6 in
four difficulties (fidelity 1..100: epoch e of 6 is fidelity round(100 e / 6); the noise and the
bias of a low fidelity vanish at 100), and ``shaped``: a closed-form response with the shape of
a real training space (optimizer choice with its own lr range, batch size, schedule...).
Tier B (``table``): a surrogate fitted on the trained Fashion-MNIST table (bench/quality/table.py).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

MAX_EPOCHS = 6
MFH = [f"mfh{d}_{k}" for d in (3, 6) for k in ("good", "moderate", "bad", "terrible")]  # Tier A's Hartmann tasks


class Curve(Protocol):
    """A trial's observed metric per epoch: a list, or (Tier C) epochs trained as they are read."""

    def __iter__(self) -> Iterator[float]: ...

    def __getitem__(self, index: int) -> float: ...


class Task(Protocol):
    name: str
    direction: str  # "minimize" or "maximize"
    max_epochs: int
    space: dict[str, Any]

    def curve(self, config: dict[str, Any], epochs: int, seed: int) -> Curve:
        """Observed metric after each epoch 1..epochs; deterministic in (config, seed)."""
        ...

    def true_value(self, config: dict[str, Any]) -> float:
        """Noise-free metric at max_epochs: what an incumbent is scored on."""
        ...

    def reference(self) -> tuple[float, float]:
        """(optimum, median true value of random configs): regret 0 and 1."""
        ...


def config_hash(config: dict[str, Any], seed: int = 0) -> int:
    text = repr(sorted(config.items())) + f"/{seed}"
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")


def random_configs(space: dict[str, Any], n: int, seed: int) -> list[dict[str, Any]]:
    """n uniform draws of the space through hpsearch's Space (as random search draws them)."""
    import optuna

    from hpsearch.search.space import parse_space

    tree = parse_space(space, "space", [])
    sampler = optuna.samplers.RandomSampler(seed=seed)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(sampler=sampler)
    configs = []
    for _ in range(n):
        trial = study.ask()
        configs.append(tree.suggest(trial))
        study.tell(trial, 0.0)
    return configs


# ---------------------------------------------------------------------------- Tier A: Hartmann


@dataclass
class Hartmann:
    """mf-prior-bench's MFHartmann generator, queried directly (no ConfigSpace per call)."""

    dims: int
    difficulty: str
    direction: str = "minimize"
    max_epochs: int = MAX_EPOCHS
    space: dict[str, Any] = field(default_factory=dict)
    _mfh: Any = None
    _ref: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        import mfpbench

        self.name = f"mfh{self.dims}_{self.difficulty}"
        self._mfh = mfpbench.get(self.name, seed=1).mfh
        self.space = {f"x{i}": {"float": [0.0, 1.0]} for i in range(self.dims)}

    def _at(self, config: dict[str, Any], z: int) -> float:
        return float(self._mfh(z=z, Xs=tuple(float(config[f"x{i}"]) for i in range(self.dims))))

    def curve(self, config: dict[str, Any], epochs: int, seed: int) -> list[float]:
        # the generator's noise is a property of (config, fidelity); a seed does not change it
        return [self._at(config, max(1, round(100 * e / self.max_epochs))) for e in range(1, epochs + 1)]

    def true_value(self, config: dict[str, Any]) -> float:
        return self._at(config, 100)

    def reference(self) -> tuple[float, float]:
        if self._ref is None:
            optimum = {3: -3.86278, 6: -3.32237}[self.dims]
            rng = np.random.default_rng(12345)
            values = [self.true_value({f"x{i}": x for i, x in enumerate(row)}) for row in rng.random((4000, self.dims))]
            self._ref = (optimum, float(np.median(values)))
        return self._ref


# ---------------------------------------------------------------------------- Tier A: shaped

SHAPED_SPACE: dict[str, Any] = {
    "optimizer": {
        "choice": {
            "sgd": {"lr": {"float": [1.0e-3, 1.0], "log": True}, "momentum": {"float": [0.5, 0.99]}},
            "adamw": {"lr": {"float": [1.0e-5, 1.0e-1], "log": True}, "beta2": {"float": [0.9, 0.999]}},
        }
    },
    "batch_size": {"choice": [32, 64, 128, 256]},
    "weight_decay": {"float": [1.0e-6, 1.0e-2], "log": True},
    "schedule": {"choice": ["cosine", "linear", "constant"]},
    "warmup_epochs": {"float": [0.0, 1.0]},
    "label_smoothing": {"float": [0.0, 0.2]},
}


@dataclass
class Shaped:
    """A closed-form 'accuracy' over a space shaped like a real one: each optimizer has its own
    lr optimum that scales with the batch size (and, for SGD, with 1/(1-momentum)); weight decay,
    schedule, warmup and label smoothing each move the final value a little; a too-low lr learns
    slowly (the curve), a too-high one diverges early. Observation noise 0.3 points per epoch."""

    name: str = "shaped"
    direction: str = "maximize"
    max_epochs: int = MAX_EPOCHS
    space: dict[str, Any] = field(default_factory=lambda: SHAPED_SPACE)
    noise: float = 0.003
    _ref: tuple[float, float] | None = None

    def _final_and_rate(self, c: dict[str, Any]) -> tuple[float, float]:
        b = math.log2(c["batch_size"] / 128)
        if c["optimizer"] == "sgd":
            eff = math.log10(c["lr"] / (1 - c["momentum"]))  # effective step size
            best, width, top = -0.3 + 0.3 * b, 0.55, 0.905
        else:
            eff = math.log10(c["lr"]) + 0.5 * (c["beta2"] - 0.99) * 20 * 0.05
            best, width, top = -2.8 + 0.15 * b, 0.6, 0.91
        miss = (eff - best) / width
        acc = top - 0.06 * miss**2 if miss < 0 else top - 0.09 * miss**2  # too high hurts more
        acc -= 0.012 * (math.log10(c["weight_decay"]) + 3.5) ** 2 / 6.25
        acc += {"cosine": 0.006, "linear": 0.004, "constant": 0.0}[c["schedule"]]
        acc -= 0.01 * abs(c["warmup_epochs"] - 0.3) * (1.0 if miss > 0 else 0.3)
        acc -= 0.04 * (c["label_smoothing"] - 0.08) ** 2 / 0.0144 * 0.1
        acc -= 0.002 * b  # bigger batches: fewer steps in the same epochs
        acc = min(max(acc, 0.1), 0.95)
        rate = 1.4 * math.exp(-max(0.0, -miss) * 0.8)  # a too-low lr learns slowly
        return acc, rate

    def _mean_curve(self, c: dict[str, Any], epochs: int) -> list[float]:
        acc, rate = self._final_and_rate(c)
        start = 0.1
        scale = 1 - math.exp(-rate * self.max_epochs)
        return [start + (acc - start) * (1 - math.exp(-rate * e)) / scale for e in range(1, epochs + 1)]

    def curve(self, config: dict[str, Any], epochs: int, seed: int) -> list[float]:
        rng = np.random.default_rng(config_hash(config, seed))
        noise = rng.normal(0.0, self.noise, size=self.max_epochs)[:epochs]
        return [float(m + n) for m, n in zip(self._mean_curve(config, epochs), noise, strict=True)]

    def true_value(self, config: dict[str, Any]) -> float:
        return self._mean_curve(config, self.max_epochs)[-1]

    def reference(self) -> tuple[float, float]:
        if self._ref is None:
            values = [self.true_value(c) for c in random_configs(self.space, 4000, seed=12345)]
            best = max(self.true_value(c) for c in _shaped_grid())
            self._ref = (max(best, max(values)), float(np.median(values)))
        return self._ref


def _shaped_grid() -> list[dict[str, Any]]:
    """Near-optimal configs by a coarse grid, for the shaped task's optimum."""
    out = []
    for opt in ("sgd", "adamw"):
        for b in (32, 64, 128, 256):
            for lr in np.logspace(-5, 0, 80):
                for extra in ({"momentum": m} for m in (0.5, 0.7, 0.8, 0.9, 0.95, 0.99)) if opt == "sgd" else ({"beta2": 0.99},):
                    out.append(
                        {"optimizer": opt, "lr": float(lr), **extra, "batch_size": b, "weight_decay": 10**-3.5, "schedule": "cosine"}
                        | {"warmup_epochs": 0.3, "label_smoothing": 0.08}
                    )
    return out
