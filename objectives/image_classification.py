"""Image classification objective: `train(config, reporter) -> metrics`.

The same function runs a search trial and the final training run. Every config key is
optional; `validate(config)` lists every problem at once without loading any data.
Standalone: `python -m hpsearch.objectives.image_classification dataset=digits model=resnet8 epochs=10`

| key                 | default   | meaning (unit)                                                        |
|---------------------|-----------|-----------------------------------------------------------------------|
| dataset             | digits    | digits, cifar10, cifar100, mnist, fashion_mnist, imagefolder, synthetic |
| data_root           | data      | folder holding the dataset files (imagefolder: train/, val/ or test/) |
|                     |           | mnist/fashion_mnist: idx files (.gz or not) in data_root/fashion-mnist/, |
|                     |           | data_root/FashionMNIST/raw/ or data_root, else /usr/share/datasets/   |
|                     |           | fashion-mnist/ (Debian's dataset-fashion-mnist); mnist: mnist/, MNIST/ |
| download            | false     | let torchvision download cifar/mnist into data_root                   |
| val_fraction        | 0.1       | share of the training set held out for validation (0..1)              |
| split_seed          | 0         | seed of the train/val (and digits 20% test) split and of the subsets; |
|                     |           | also synthetic data                                                   |
| train_subset        | null      | train on this many images of the training split (after the val split); |
|                     |           | class-stratified, seeded by split_seed, nested (1000 ⊂ 2000); null = all |
| val_subset          | null      | the same for the validation split                                     |
| test_subset         | null      | the same for the test split (evaluate_test)                           |
| image_size          | 64        | imagefolder: images resized to this square (pixels)                   |
| synthetic_shape     | [3,32,32] | synthetic: C, H, W                                                    |
| synthetic_classes   | 10        | synthetic: number of classes                                          |
| synthetic_samples   | 4096      | synthetic: images before the val split                                |
| aug_crop_padding    | per data  | random-crop padding (pixels); 4 for cifar, else 0; 0 = off            |
| aug_hflip           | per data  | random horizontal flip; true for cifar/imagefolder, else false        |
| aug_cutout          | 0         | side of one zeroed square per image (pixels); 0 = off                 |
| num_workers         | 2         | imagefolder: DataLoader worker processes                              |
| eval_batch_size     | 2*batch   | samples per forward pass when evaluating                              |
| model               | resnet20  | resnet8/14/20/32/44/56/110, resnet18/34, cnn, mlp, or a torchvision name |
| width               | 16 or 64  | base channels: 16 for CIFAR ResNets and cnn, 64 for resnet18/34       |
| dropout             | 0.0       | cnn: dropout before the linear head (share of activations zeroed)     |
| shortcut            | A or B    | ResNet shortcut: A = zero-pad (CIFAR ResNets), B = 1×1 conv (18/34)   |
| mlp_hidden          | [256]     | mlp hidden layer sizes                                                |
| optimizer           | sgd       | sgd, adam, adamw, rmsprop, adagrad                                    |
| lr                  | 0.1       | peak learning rate per optimizer step (per effective batch)           |
| weight_decay        | 0.0       | decoupled for adamw, L2 otherwise                                     |
| wd_norm_bias        | false     | also decay biases and norm scales/shifts (all 1-D parameters)         |
| momentum            | 0.9 / 0.0 | sgd / rmsprop momentum                                                |
| nesterov            | false     | sgd Nesterov momentum                                                 |
| beta1, beta2        | 0.9,0.999 | adam/adamw moment decay rates                                         |
| eps                 | 1e-8      | adam/adamw/rmsprop denominator term; adagrad default 1e-10            |
| alpha               | 0.99      | rmsprop squared-gradient decay                                        |
| lr_decay            | 0.0       | adagrad lr decay                                                      |
| schedule            | cosine    | cosine, linear, step, exponential, onecycle, constant (per step)      |
| warmup_epochs       | 0.0       | linear warmup length (epochs, fractional ok)                          |
| warmup_fraction     | none      | warmup length as a share of all optimizer steps (not with warmup_epochs) |
| warmup_start_factor | 0.01      | warmup starts at lr*factor                                            |
| min_lr_ratio        | 0.0       | cosine/linear end at lr*ratio                                         |
| gamma               | 0.1/0.95  | step: factor per step_epochs; exponential: factor per epoch           |
| step_epochs         | 30        | step: epochs between decays (after warmup)                            |
| div_factor          | 25        | onecycle: starts at lr/div_factor                                     |
| final_div_factor    | 1e4       | onecycle: ends at lr/(div_factor*final_div_factor)                    |
| batch_size          | 128       | samples per forward pass (micro-batch)                                |
| accum_steps         | 1         | micro-batches per optimizer step; effective batch = batch_size*accum  |
| epochs              | 10        | passes over the training split (last incomplete step dropped)         |
| amp                 | auto      | auto (bf16, fp16 on old GPUs, off on CPU), bf16, fp16, off            |
| channels_last       | auto      | NHWC memory layout; auto = on for convnets on CUDA and CPU            |
| compile             | false     | torch.compile the model                                               |
| grad_clip           | 0.0       | max global gradient norm; 0 = off                                     |
| label_smoothing     | 0.0       | training loss only; val/test loss is plain cross-entropy              |
| seed                | 0         | seeds torch, numpy, random: init, data order, augmentation            |
| device              | auto      | auto (cuda if available), cpu, cuda, cuda:N                           |
| threads             | none      | torch.set_num_threads (per process)                                   |
| fused_optimizer     | true      | sgd/adam/adamw: PyTorch's fused kernel, on CUDA and CPU. On CPU the   |
|                     |           | default is a loop of small ops per parameter, a large part of a small |
|                     |           | batch's step (docs/experiments/2026-12-fused-optimizer.md); false =   |
|                     |           | PyTorch's default                                                     |
| flush_denormal      | true      | CPU: treat subnormal floats as zero (torch.set_flush_denormal). Adam's |
|                     |           | second moments of dead ReLU units decay into subnormals, whose math   |
|                     |           | is slow on x86: up to 1.8x as long with fused_optimizer false         |
|                     |           | (docs/experiments/2026-12-denormals.md); the fused kernels mostly     |
|                     |           | avoid it                                                              |
| processes           | 1         | data-parallel ranks (DDP; gloo on CPU, one GPU each with NCCL); each   |
|                     |           | trains on batch_size samples of a global batch of batch_size*processes |
| evaluate_test       | false     | report test_acc/test_loss on the dataset's test split at the end      |
| save_model          | false     | write the final state_dict to reporter.trial_dir/model.pt             |
|                     |           | (with early_stopping: the best epoch's; the last one in model_last.pt) |
| checkpoint_every    | 1         | save a resume checkpoint through reporter.save_checkpoint every k     |
|                     |           | epochs and at the last epoch run (the final or early-stopped one); 0 = off |
| early_stopping      | null      | {patience: P, min_delta: D, monitor: val_acc}: stop after P epochs    |
|                     |           | without a gain > D in monitor (val_acc, higher is better, or val_loss, |
|                     |           | lower); final metrics, test and model.pt from the best epoch; adds    |
|                     |           | best_epoch and stopped_epoch (= the metric epochs) to the metrics;    |
|                     |           | null = off                                                            |
"""

from __future__ import annotations

import math
import random
import resource
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from hpsearch.parts.data_parallel import local_device, rank_world, shard, wrap
from hpsearch.parts.datasets import Data, build_data, prepare_dataset
from hpsearch.parts.early_stopping import EarlyStopping
from hpsearch.parts.loop import amp_dtype, evaluate, grad_scaler, prepare_process, train_epoch
from hpsearch.parts.models import build_model, is_convnet
from hpsearch.parts.optim import build_optimizer
from hpsearch.parts.schedules import build_scheduler
from hpsearch.parts.validate import DEFAULTS, validate


def train(config: dict, reporter) -> dict[str, float]:
    """Train, calling reporter.report(epoch, metrics) after every epoch (1-based).

    Resumes from reporter.load_checkpoint() and saves a checkpoint every checkpoint_every
    epochs (and at the last epoch run) when the reporter has those methods. With
    early_stopping the metrics, test scores and model.pt are the best epoch's. A non-finite epoch train loss is reported (val metrics NaN),
    then raises FloatingPointError unless report() raised first.
    """
    run = build(config)
    cfg, device, data, raw, model = run.cfg, run.device, run.data, run.raw, run.model
    optimizer, scheduler, dtype, scaler = run.optimizer, run.scheduler, run.dtype, run.scaler

    first, best, last = 1, 0.0, {}
    stopper = EarlyStopping.from_config(cfg["early_stopping"])
    state = getattr(reporter, "load_checkpoint", lambda: None)()
    if state is not None:
        _restore(state, raw, optimizer, scheduler, scaler)
        first, best, last = state["epoch"] + 1, state["best_val_acc"], state.get("metrics", {})
        if stopper is not None and state.get("early_stopping"):
            stopper.load_state_dict(state["early_stopping"])
    save_checkpoint = getattr(reporter, "save_checkpoint", lambda state: None)
    every = cfg["checkpoint_every"]

    speeds = []
    for epoch in range(first, cfg["epochs"] + 1):
        if stopper is not None and stopper.stopped:
            break  # a resumed run whose checkpoint already decided to stop
        t0 = time.perf_counter()
        result = train_epoch(
            model,
            data.train,
            optimizer,
            scheduler,
            accum_steps=cfg["accum_steps"],
            dtype=dtype,
            scaler=scaler,
            grad_clip=cfg["grad_clip"],
            label_smoothing=cfg["label_smoothing"],
        )
        train_loss = result.mean_loss()  # the epoch's one host sync
        train_s = time.perf_counter() - t0
        diverged = not math.isfinite(train_loss)
        val_loss, val_acc = (math.nan, math.nan) if diverged else evaluate(model, data.val, dtype)
        last = {
            "train_loss": train_loss,
            "val_loss": val_loss,
            "val_acc": val_acc,
            "lr": optimizer.param_groups[0]["lr"],
            "samples_per_s": result.samples / train_s,
            "epoch_time_s": time.perf_counter() - t0,
            "peak_mem_mb": _peak_mem_mb(device),
        }
        reporter.report(epoch, last)
        if diverged:
            raise FloatingPointError(f"loss diverged at epoch {epoch}")
        best = max(best, val_acc)
        speeds.append(last["samples_per_s"])
        stop = stopper is not None and stopper.update(epoch, last, raw)
        # every k-th epoch, and always the last one run: a finished run's checkpoint is its final state
        if every and (epoch % every == 0 or epoch == cfg["epochs"] or stop):
            ckpt = _checkpoint(epoch, raw, optimizer, scheduler, scaler, best, last)
            save_checkpoint(ckpt | ({"early_stopping": stopper.state_dict()} if stopper else {}))
        if stop:
            break

    return _final_metrics(run, stopper, last, best, speeds, getattr(reporter, "trial_dir", None))


def _final_metrics(
    run: Run, stopper: EarlyStopping | None, last: dict, best: float, speeds: list[float], trial_dir: str | Path | None
) -> dict[str, float]:
    """The run's result: the last epoch's metrics (with early stopping, the best epoch's and its weights),
    test scores when asked for, model.pt in the trial folder."""
    cfg, device, data, raw, model, dtype = run.cfg, run.device, run.data, run.raw, run.model, run.dtype
    final = last
    if stopper is not None and stopper.best_model is not None:
        if cfg["save_model"] and trial_dir is not None:
            torch.save(raw.state_dict(), Path(trial_dir) / "model_last.pt")
        raw.load_state_dict(stopper.best_model)  # the final metrics, test and model.pt come from the best epoch
        final = stopper.best_metrics
    out = {
        "val_acc": final["val_acc"],
        "best_val_acc": best,
        "val_loss": final["val_loss"],
        "train_loss": final["train_loss"],
        "samples_per_s": float(np.mean(speeds or [last["samples_per_s"]])),
        "epochs": float(cfg["epochs"]),
        "peak_mem_mb": _peak_mem_mb(device),
    }
    if stopper is not None:
        out["best_epoch"] = float(stopper.best_epoch)
        out["stopped_epoch"] = out["epochs"] = float(stopper.last_epoch)  # epochs trained: what `trials` shows
    if cfg["evaluate_test"] and data.test is not None:
        out["test_loss"], out["test_acc"] = evaluate(model, data.test, dtype)
    if cfg["save_model"] and trial_dir is not None:
        torch.save(raw.state_dict(), Path(trial_dir) / "model.pt")
    return out


@dataclass
class Run:
    """Everything one training run needs, built from a validated config (also used by ``hpsearch profile``)."""

    cfg: dict
    device: torch.device
    data: Data
    raw: torch.nn.Module  # the weights; `model` may be its torch.compile wrapper
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    dtype: torch.dtype | None
    scaler: torch.amp.GradScaler | None


def build(config: dict) -> Run:
    """Seed, load the data, build model, optimizer, schedule and AMP parts; ValueError lists every config problem."""
    problems = validate(config)
    if problems:
        raise ValueError("invalid config:\n  " + "\n  ".join(problems))
    cfg = {**DEFAULTS, **config}
    device = local_device(_setup(cfg))  # processes > 1 on CUDA: this rank's GPU
    _, world = rank_world()
    # data parallel: each rank reads global batches of batch_size*world and trains on its slice of each
    data = build_data({**cfg, "batch_size": cfg["batch_size"] * world}, device)
    data.train, data.val, data.test = shard(data.train), shard(data.val), shard(data.test) if data.test is not None else None
    raw = build_model(cfg["model"], data.num_classes, data.image_shape, cfg).to(device)
    # auto: NHWC suits cuDNN tensor cores and oneDNN's CPU convolutions (resnet8 on CPU, see BENCHMARKS.md)
    if cfg["channels_last"] is True or (cfg["channels_last"] == "auto" and device.type in ("cuda", "cpu") and is_convnet(raw)):
        raw = raw.to(memory_format=torch.channels_last)
        data.transform.channels_last = True
    model = wrap(raw, device)  # DistributedDataParallel under processes > 1
    model = torch.compile(model) if cfg["compile"] else model  # `raw` shares the weights; save it
    optimizer = build_optimizer(raw, cfg, device)
    steps_per_epoch = len(data.train) // cfg["accum_steps"]
    scheduler = build_scheduler(optimizer, cfg, steps_per_epoch * cfg["epochs"], steps_per_epoch)
    dtype = amp_dtype(cfg["amp"], device)
    return Run(cfg, device, data, raw, model, optimizer, scheduler, dtype, grad_scaler(device, dtype))


train.validate = validate
train.accum_steps = True  # honours config["accum_steps"]: an out-of-memory trial is retried with smaller micro-batches
train.prepare = prepare_dataset  # download: true fetches the data once, before a study starts
train.build = build  # hpsearch profile times steps of the run this objective would train


def _setup(cfg: dict) -> torch.device:
    device = prepare_process(cfg)
    if device.type == "cuda":
        if device.index is not None:
            torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True  # fixed input shapes: pick the fastest conv kernels once
        torch.set_float32_matmul_precision("high")  # TF32 matmuls
        torch.cuda.reset_peak_memory_stats(device)
    return device


def _peak_mem_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return rss / 2**20 if sys.platform == "darwin" else rss / 2**10


def _rng_state() -> dict:
    """Plain tensors, lists and numbers only, so torch.load(weights_only=True) accepts it."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None,
        "numpy": [kind, keys.tolist(), pos, has_gauss, gauss],
        "python": random.getstate(),
    }


def _checkpoint(epoch, model, optimizer, scheduler, scaler, best: float, metrics: dict) -> dict:
    """Live tensors, not copies: the reporter serializes them before training goes on."""
    return {
        "epoch": epoch,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        "scaler": scaler.state_dict() if scaler else None,
        "rng": _rng_state(),
        "best_val_acc": best,
        "metrics": metrics,
    }


def _restore(state: dict, model, optimizer, scheduler, scaler) -> None:
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    # the lr curve follows this run's config (e.g. more epochs); only the step count resumes
    scheduler.load_state_dict({**state["scheduler"], "lr_lambdas": [None] * len(scheduler.lr_lambdas)})
    for group, base, curve in zip(optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas, strict=True):
        group["lr"] = base * curve(scheduler.last_epoch)
    if scaler is not None and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    rng = state["rng"]
    torch.set_rng_state(rng["torch"])
    if rng.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
    kind, keys, pos, has_gauss, gauss = rng["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, gauss))
    random.setstate(rng["python"])


class _PrintReporter:
    trial_dir = None

    def report(self, epoch: int, metrics: dict[str, float]) -> None:
        print(f"epoch {epoch:3d} " + " ".join(f"{k}={v:.4g}" for k, v in metrics.items()), flush=True)


if __name__ == "__main__":
    from hpsearch.spec.safe_yaml import parse_value  # key=value read as a spec reads it: weight_decay=5e-4 is a number

    overrides = dict(arg.split("=", 1) for arg in sys.argv[1:])
    start = time.perf_counter()
    result = train({k: parse_value(v) for k, v in overrides.items()}, _PrintReporter())
    print({k: round(v, 4) for k, v in result.items()}, f"total {time.perf_counter() - start:.1f}s")
