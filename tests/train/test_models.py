from __future__ import annotations

import pytest
import torch

from hpsearch.parts.models import MODELS, build_model, is_convnet, model_problems


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(("name", "millions"), [("resnet20", 0.27), ("resnet56", 0.85), ("resnet110", 1.7)])
def test_cifar_resnets_match_he_et_al_parameter_counts(name: str, millions: float) -> None:
    model = build_model(name, 10, (3, 32, 32), {})  # option A shortcuts, width 16 (Table 6 of the paper)
    assert n_params(model) / 1e6 == pytest.approx(millions, rel=0.03)


def test_resnet18_small_image_variant_has_11_million_parameters() -> None:
    model = build_model("resnet18", 10, (3, 32, 32), {})
    assert n_params(model) / 1e6 == pytest.approx(11.17, rel=0.01)
    assert model.stem[0][0].stride == (1, 1)  # 3×3 stride-1 stem, no max-pool


@pytest.mark.parametrize("name", sorted(set(MODELS) - {"resnet110", "resnet56", "resnet44", "resnet34"}))
@pytest.mark.parametrize("shape", [(3, 32, 32), (1, 8, 8)])
def test_registered_models_give_one_logit_per_class(name: str, shape: tuple[int, int, int]) -> None:
    model = build_model(name, 7, shape, {"width": 4, "mlp_hidden": [8, 8]})
    assert model(torch.zeros(2, *shape)).shape == (2, 7)


def test_width_and_option_b_shortcut_are_honoured() -> None:
    narrow = build_model("resnet20", 10, (3, 32, 32), {"width": 8})
    proj = build_model("resnet20", 10, (3, 32, 32), {"shortcut": "B"})
    assert narrow.head.in_features == 32
    assert n_params(proj) > n_params(build_model("resnet20", 10, (3, 32, 32), {}))


def test_torchvision_model_by_name_with_one_channel_input() -> None:
    model = build_model("tv:mobilenet_v3_small", 5, (1, 32, 32), {})
    assert model(torch.zeros(2, 1, 32, 32)).shape == (2, 5) and is_convnet(model)
    assert model_problems("mobilenet_v3_small") == [] and model_problems("tv:resnet50") == []


def test_unknown_model_message_suggests_the_close_name() -> None:
    [message] = model_problems("resnt20")
    assert "unknown model 'resnt20'" in message and "did you mean 'resnet20'" in message
    assert "mobilenet_v3_small" in message and "resnet110" in message
    assert not is_convnet(build_model("mlp", 3, (1, 2, 2), {}))


def test_cnn_widths_double_per_stage_and_dropout_is_applied_only_in_training() -> None:
    model = build_model("cnn", 10, (1, 28, 28), {"width": 16, "dropout": 0.5})
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [c.out_channels for c in convs] == [16, 32, 64] and model[-1].in_features == 64 * 3 * 3
    x = torch.randn(4, 1, 28, 28)
    model.eval()
    assert torch.equal(model(x), model(x))
    model.train()
    assert not torch.equal(model(x), model(x))  # dropout draws a new mask each pass


def test_cnn_refuses_images_it_would_pool_away() -> None:
    with pytest.raises(ValueError, match="at least 8×8 pixels, got 4×4"):
        build_model("cnn", 10, (1, 4, 4), {})
