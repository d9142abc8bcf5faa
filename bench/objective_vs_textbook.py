"""Objective vs textbook loop: training samples/s and final val accuracy, side by side on CPU.

"textbook" is the loop PyTorch tutorials teach: a Dataset of PIL images with per-sample
torchvision transforms (RandomCrop, ToTensor, Normalize), a DataLoader (shuffle, 2 workers,
as in the CIFAR-10 tutorial), fp32, zero_grad(), loss.item() every step, an eval loop that
calls .item() per batch. "hpsearch" is objectives.image_classification:train. Both get the
same data and split (hpsearch.train.data loads it), model (hpsearch.train.models), seeded
init, batch size, epochs, SGD + cosine per step, weight decay on all parameters, random-crop
padding and torch threads. Runs alternate hpsearch, textbook, textbook, hpsearch, ...

    .venv/bin/python bench/objective_vs_textbook.py          # digits + synthetic 32x32, resnet8 + mlp, 3 repeats
    .venv/bin/python bench/objective_vs_textbook.py --smoke
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from common import Timer, interleave, median, parser, ratio, write_result

# dataset cases: hpsearch config keys; crop padding in pixels (applied by both loops)
CASES: dict[str, dict[str, Any]] = {
    "digits": {"dataset": "digits", "aug_crop_padding": 1, "batch_size": 64, "epochs": 10},
    "synthetic32": {"dataset": "synthetic", "synthetic_samples": 1024, "aug_crop_padding": 2, "batch_size": 64, "epochs": 3},
}
MODELS = ("resnet8", "mlp")
COMMON = {
    "optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-4, "wd_norm_bias": True,
    "schedule": "cosine", "aug_hflip": False, "amp": "off", "device": "cpu", "val_fraction": 0.1, "split_seed": 0,
}


def config_for(case: str, model: str, seed: int, threads: int) -> dict[str, Any]:
    return {**COMMON, **CASES[case], "model": model, "seed": seed, "threads": threads}


class _History:
    trial_dir = None

    def __init__(self) -> None:
        self.epochs: list[dict[str, float]] = []

    def report(self, epoch: int, metrics: dict[str, float]) -> None:
        self.epochs.append(metrics)


def run_hpsearch(config: dict[str, Any]) -> dict[str, Any]:
    from hpsearch.train.data import build_data
    from objectives.image_classification import train

    import torch

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

    from hpsearch.train.data import DATASETS, carve

    splits = DATASETS[config["dataset"]].load(config)
    train, val = carve(splits.train, config["val_fraction"], config["split_seed"])
    size = splits.image_shape[1]
    normalize = transforms.Normalize(splits.mean, splits.std)
    train_tf = transforms.Compose([transforms.RandomCrop(size, padding=config["aug_crop_padding"]), transforms.ToTensor(), normalize])
    val_tf = transforms.Compose([transforms.ToTensor(), normalize])
    bs = config["batch_size"]
    train_loader = torch.utils.data.DataLoader(PilDataset(train, train_tf), batch_size=bs, shuffle=True, num_workers=workers)
    val_loader = torch.utils.data.DataLoader(PilDataset(val, val_tf), batch_size=bs, shuffle=False, num_workers=workers)
    return train_loader, val_loader, splits.num_classes, splits.image_shape


def run_textbook(config: dict[str, Any], workers: int) -> dict[str, Any]:
    import numpy as np
    import torch
    from torch import nn

    from hpsearch.train.models import build_model

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

    from hpsearch.train.data import build_data

    train_loader = textbook_loaders(config, workers)[0]
    with Timer() as tb:
        for _ in train_loader:
            pass
    loader = build_data(config, torch.device("cpu")).train
    with Timer() as hp:
        for _ in loader:
            pass
    return {"textbook_data_s": tb.s, "hpsearch_data_s": hp.s}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--workers", type=int, default=2, help="textbook DataLoader workers (the CIFAR-10 tutorial uses 2)")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="torch threads for both loops")
    p.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    p.add_argument("--models", nargs="+", default=list(MODELS))
    args = p.parse_args()
    started = time.perf_counter()
    if args.smoke:
        args.repeats, args.models = 1, ["mlp"]
        for case in CASES.values():
            case["epochs"] = 1
    rows, figures, agree, fast = [], {}, True, []
    for case in args.cases:
        for model in args.models:
            print(f"{case} / {model}", flush=True)
            configs = [config_for(case, model, seed, args.threads) for seed in range(args.repeats)]
            if not args.smoke:  # first-call costs (imports, allocator, oneDNN kernels) out of the timed runs
                run_hpsearch({**configs[0], "epochs": 1}), run_textbook({**configs[0], "epochs": 1}, args.workers)
            runs = interleave(
                {"hpsearch": lambda r: run_hpsearch(configs[r]), "textbook": lambda r: run_textbook(configs[r], args.workers)},
                args.repeats,
            )
            hp, tb = runs["hpsearch"], runs["textbook"]
            speed = ratio(median([m["train_samples_per_s"] for m in hp]), median([m["train_samples_per_s"] for m in tb]))
            wall = ratio(median([m["wall_s"] for m in tb]), median([m["wall_s"] for m in hp]))
            acc_hp = sum(m["val_acc"] for m in hp) / len(hp)
            acc_tb = sum(m["val_acc"] for m in tb) / len(tb)
            split = data_only(configs[0], args.workers)
            key = f"{case}_{model}"
            figures[key] = {
                "hpsearch_samples_per_s": median([m["train_samples_per_s"] for m in hp]),
                "textbook_samples_per_s": median([m["train_samples_per_s"] for m in tb]),
                "speedup_train": speed,
                "speedup_wall": wall,
                "hpsearch_val_acc": acc_hp,
                "textbook_val_acc": acc_tb,
                "acc_diff_points": 100 * (acc_hp - acc_tb),
                **split,
                "epochs": configs[0]["epochs"],
                "batch_size": configs[0]["batch_size"],
            }
            agree = agree and abs(acc_hp - acc_tb) <= 0.01
            fast.append(speed >= 2.0)
            rows.append([
                case, model, f"{figures[key]['hpsearch_samples_per_s']:.0f}", f"{figures[key]['textbook_samples_per_s']:.0f}",
                f"{speed:.2f}x", f"{wall:.2f}x", f"{100 * acc_hp:.1f} / {100 * acc_tb:.1f}",
                f"{split['textbook_data_s']:.2f} / {split['hpsearch_data_s']:.3f}",
            ])
    notes = [
        f"Medians of {args.repeats} interleaved runs per row (seeds 0..{args.repeats - 1}); accuracies are means over the same runs; "
        f"torch threads {args.threads}, textbook DataLoader workers {args.workers}.",
        "speed-up (train): training samples/s, epoch loops only; speed-up (wall): whole call incl. data loading, model build and evaluation.",
        "data-only: one training epoch of batches with no model, textbook / hpsearch (seconds): the part of a step the hpsearch pipeline removes.",
    ]
    goal_met = agree and all(fast) if not args.smoke else None
    write_result(
        args.out, "objective_vs_textbook", "Objective vs textbook PyTorch loop (CPU)", smoke=args.smoke,
        goal="≥ 2× the textbook loop's training samples/s on CPU; final val accuracy within 1 point",
        goal_met=goal_met, figures={**figures, "accuracy_within_1_point": agree, "repeats": args.repeats, "threads": args.threads},
        table={"columns": ["data", "model", "hpsearch samples/s", "textbook samples/s", "speed-up (train)", "speed-up (wall)",
                           "val acc % hpsearch / textbook", "data-only epoch s textbook / hpsearch"], "rows": rows},
        notes=notes, started=started,
    )


if __name__ == "__main__":
    main()
