"""Pre-activation CIFAR ResNet: structure, roles, config validation, and a short training run."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from workloads.data.images import DeviceImageLoader, EvalSet, ImageArrays
from workloads.models.resnet import PreActBlock, ResNet, ResNetConfig, stage_blocks
from workloads.roles import Role, check_roles, named_roles

torch.set_num_threads(1)


@pytest.mark.parametrize(
    ("depth", "per_stage"), [(8, (3, 3, 2)), (16, (6, 5, 5)), (32, (11, 11, 10)), (9, (3, 3, 3)), (3, (1, 1, 1))]
)
def test_depth_builds_that_many_blocks(depth: int, per_stage: tuple[int, int, int]) -> None:
    cfg = ResNetConfig(width=1, depth=depth, base_channels=4, num_classes=10)
    model = ResNet(cfg)
    assert cfg.blocks_per_stage == per_stage == stage_blocks(depth)
    assert len(model.blocks) == depth
    assert sum(isinstance(m, PreActBlock) for m in model.modules()) == depth
    assert tuple(len(s) for s in model.stages) == per_stage
    assert model(torch.randn(2, 3, 32, 32)).shape == (2, 10)


def test_width_multiplies_channels_and_stages_downsample() -> None:
    model = ResNet(ResNetConfig(width=3, depth=6, base_channels=4, num_classes=7))
    assert model.config.stage_channels == (12, 24, 48)
    shapes = []
    h = model.stem(torch.randn(1, 3, 32, 32))
    for stage in model.stages:
        h = stage(h)
        shapes.append(tuple(h.shape[1:]))
    assert shapes == [(12, 32, 32), (24, 16, 16), (48, 8, 8)]
    assert model.head.in_features == 48 and model.head.out_features == 7


@pytest.mark.parametrize("norm", ["batch", "group", "none"])
@pytest.mark.parametrize("stem_role", ["embedding", "hidden"])
def test_every_parameter_has_the_right_role(norm: str, stem_role: str) -> None:
    model = ResNet(ResNetConfig(width=1, depth=8, base_channels=8, norm=norm, stem_role=stem_role))
    check_roles(model)
    roles = {name: role for name, _, role in named_roles(model)}
    assert len(roles) == len(list(model.parameters()))
    assert roles["stem.weight"] == Role(stem_role)
    assert roles["head.weight"] == Role.OUTPUT and roles["head.bias"] == Role.VECTOR
    for name, param, role in named_roles(model):
        if name.startswith("stages."):
            assert role == (Role.HIDDEN if param.ndim == 4 else Role.VECTOR), name
    n_norm_params = sum(1 for name in roles if "norm" in name)
    assert n_norm_params == (0 if norm == "none" else 2 * (2 * 8 + 1))
    n_hidden = 2 * 8 + 2 + (stem_role == "hidden")  # block convs + two projections (+ stem)
    assert sum(1 for r in roles.values() if r == Role.HIDDEN) == n_hidden


def test_norm_layers_are_the_configured_kind() -> None:
    def kinds(norm: str) -> set[type]:
        return {type(m) for m in ResNet(ResNetConfig(depth=3, base_channels=8, norm=norm)).modules()}

    assert nn.BatchNorm2d in kinds("batch") and nn.GroupNorm not in kinds("batch")
    assert nn.GroupNorm in kinds("group") and nn.BatchNorm2d not in kinds("group")
    assert not {nn.BatchNorm2d, nn.GroupNorm} & kinds("none")


def test_multipliers_scale_branches_and_logits() -> None:
    torch.manual_seed(0)
    x = torch.randn(3, 3, 32, 32)
    base = ResNet(ResNetConfig(depth=6, base_channels=4, norm="none"))
    scaled = ResNet(ResNetConfig(depth=6, base_channels=4, norm="none", output_multiplier=0.25))
    scaled.load_state_dict(base.state_dict())
    assert torch.allclose(scaled(x), 0.25 * base(x), atol=1e-6)
    # residual_multiplier 0: the blocks' second convs no longer reach the output
    dead = ResNet(ResNetConfig(depth=6, base_channels=4, norm="none", residual_multiplier=0.0))
    before = dead(x)
    with torch.no_grad():
        for block in dead.blocks:
            block.conv2.weight.normal_()
    assert torch.equal(dead(x), before)
    assert all(b.residual_multiplier == 0.125 for b in ResNet(ResNetConfig(residual_multiplier=1 / 8)).blocks)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"depth": 2}, "depth"),
        ({"width": 0}, "width"),
        ({"width": 1.5}, "width"),
        ({"norm": "layer"}, "norm"),
        ({"stem_role": "output"}, "stem_role"),
        ({"residual_multiplier": float("nan")}, "residual_multiplier"),
        ({"norm": "group", "base_channels": 12, "norm_groups": 8}, "norm_groups"),
    ],
)
def test_bad_config_names_field_value_and_fix(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=rf"ResNetConfig\.{field}=.*use|ResNetConfig\.{field}=.*pick") as err:
        ResNetConfig(**kwargs)
    assert repr(kwargs.get(field, kwargs.get("norm_groups"))) in str(err.value)


def _learnable_images(n: int, seed: int) -> ImageArrays:
    """Each of 10 classes is a distinct colour/stripe pattern plus noise: learnable in a few steps."""
    proto = torch.randint(40, 216, (10, 3, 1, 1), generator=torch.Generator().manual_seed(1234)).float()
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (n,), generator=g)
    stripes = (torch.arange(32).view(1, 1, 1, 32) % (labels.view(n, 1, 1, 1) + 2) == 0).float() * 60
    noise = torch.randn(n, 3, 32, 32, generator=g) * 20
    imgs = (proto[labels] + stripes + noise).clamp(0, 255).to(torch.uint8)
    return ImageArrays(imgs, labels, 10, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25), name="synthetic")


def test_eight_block_resnet_trains_20_steps_and_lowers_the_loss() -> None:
    torch.manual_seed(0)
    model = ResNet(ResNetConfig(width=1, depth=8, base_channels=8, num_classes=10, residual_multiplier=1 / 8))
    loader = DeviceImageLoader(_learnable_images(512, seed=0), batch_size=32, augment=True, seed=0)
    eval_set = EvalSet(_learnable_images(128, seed=1), batch_size=64)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    before = eval_set.evaluate(model)
    losses = []
    for _ in range(20):
        x, y = loader.next_batch()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    after = eval_set.evaluate(model)
    assert all(torch.isfinite(torch.tensor(losses)))
    assert sum(losses[-5:]) / 5 < 0.7 * sum(losses[:5]) / 5, losses
    assert after.loss < before.loss and after.accuracy > before.accuracy, (before, after)
