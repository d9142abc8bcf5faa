from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch


class Stop(Exception):
    """Stands in for a kill or a pruning signal raised from report()."""


class FakeReporter:
    """Records reports; keeps checkpoints in memory, serialized: the state holds live tensors."""

    def __init__(self, trial_dir: Path | None = None, checkpoint: dict | None = None, stop_at: int | None = None):
        self.trial_dir, self.checkpoint, self.stop_at = trial_dir, checkpoint, stop_at
        self.reports: list[tuple[int, dict[str, float]]] = []

    def report(self, epoch: int, metrics: dict[str, float]) -> None:
        self.reports.append((epoch, dict(metrics)))
        if epoch == self.stop_at:
            raise Stop(f"stopped at epoch {epoch}")

    def load_checkpoint(self) -> dict | None:
        return self.checkpoint

    def save_checkpoint(self, state: dict) -> None:
        buffer = io.BytesIO()  # round-trip as a real reporter would, under torch.load's safe mode
        torch.save(state, buffer)
        buffer.seek(0)
        self.checkpoint = torch.load(buffer, weights_only=True)

    @property
    def epochs(self) -> list[int]:
        return [e for e, _ in self.reports]


@pytest.fixture
def reporter_cls() -> type[FakeReporter]:
    return FakeReporter


@pytest.fixture
def stop_cls() -> type[Stop]:
    return Stop


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models gain nothing from a second thread, and two processes each spinning two
    OpenMP threads on a shared 2-core machine ran 10-50× slower in our measurements."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
