"""One training epoch and one evaluation pass: AMP, gradient accumulation, no per-step sync.

Losses are summed on the device and read once per epoch (plus one finiteness check every
`check_every` optimizer steps, so a diverged run stops early without a sync per step).
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from hpsearch.parts.data_parallel import all_finite, is_sharded, no_sync, sum_across

AMP_MODES = ("auto", "bf16", "fp16", "off")


def prepare_process(cfg: dict[str, Any]) -> torch.device:
    """The device a run asks for, and this process's threads, float mode and seeds, from a config
    with every default filled in (the objective and lr-find both start here)."""
    name = cfg["device"]
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu") if name == "auto" else torch.device(name)
    if cfg["threads"]:
        torch.set_num_threads(int(cfg["threads"]))
    # Subnormals as zero, on the calling thread (with threads: 1 it does all the math); a no-op
    # where the CPU has no such mode
    torch.set_flush_denormal(bool(cfg["flush_denormal"]))
    random.seed(cfg["seed"])
    np.random.seed(cfg["seed"])
    torch.manual_seed(cfg["seed"])  # also seeds every CUDA device
    return device


def amp_dtype(amp: str, device: torch.device) -> torch.dtype | None:
    """auto: bf16 on GPUs that have it, fp16 on older GPUs, full precision on CPU."""
    if amp == "auto":
        if device.type != "cuda":
            return None
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return {"bf16": torch.bfloat16, "fp16": torch.float16, "off": None}[amp]


def autocast(device: torch.device, dtype: torch.dtype | None) -> contextlib.AbstractContextManager[object]:
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def grad_scaler(device: torch.device, dtype: torch.dtype | None) -> torch.amp.GradScaler | None:
    """Loss scaling is needed only for fp16, whose range underflows small gradients."""
    return torch.amp.GradScaler(device.type) if dtype == torch.float16 else None


@dataclass
class EpochResult:
    loss_sum: torch.Tensor  # device scalar: sum over samples of the per-sample training loss
    samples: int
    steps: int  # optimizer steps taken

    def mean_loss(self) -> float:
        return self.loss_sum.item() / max(1, self.samples)


def train_epoch(
    model: nn.Module,
    loader: Iterable[tuple[torch.Tensor, torch.Tensor]],
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None,
    *,
    accum_steps: int = 1,
    dtype: torch.dtype | None = None,
    scaler: torch.amp.GradScaler | None = None,
    grad_clip: float = 0.0,
    label_smoothing: float = 0.0,
    check_every: int = 50,
) -> EpochResult:
    """Each optimizer step averages `accum_steps` mean-reduced micro-batch losses, so it
    equals one step on a batch accum_steps times larger. The loader must yield whole groups."""
    model.train()
    device = next(model.parameters()).device
    loss_sum, samples, steps = torch.zeros((), device=device), 0, 0
    for i, (x, y) in enumerate(_labelled(loader)):
        with no_sync(model, skip=(i + 1) % accum_steps != 0):  # DDP: all-reduce gradients once per optimizer step
            with phase("forward"), autocast(device, dtype):
                loss = F.cross_entropy(model(x), y, label_smoothing=label_smoothing)
            scaled = loss / accum_steps
            with phase("backward"):
                (scaler.scale(scaled) if scaler else scaled).backward()
        loss_sum += loss.detach().float() * len(y)
        samples += len(y)
        if (i + 1) % accum_steps:
            continue
        with phase("optimizer"):
            optimizer_step(model, optimizer, scaler, grad_clip)
            if scheduler is not None:
                scheduler.step()
        steps += 1
        if check_every and steps % check_every == 0 and not all_finite(loss_sum):
            break  # on every rank at once (all_finite is a collective under torch.distributed)
    if is_sharded(loader):  # data parallel: the epoch's loss and samples over all ranks
        totals = sum_across(torch.stack([loss_sum.float(), torch.tensor(float(samples), device=device)]))
        loss_sum, samples = totals[0], int(totals[1].item())
    return EpochResult(loss_sum, samples, steps)


PHASES = ("data", "forward", "backward", "optimizer")  # the labels `hpsearch profile` splits a step into
PHASE_PREFIX = "hpsearch/"


def phase(name: str) -> contextlib.AbstractContextManager[object]:
    """A torch.profiler label (``hpsearch/<name>``) while a profiler records; else a no-op: 0.5-3 us
    per call, where record_function costs 35-50 us even with no profiler (2-core CI VM under load)."""
    if torch._C._autograd._profiler_enabled():
        return _profiled_phase(name)
    return contextlib.nullcontext()


@contextlib.contextmanager
def _profiled_phase(name: str) -> Iterator[None]:
    """Under a profiler each phase ends with a CUDA sync, so its time includes the kernels it queued."""
    with torch.profiler.record_function(PHASE_PREFIX + name):
        yield
        if torch.cuda.is_initialized():  # type: ignore[no-untyped-call]  # not is_available(): a CPU run must not start CUDA
            torch.cuda.synchronize()


def _labelled(loader: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """The loader's batches, each fetch labelled "data" (waiting on DataLoader workers counts there)."""
    batches = iter(loader)
    while True:
        with phase("data"):
            batch = next(batches, None)
        if batch is None:
            return
        yield batch


def optimizer_step(model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None, grad_clip: float) -> None:
    """Clip (the unscaled gradients), step, update the loss scale, zero the gradients: one optimizer step."""
    if grad_clip > 0:
        if scaler:
            scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
        nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    if scaler:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)


@torch.no_grad()
def evaluate(
    model: nn.Module, loader: Iterable[tuple[torch.Tensor, torch.Tensor]], dtype: torch.dtype | None = None
) -> tuple[float, float]:
    """(mean cross-entropy without label smoothing, accuracy as a fraction)."""
    model.eval()
    device = next(model.parameters()).device
    totals = torch.zeros(3, device=device)  # loss sum, correct, samples
    for x, y in loader:
        with autocast(device, dtype):
            logits = model(x)
        totals[0] += F.cross_entropy(logits.float(), y, reduction="sum")
        totals[1] += (logits.argmax(1) == y).sum()
        totals[2] += len(y)
    if is_sharded(loader):  # each rank saw its slice of every batch
        totals = sum_across(totals)
    loss, correct, n = totals.tolist()
    return loss / max(1.0, n), correct / max(1.0, n)
