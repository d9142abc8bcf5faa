"""Model registry: CIFAR-style ResNets, ResNet-18/34 for small images, a small CNN, an MLP, torchvision.

Every builder takes (num_classes, image_shape, config) so adding a model is adding one entry
to MODELS. Any other name is looked up in torchvision's classification models
(`mobilenet_v3_small`, or `tv:resnet50` to force torchvision's over ours).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hpsearch.parts.names import unknown_name
from hpsearch.parts.settings import setting

ImageShape = tuple[int, int, int]  # C, H, W
ModelBuilder = Callable[[int, ImageShape, dict[str, Any]], nn.Module]


class PadShortcut(nn.Module):
    """He et al. 2016 option A: subsample by `stride`, zero-pad the new channels (no params)."""

    def __init__(self, in_ch: int, out_ch: int, stride: int) -> None:
        super().__init__()
        self.stride, self.extra = stride, out_ch - in_ch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x[:, :, :: self.stride, :: self.stride]
        return F.pad(x, (0, 0, 0, 0, self.extra // 2, self.extra - self.extra // 2))


def _conv_bn(in_ch: int, out_ch: int, kernel: int, stride: int) -> nn.Sequential:
    conv = nn.Conv2d(in_ch, out_ch, kernel, stride, padding=kernel // 2, bias=False)
    return nn.Sequential(conv, nn.BatchNorm2d(out_ch))


class BasicBlock(nn.Module):
    def __init__(self, in_ch: int, out_ch: int, stride: int, shortcut: str) -> None:
        super().__init__()
        self.conv1, self.conv2 = _conv_bn(in_ch, out_ch, 3, stride), _conv_bn(out_ch, out_ch, 3, 1)
        if stride == 1 and in_ch == out_ch:
            self.shortcut: nn.Module = nn.Identity()
        elif shortcut == "A":
            self.shortcut = PadShortcut(in_ch, out_ch, stride)
        else:  # option B: 1×1 projection
            self.shortcut = _conv_bn(in_ch, out_ch, 1, stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv2(F.relu(self.conv1(x))) + self.shortcut(x))


class ResNet(nn.Module):
    """3×3 stride-1 stem (no max-pool), stages of BasicBlocks halving resolution, avg-pool head."""

    def __init__(self, blocks: list[int], widths: list[int], num_classes: int, in_channels: int, shortcut: str) -> None:
        super().__init__()
        self.stem = nn.Sequential(_conv_bn(in_channels, widths[0], 3, 1), nn.ReLU())
        layers, in_ch = [], widths[0]
        for stage, (n, width) in enumerate(zip(blocks, widths, strict=True)):
            for i in range(n):
                layers.append(BasicBlock(in_ch, width, 2 if stage > 0 and i == 0 else 1, shortcut))
                in_ch = width
        self.blocks = nn.Sequential(*layers)
        self.head = nn.Linear(in_ch, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        logits: torch.Tensor = self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
        return logits


def cifar_resnet(depth: int) -> ModelBuilder:
    """ResNet-(6n+2) for 32×32 inputs: 3 stages of n blocks, widths w, 2w, 4w."""
    n = (depth - 2) // 6

    def build(num_classes: int, shape: ImageShape, config: dict[str, Any]) -> nn.Module:
        w = int(config.get("width") or 16)
        shortcut = str(config.get("shortcut") or "A").upper()
        return ResNet([n] * 3, [w, 2 * w, 4 * w], num_classes, shape[0], shortcut)

    return build


def imagenet_resnet(blocks: list[int]) -> ModelBuilder:
    """ResNet-18/34 layout with a small-image stem; widths w, 2w, 4w, 8w; option-B shortcuts."""

    def build(num_classes: int, shape: ImageShape, config: dict[str, Any]) -> nn.Module:
        w = int(config.get("width") or 64)
        shortcut = str(config.get("shortcut") or "B").upper()
        return ResNet(blocks, [w, 2 * w, 4 * w, 8 * w], num_classes, shape[0], shortcut)

    return build


def mlp(num_classes: int, shape: ImageShape, config: dict[str, Any]) -> nn.Module:
    """Flatten -> [Linear, ReLU] per hidden size -> Linear. No normalization layers."""
    sizes = [shape[0] * shape[1] * shape[2], *(int(h) for h in setting(config, "mlp_hidden"))]
    layers: list[nn.Module] = [nn.Flatten()]
    for a, b in itertools.pairwise(sizes):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(sizes[-1], num_classes))


def cnn(num_classes: int, shape: ImageShape, config: dict[str, Any]) -> nn.Module:
    """Three [3×3 conv, BN, ReLU, 2×2 max-pool] stages of widths w, 2w, 4w, then dropout and a
    linear head on the flattened map: a small convnet for 28×28 images that trains fast on CPU."""
    c, h, w = shape
    if h < 8 or w < 8:
        raise ValueError(f"cnn halves the image three times; it needs at least 8×8 pixels, got {h}×{w}")
    width = int(config.get("width") or 16)
    layers: list[nn.Module] = []
    for stage in range(3):
        out_ch = width * 2**stage
        layers += [*_conv_bn(c, out_ch, 3, 1), nn.ReLU(), nn.MaxPool2d(2)]
        c = out_ch
    head = nn.Linear(c * (h // 8) * (w // 8), num_classes)
    return nn.Sequential(*layers, nn.Flatten(), nn.Dropout(float(config.get("dropout") or 0.0)), head)


CIFAR_DEPTHS = (8, 14, 20, 32, 44, 56, 110)
MODELS: dict[str, ModelBuilder] = {
    **{f"resnet{d}": cifar_resnet(d) for d in CIFAR_DEPTHS},
    "resnet18": imagenet_resnet([2, 2, 2, 2]),
    "resnet34": imagenet_resnet([3, 4, 6, 3]),
    "mlp": mlp,
    "cnn": cnn,
}


def _torchvision_names() -> list[str]:
    import torchvision

    names: list[str] = torchvision.models.list_models(module=torchvision.models)  # classification only
    return names


def model_problems(name: object) -> list[str]:
    if isinstance(name, str) and (name in MODELS or name.removeprefix("tv:") in _torchvision_names()):
        return []
    extra = "; or any torchvision classification model, e.g. mobilenet_v3_small, tv:resnet50"
    return [unknown_name("model", name, MODELS, extra)]


class _ChannelAdapter(nn.Module):
    """1×1 conv mapping the dataset's channels to the 3 that torchvision models expect."""

    def __init__(self, in_channels: int, model: nn.Module) -> None:
        super().__init__()
        self.adapt, self.model = nn.Conv2d(in_channels, 3, 1), model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.model(self.adapt(x))
        return out


def _torchvision_model(name: str, num_classes: int, shape: ImageShape) -> nn.Module:
    import torchvision

    model = torchvision.models.get_model(name, weights=None, num_classes=num_classes)
    return model if shape[0] == 3 else _ChannelAdapter(shape[0], model)


def build_model(name: str, num_classes: int, shape: ImageShape, config: dict[str, Any]) -> nn.Module:
    if name in MODELS:
        return MODELS[name](num_classes, shape, config)
    return _torchvision_model(name.removeprefix("tv:"), num_classes, shape)


def is_convnet(model: nn.Module) -> bool:
    return any(isinstance(m, nn.Conv2d) for m in model.modules())
