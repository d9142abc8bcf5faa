"""Objective vs textbook loop: training samples/s and final val accuracy, side by side on CPU.

"textbook" is the loop PyTorch tutorials teach: a Dataset of PIL images with per-sample
torchvision transforms (RandomCrop, ToTensor, Normalize), a DataLoader (shuffle, 2 workers,
as in the CIFAR-10 tutorial), fp32, zero_grad(), loss.item() every step, an eval loop that
calls .item() per batch. "hpsearch" is hpsearch.objectives.image_classification:train. Both get the
same data and split (hpsearch.parts.datasets loads it), model (hpsearch.parts.models), seeded
init, batch size, epochs, SGD + cosine per step, weight decay on all parameters, random-crop
padding (1 pixel on digits; none on synthetic data, whose random prototypes a shift would
erase, nor on Fashion-MNIST, whose tutorials use none: the textbook then runs ToTensor +
Normalize only) and torch threads. Runs alternate hpsearch, textbook, textbook, hpsearch, ...

Fashion-MNIST is the real data set, read from its gzipped idx files (Debian's
dataset-fashion-mnist in /usr/share/datasets/fashion-mnist): hpsearch with `dataset:
fashion_mnist` and `train_subset`, the textbook as a tutorial would, a Dataset of PIL images
over the decoded arrays with ToTensor + Normalize per sample (the same seeded subset, so both
loops see the same images). One epoch on a seeded, class-stratified 20,000 of the 54,000
training images keeps the whole run near 10 minutes on 2 shared cores (a textbook cnn epoch
takes 20-30 s here); validation is all 6,000 held-out images.

Columns: speed-up (train) is hpsearch's training samples/s (epoch loops only) over the faster
textbook variant's, speed-up (wall) the same for the whole call (data loading, model build and
evaluation included); data-only, one training epoch of batches with no model; hpsearch NCHW, the
objective with channels_last off (what that convnet default buys on this CPU).

    .venv/bin/python -m bench.objective_vs_textbook          # digits, synthetic 32x32 (2 repeats), fashion_mnist (3)
    .venv/bin/python -m bench.objective_vs_textbook --smoke
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from bench.common import Timer, interleave, median, parser, ratio, write_result

# dataset cases: hpsearch config keys; crop padding in pixels (applied by both loops)
CASES: dict[str, dict[str, Any]] = {
    "digits": {"dataset": "digits", "aug_crop_padding": 1, "batch_size": 64, "epochs": 10},
    # random pixel prototypes have no spatial structure: a shifted crop would erase the signal, so no crop here
    "synthetic32": {"dataset": "synthetic", "synthetic_samples": 1024, "aug_crop_padding": 0, "batch_size": 64, "epochs": 5},
    # real 28x28 images; batch 64 as in PyTorch's Fashion-MNIST quickstart; a subset keeps the run near 10 minutes
    "fashion_mnist": {"dataset": "fashion_mnist", "train_subset": 20000, "aug_crop_padding": 0, "batch_size": 64, "epochs": 1},
}
MODELS: dict[str, tuple[str, ...]] = {  # resnet8 on 20,000 28x28 images would take minutes an epoch here
    "digits": ("resnet8", "mlp"),
    "synthetic32": ("resnet8", "mlp"),
    "fashion_mnist": ("mlp", "cnn"),
}
REPEATS = {"digits": 2, "synthetic32": 2, "fashion_mnist": 3}  # interleaved runs per row, seeds 0, 1, ...: ~10 minutes in all on 2 cores
WORKERS = [2, 0]  # textbook DataLoader workers, one variant each (the CIFAR-10 tutorial uses 2)
THREADS = 1  # torch threads for both loops: on a shared machine 2 spin-waiting OpenMP threads swing 5-10x with other jobs' load
WARMUP_SUBSET = {"train_subset": 512, "val_subset": 256}  # warm-up runs are 1 epoch, on this subset where the case has one
SMOKE_SUBSET = {"train_subset": 256, "val_subset": 128, "epochs": 1}  # fashion_mnist in --smoke: seconds
COMMON = {
    "optimizer": "sgd",
    "lr": 0.05,
    "momentum": 0.9,
    "weight_decay": 5e-4,
    "wd_norm_bias": True,
    "schedule": "cosine",
    "aug_hflip": False,
    "amp": "off",
    "device": "cpu",
    "val_fraction": 0.1,
    "split_seed": 0,
}


class _History:
    trial_dir = None

    def __init__(self) -> None:
        self.epochs: list[dict[str, float]] = []

    def report(self, epoch: int, metrics: dict[str, float]) -> None:
        self.epochs.append(metrics)


def run_hpsearch(config: dict[str, Any]) -> dict[str, Any]:
    import torch

    from hpsearch.parts.datasets import build_data
    from objectives.image_classification import train

    history = _History()
    with Timer() as t:
        out = train(dict(config), history)
    data = build_data(config, torch.device("cpu"))  # only to count samples per epoch (not timed)
    samples = len(data.train) * config["batch_size"]
    train_s = sum(samples / e["samples_per_s"] for e in history.epochs)
    return {
        "train_samples_per_s": samples * len(history.epochs) / train_s,
        "wall_s": t.s,
        "val_acc": out["val_acc"],
    }


# ---------------------------------------------------------------------------- the textbook loop


def _pil_images(images: Any) -> list[Any]:
    from PIL import Image

    arrays = images.permute(0, 2, 3, 1).numpy()  # N,H,W,C uint8
    return [Image.fromarray(a[..., 0] if a.shape[-1] == 1 else a) for a in arrays]


class PilDataset:
    """torch.utils.data.Dataset protocol: (transform(PIL image), label)."""

    def __init__(self, split: Any, transform: Any):
        self.images, self.labels, self.transform = _pil_images(split.images), split.labels.tolist(), transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[Any, int]:
        return self.transform(self.images[i]), self.labels[i]


def textbook_loaders(config: dict[str, Any], workers: int) -> tuple[Any, Any, int, tuple[int, int, int]]:
    import torch
    from torchvision import transforms

    from hpsearch.parts.datasets import DATASETS, carve, subsample

    splits = DATASETS[config["dataset"]].load(config)
    train, val = carve(splits.train, config["val_fraction"], config["split_seed"])
    # the objective's train_subset/val_subset: the same seeded images, so both loops train on one set
    train = subsample(train, config.get("train_subset"), config["split_seed"], "train_subset")
    val = subsample(val, config.get("val_subset"), config["split_seed"], "val_subset")
    size = splits.image_shape[1]
    normalize = transforms.Normalize(splits.mean, splits.std)
    crop = [transforms.RandomCrop(size, padding=config["aug_crop_padding"])] if config["aug_crop_padding"] else []
    train_tf = transforms.Compose([*crop, transforms.ToTensor(), normalize])
    val_tf = transforms.Compose([transforms.ToTensor(), normalize])
    bs = config["batch_size"]
    loader: Any = torch.utils.data.DataLoader  # PilDataset is a map-style dataset by protocol, not by class
    train_loader = loader(PilDataset(train, train_tf), batch_size=bs, shuffle=True, num_workers=workers)
    val_loader = loader(PilDataset(val, val_tf), batch_size=bs, shuffle=False, num_workers=workers)
    return train_loader, val_loader, splits.num_classes, splits.image_shape


def run_textbook(config: dict[str, Any], workers: int) -> dict[str, Any]:
    import numpy as np
    import torch
    from torch import nn

    from hpsearch.parts.models import build_model

    with Timer() as t:
        torch.set_num_threads(config["threads"])
        random.seed(config["seed"])
        np.random.seed(config["seed"])
        torch.manual_seed(config["seed"])
        train_loader, val_loader, num_classes, shape = textbook_loaders(config, workers)
        model = build_model(config["model"], num_classes, shape, config)
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"], weight_decay=config["weight_decay"])
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=config["epochs"] * len(train_loader))
        train_s, samples = 0.0, 0
        for _epoch in range(config["epochs"]):
            model.train()
            running_loss, start = 0.0, time.perf_counter()
            for inputs, labels in train_loader:
                optimizer.zero_grad()
                loss = criterion(model(inputs), labels)
                loss.backward()
                optimizer.step()
                scheduler.step()
                running_loss += loss.item()
                samples += len(labels)
            train_s += time.perf_counter() - start
            model.eval()
            correct = total = 0
            with torch.no_grad():
                for inputs, labels in val_loader:
                    correct += (model(inputs).argmax(1) == labels).sum().item()
                    total += len(labels)
    return {"train_samples_per_s": samples / train_s, "wall_s": t.s, "val_acc": correct / total}


# ---------------------------------------------------------------------------- where the textbook's time goes


def data_only(config: dict[str, Any], workers: int) -> dict[str, float]:
    """Seconds for one training epoch of batches alone (no model), in each pipeline."""
    import torch

    from hpsearch.parts.datasets import build_data

    train_loader = textbook_loaders(config, workers)[0]
    with Timer() as tb:
        for _ in train_loader:
            pass
    loader = build_data(config, torch.device("cpu")).train
    with Timer() as hp:
        for _ in loader:
            pass
    return {"textbook_data_s": tb.s, "hpsearch_data_s": hp.s, "train_images": len(train_loader.dataset)}


def variants_for(configs: list[dict[str, Any]], model: str, workers: list[int]) -> dict[str, Callable[..., dict[str, Any]]]:
    """name -> fn(repeat) running configs[repeat] in that variant."""
    variants: dict[str, Callable[..., dict[str, Any]]] = {"hpsearch": lambda r: run_hpsearch(configs[r])}
    if model != "mlp":  # the objective's default puts convnets in channels_last; this shows what that buys
        variants["hpsearch_nchw"] = lambda r: run_hpsearch({**configs[r], "channels_last": False})
    for w in workers:
        variants[f"textbook_w{w}"] = lambda r, w=w: run_textbook(configs[r], w)
    return variants


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Speed-ups against the faster textbook variant; accuracies as means over the runs."""
    sps = {k: median([m["train_samples_per_s"] for m in v]) for k, v in runs.items()}
    wall = {k: median([m["wall_s"] for m in v]) for k, v in runs.items()}
    acc = {k: sum(m["val_acc"] for m in v) / len(v) for k, v in runs.items()}
    textbooks = [k for k in runs if k.startswith("textbook")]
    best = max(textbooks, key=lambda k: sps[k])
    extra = {"channels_last_gain": ratio(sps["hpsearch"], sps["hpsearch_nchw"])} if "hpsearch_nchw" in runs else {}
    return {
        **extra,
        "samples_per_s": sps,
        "wall_s": wall,
        "val_acc": acc,
        "fastest_textbook": best,
        "speedup_train": ratio(sps["hpsearch"], sps[best]),
        "speedup_wall": ratio(min(wall[k] for k in textbooks), wall["hpsearch"]),
        "max_acc_diff_points": max(100 * abs(acc["hpsearch"] - acc[k]) for k in textbooks),
    }


def main(argv: list[str] | None = None) -> None:
    from hpsearch.parts.datasets import DATASETS

    args = parser(__doc__).parse_args(argv)
    cases, models, repeats, workers, skipped = dict(CASES), dict(MODELS), dict(REPEATS), WORKERS, []
    if args.smoke:  # one repeat, one textbook variant, no warm-up runs
        cases, models, repeats, workers = {"digits": {**CASES["digits"], "epochs": 1}}, {"digits": ("mlp",)}, {"digits": 1}, [0]
        fashion = {**CASES["fashion_mnist"], **SMOKE_SUBSET}
        if DATASETS["fashion_mnist"].missing(fashion) is None:  # the real files: a tiny subset through both loops
            cases["fashion_mnist"], models["fashion_mnist"], repeats["fashion_mnist"] = fashion, ("cnn",), 1
        else:
            skipped.append("fashion_mnist skipped: no idx files (apt-get install dataset-fashion-mnist)")
    rows, figures = [], {}
    keys = ["hpsearch", "hpsearch_nchw", *(f"textbook_w{w}" for w in workers)]
    for case, case_cfg in cases.items():
        for model in models[case]:
            print(f"{case} / {model}", flush=True)
            n = repeats[case]
            configs = [{**COMMON, **case_cfg, "model": model, "seed": seed, "threads": THREADS} for seed in range(n)]
            if not args.smoke:  # first-call costs (imports, allocator, oneDNN kernels) out of the timed runs: a short run each
                warm = {**configs[0], "epochs": 1, **(WARMUP_SUBSET if "train_subset" in case_cfg else {})}
                for fn in variants_for([warm], model, workers).values():
                    fn(0)
            summary = summarize(interleave(variants_for(configs, model, workers), n))
            split = data_only(configs[0], workers[0])
            figures[f"{case}_{model}"] = {
                **summary,
                **split,
                "epochs": configs[0]["epochs"],
                "batch_size": configs[0]["batch_size"],
                "repeats": n,
            }
            sps, acc = summary["samples_per_s"], summary["val_acc"]
            rows.append(
                [
                    case,
                    model,
                    *(f"{sps[k]:.0f}" if k in sps else "-" for k in keys),
                    f"{summary['speedup_train']:.2f}x",
                    f"{summary['speedup_wall']:.2f}x",
                    " / ".join(f"{100 * acc[k]:.1f}" if k in acc else "-" for k in keys),
                    f"{split['textbook_data_s']:.2f} / {split['hpsearch_data_s']:.3f}",
                ]
            )
    names = ["hpsearch", "hpsearch NCHW", *(f"textbook w={w}" for w in workers)]
    speedups = [f["speedup_train"] for f in figures.values()]
    diffs = [f["max_acc_diff_points"] for f in figures.values()]
    agree = max(diffs) <= 1.0
    write_result(
        args,
        "objective_vs_textbook",
        "Objective vs textbook PyTorch loop (CPU)",
        headline=f"training samples/s {min(speedups):.2f}x to {max(speedups):.2f}x the faster textbook loop; "
        f"val accuracy within {max(diffs):.1f} points",
        goal="≥ 2× the textbook loop's training samples/s on CPU; final val accuracy within 1 point",
        goal_met=agree and min(speedups) >= 2.0,
        figures={**figures, "accuracy_within_1_point": agree, "repeats": repeats, "threads": THREADS},
        table={
            "columns": [
                "data",
                "model",
                *(f"{n} samples/s" for n in names),
                "speed-up (train)",
                "speed-up (wall)",
                "val acc % (" + " / ".join(names) + ")",
                "data-only epoch s textbook / hpsearch",
            ],
            "rows": rows,
        },
        notes=[*(f"{case}: {', '.join(f'{k}={v}' for k, v in cfg.items() if k != 'dataset')}" for case, cfg in cases.items()), *skipped],
    )


if __name__ == "__main__":
    main()
