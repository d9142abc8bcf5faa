from __future__ import annotations

import pytest
import torch

from hpsearch.parts.models import build_model
from hpsearch.parts.optim import OPTIMIZERS, build_optimizer

CPU = torch.device("cpu")


def _bn_and_conv(model: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    return model.stem[0][1].weight, model.stem[0][0].weight


@pytest.mark.parametrize("wd_norm_bias", [False, True])
def test_weight_decay_skips_norm_and_bias_unless_asked(wd_norm_bias: bool) -> None:
    model = build_model("resnet8", 10, (3, 8, 8), {})
    config = {"optimizer": "sgd", "lr": 0.5, "momentum": 0.0, "weight_decay": 0.1, "wd_norm_bias": wd_norm_bias}
    optimizer = build_optimizer(model, config, CPU)
    bn, conv = (t.detach().clone() for t in _bn_and_conv(model))
    for p in model.parameters():
        p.grad = torch.zeros_like(p)  # only weight decay moves the weights
    optimizer.step()
    new_bn, new_conv = _bn_and_conv(model)
    assert torch.allclose(new_conv, conv * (1 - 0.5 * 0.1))
    assert torch.allclose(new_bn, bn * (1 - 0.5 * 0.1)) if wd_norm_bias else torch.equal(new_bn, bn)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_each_optimizer_lowers_the_loss_on_a_fixed_batch(name: str) -> None:
    torch.manual_seed(0)
    model = build_model("mlp", 3, (1, 4, 4), {"mlp_hidden": [16]})
    x, y = torch.randn(32, 1, 4, 4), torch.randint(0, 3, (32,))
    lr = {"sgd": 0.1, "adagrad": 0.05}.get(name, 0.01)
    optimizer = build_optimizer(model, {"optimizer": name, "lr": lr}, CPU)
    losses = []
    for _ in range(30):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    assert losses[-1] < 0.7 * losses[0]


def test_optimizer_hyperparameters_reach_torch() -> None:
    model = build_model("mlp", 3, (1, 2, 2), {})
    sgd = build_optimizer(model, {"optimizer": "sgd", "lr": 0.3, "nesterov": True}, CPU).param_groups[0]
    adamw = build_optimizer(model, {"optimizer": "adamw", "beta2": 0.95, "eps": 1e-6}, CPU).param_groups[0]
    rms = build_optimizer(model, {"optimizer": "rmsprop", "alpha": 0.9}, CPU).param_groups[0]
    assert (sgd["lr"], sgd["momentum"], sgd["nesterov"]) == (0.3, 0.9, True)
    assert (adamw["betas"], adamw["eps"]) == ((0.9, 0.95), 1e-6)
    assert (rms["alpha"], rms["momentum"], rms["eps"]) == (0.9, 0.0, 1e-8)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("fused", [True, False])
def test_fused_optimizer_picks_the_fused_kernel_on_cpu_where_torch_has_one(name: str, fused: bool) -> None:
    model = build_model("mlp", 3, (1, 2, 2), {})
    group = build_optimizer(model, {"optimizer": name, "fused_optimizer": fused}, CPU).param_groups[0]
    assert bool(group.get("fused")) is (fused and name in ("sgd", "adam", "adamw"))


@pytest.mark.parametrize("name", ["sgd", "adam", "adamw"])
def test_fused_and_looped_kernels_take_the_same_steps(name: str) -> None:
    # The same update rule with the arithmetic in another order: equal to rounding after a few steps.
    x, y = torch.randn(16, 1, 4, 4), torch.randint(0, 3, (16,))
    weights = {}
    for fused in (True, False):
        torch.manual_seed(0)
        model = build_model("mlp", 3, (1, 4, 4), {"mlp_hidden": [8]})
        optimizer = build_optimizer(model, {"optimizer": name, "lr": 0.01, "weight_decay": 0.01, "fused_optimizer": fused}, CPU)
        for _ in range(5):
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        weights[fused] = [p.detach().clone() for p in model.parameters()]
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(weights[True], weights[False], strict=True))
