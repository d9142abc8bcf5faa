"""Tier B: hpsearch's own Fashion-MNIST space, replayed from a table of trained runs.

bench/results/tier_b/table.jsonl.gz holds Sobol configs of bench/spaces/bench_fashion.yaml trained
with the built-in objective (an MLP, 12,000 training and 5,000 validation images, 6 epochs),
each with training seeds 0 and 1, every epoch's val_acc recorded (python -m bench.tier_b_table), plus
held-out configs. The replay is a surrogate: a random forest per epoch fitted on the table's
seed-mean curves predicts a config's mean curve; an observed curve adds Gaussian noise with the
seed-to-seed standard deviation measured per epoch on the table's pairs (the better half of
the configs, robustly: 1.0 points after epoch 1, 0.17 after epoch 6), deterministic in
(config, seed). ``validate()`` scores the surrogate on the held-out configs.
"""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.quality.tasks import MAX_EPOCHS, config_hash, random_configs

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "bench" / "results" / "tier_b" / "table.jsonl.gz"
SPEC = ROOT / "bench" / "spaces" / "bench_fashion.yaml"  # the space the table was drawn from
CHANCE = 0.1  # val_acc of a diverged run (10 classes)


def load_rows(path: Path = TABLE) -> list[dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def space_of() -> dict[str, Any]:
    import yaml

    space: dict[str, Any] = yaml.safe_load(SPEC.read_text())["space"]
    return space


def features(c: dict[str, Any]) -> list[float]:
    """A config as numbers: the optimizer's own knobs are 0 for the other optimizer."""
    sgd = c["optimizer"] == "sgd"
    return [
        1.0 if sgd else 0.0,
        math.log10(c["lr"]),
        c.get("momentum", 0.0) if sgd else 0.0,
        1.0 if sgd and c.get("nesterov") else 0.0,
        0.0 if sgd else c.get("beta2", 0.0),
        math.log2(c["batch_size"]),
        math.log10(c["weight_decay"]),
        {"cosine": 0.0, "linear": 1.0, "constant": 2.0}[c["schedule"]],
        c["warmup_epochs"],
        c["label_smoothing"],
    ]


def curve_of(row: dict[str, Any]) -> list[float]:
    """A row's val_acc per epoch; a diverged run scores chance from the epoch it diverged on."""
    values = [v if isinstance(v, float) and math.isfinite(v) else CHANCE for v in row["val_acc"]]
    return (values + [CHANCE] * MAX_EPOCHS)[:MAX_EPOCHS]


def mean_curves(rows: list[dict[str, Any]], which: str) -> tuple[list[dict[str, Any]], np.ndarray, np.ndarray]:
    """Configs of one set ("table" or "holdout"), their seed-mean curves and seed differences."""
    by_id: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r["set"] == which:
            by_id.setdefault(r["id"], []).append(r)
    pairs = [v for v in by_id.values() if len(v) == 2]
    configs = [p[0]["config"] for p in pairs]
    curves = np.array([[curve_of(r) for r in p] for p in pairs])  # (n, 2 seeds, epochs)
    return configs, curves.mean(axis=1), curves[:, 0, :] - curves[:, 1, :]


@dataclass
class TableTask:
    name: str = "fashion_table"
    direction: str = "maximize"
    max_epochs: int = MAX_EPOCHS
    space: dict[str, Any] = field(default_factory=space_of)
    _model: Any = None
    _noise: np.ndarray | None = None
    _ref: tuple[float, float] | None = None
    _cache: dict[int, np.ndarray] = field(default_factory=dict)

    def _fit(self) -> None:
        from sklearn.ensemble import RandomForestRegressor

        configs, means, diffs = mean_curves(load_rows(), "table")
        x = np.array([features(c) for c in configs])
        self._model = RandomForestRegressor(n_estimators=120, min_samples_leaf=2, random_state=0, n_jobs=1).fit(x, means)
        # one run's seed-to-seed sd per epoch, in the better half of the table (where searches
        # compare configs; diverging seeds of bad configs would inflate it), robust (MAD)
        good = means[:, -1] >= np.median(means[:, -1])
        self._noise = np.median(np.abs(diffs[good]), axis=0) * 1.4826 / math.sqrt(2)

    def mean_curve(self, config: dict[str, Any]) -> np.ndarray:
        key = config_hash(config)
        if key not in self._cache:
            if self._model is None:
                self._fit()
            self._cache[key] = self._model.predict(np.array([features(config)]))[0]
        return self._cache[key]

    def curve(self, config: dict[str, Any], epochs: int, seed: int) -> list[float]:
        mean = self.mean_curve(config)
        assert self._noise is not None
        noise = np.random.default_rng(config_hash(config, seed)).normal(0.0, 1.0, size=self.max_epochs) * self._noise
        return [float(v) for v in (mean + noise)[:epochs]]

    def true_value(self, config: dict[str, Any]) -> float:
        return float(self.mean_curve(config)[-1])

    def reference(self) -> tuple[float, float]:
        if self._ref is None:
            configs = random_configs(self.space, 3000, seed=12345)
            if self._model is None:
                self._fit()
            finals = self._model.predict(np.array([features(c) for c in configs]))[:, -1]
            self._ref = (float(finals.max()), float(np.median(finals)))
        return self._ref


def validate() -> dict[str, Any]:
    """The surrogate on the held-out configs: Spearman of predicted vs measured (seed-mean) val_acc
    per epoch, MAE per epoch, the seed-to-seed sd for scale; how each epoch ranks the table's final values."""
    from scipy.stats import spearmanr

    task, rows = TableTask(), load_rows()
    configs, means, diffs = mean_curves(rows, "holdout")
    pred, table = np.array([task.mean_curve(c) for c in configs]), mean_curves(rows, "table")[1]
    halves, k = {"all": table, "better_half": table[table[:, -1] >= np.median(table[:, -1])]}, max(1, len(configs) // 10)
    assert task._noise is not None
    return {
        "epoch_vs_final": {
            k: [round(float(spearmanr(m[:, e], m[:, -1]).statistic), 2) for e in range(MAX_EPOCHS)] for k, m in halves.items()
        },
        "held_out_configs": len(configs),
        "spearman_per_epoch": [round(float(spearmanr(pred[:, e], means[:, e]).statistic), 3) for e in range(MAX_EPOCHS)],
        "mae_per_epoch": [round(float(np.mean(np.abs(pred[:, e] - means[:, e]))), 4) for e in range(MAX_EPOCHS)],
        "seed_sd_per_epoch": [round(float(v), 4) for v in task._noise],
        "top_decile_recall": round(len(set(np.argsort(-pred[:, -1])[:k]) & set(np.argsort(-means[:, -1])[:k])) / k, 3),
    }


if __name__ == "__main__":
    print(json.dumps(validate(), indent=1))
