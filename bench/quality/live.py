"""Tier C (``fashion_live``): the Tier B space trained for real, epoch by epoch, while a method watches.

Each trial trains bench/spaces/bench_fashion.yaml's MLP with the built-in objective (12,000
class-stratified training images, 5,000 validation images, one torch thread) in a thread of the
search's process. The objective's reporter hands every epoch's val_acc to the method and waits:
a method that prunes stops the training there, so a pruned trial costs only its epochs, as in
``hpsearch run``. There is no noise-free value here: an incumbent is scored on the val_acc it
was picked by, and the regret's ends (the optimum and the median random config) are Tier B's,
measured on the same space and data.

The data: /usr/share/datasets/fashion-mnist/ (Debian's dataset-fashion-mnist), or the folder
holding fashion-mnist/ named by HPSEARCH_BENCH_DATA.
"""

from __future__ import annotations

import math
import os
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from bench.quality.table import SPEC, TableTask, space_of
from bench.quality.tasks import MAX_EPOCHS


class _Stop(Exception):
    """Raised inside the objective when the method stops listening (pruned or cut)."""


class LiveCurve:
    """One trial's val_acc per epoch, trained on demand: iterating asks for the next epoch,
    ``[-1]`` trains to the end, ``close()`` stops the training where it is."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config, self.values = config, list[float]()
        self._out: queue.Queue[float | None] = queue.Queue()
        self._go = threading.Semaphore(0)
        self._stop, self._done = False, False
        self._thread: threading.Thread | None = None

    def report(self, epoch: int, metrics: dict[str, Any]) -> None:  # the objective's reporter
        self._out.put(float(metrics.get("val_acc", math.nan)))
        self._go.acquire()
        if self._stop:
            raise _Stop

    def _train(self) -> None:
        from objectives.image_classification import train

        try:
            train(self.config, self)
        except Exception:  # _Stop, or a diverged config: nan from here on (a method sees a failed trial)
            pass
        finally:
            self._out.put(None)

    def _next(self) -> bool:
        if self._done:
            return False
        if self._thread is None:
            self._thread = threading.Thread(target=self._train, daemon=True)
            self._thread.start()
        else:
            self._go.release()
        value = self._out.get()
        if value is None:
            self._done = True
            self.values += [math.nan] * (MAX_EPOCHS - len(self.values))  # failed before the end
            return False
        self.values.append(value)
        return True

    def __iter__(self) -> Iterator[float]:
        i = 0
        while i < len(self.values) or self._next():
            if i >= len(self.values):
                return
            yield self.values[i]
            i += 1

    def __getitem__(self, index: int) -> float:
        while len(self.values) < MAX_EPOCHS and self._next():
            pass
        return self.values[index]

    def close(self) -> None:
        if self._thread is not None and not self._done:
            self._stop = True
            self._go.release()
            self._thread.join()
            self._done = True


@dataclass
class LiveTask:
    name: str = "fashion_live"
    direction: str = "maximize"
    max_epochs: int = MAX_EPOCHS
    space: dict[str, Any] = field(default_factory=space_of)
    observed_only: bool = True  # an incumbent is scored on the value it was picked by (Incumbent)
    _fixed: dict[str, Any] | None = None

    def fixed(self) -> dict[str, Any]:
        if self._fixed is None:
            import yaml

            fixed = yaml.safe_load(SPEC.read_text())["fixed"]
            fixed.update(threads=1, epochs=MAX_EPOCHS)
            if os.environ.get("HPSEARCH_BENCH_DATA"):
                fixed["data_root"] = os.environ["HPSEARCH_BENCH_DATA"]
            self._fixed = fixed
        return self._fixed

    def curve(self, config: dict[str, Any], epochs: int, seed: int) -> LiveCurve:
        """Trained lazily; ``seed`` (the search's seed and the trial's number) seeds the training."""
        return LiveCurve({**self.fixed(), **config, "epochs": epochs, "seed": seed % 2**31})

    def true_value(self, config: dict[str, Any]) -> float:
        raise NotImplementedError("live trials have no noise-free value: Incumbent keeps the observed one")

    def reference(self) -> tuple[float, float]:
        return TableTask().reference()
