"""Pre-activation CIFAR ResNet (He et al., arXiv 1603.05027) with width and depth knobs.

Layout: stem 3x3 conv -> three stages of pre-activation basic blocks (channels base*k, 2*base*k,
4*base*k; the first block of stages 2 and 3 has stride 2 and a 1x1 projection shortcut) ->
norm -> ReLU -> global average pool -> linear head.

- width = k, the channel multiplier (``ResNetConfig.width``);
- depth = K, the total number of residual blocks (``ResNetConfig.depth``), spread over the three
  stages as evenly as possible, the earlier stages taking the remainder: 8 -> (3, 3, 2),
  16 -> (6, 5, 5), 32 -> (11, 11, 10), 9 -> (3, 3, 3). Every stage needs at least one block
  (it carries the stride), so depth >= 3.
- every block computes ``shortcut(x) + residual_multiplier * F(x)`` (the depth
  parametrization, e.g. 1/K branch scaling, arXiv 2610.14344, sets the multiplier);
- logits = ``output_multiplier * head(features)`` (the width parametrization sets it).

Roles: stem conv ``embedding`` (``hidden`` when ``stem_role="hidden"``), block and projection
convs ``hidden``, head weight ``output``, head bias and norm gains/biases ``vector``. Convs have
no bias. Init is plain (Kaiming-normal fan-in for convs, N(0, 1/fan_in) for the head, norms at
1/0); a parametrization re-initializes per parameter from the roles and fans.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from workloads.roles import Role, tag, tag_module

NORMS = ("batch", "group", "none")
STEM_ROLES = (Role.EMBEDDING.value, Role.HIDDEN.value)


@dataclass(frozen=True)
class ResNetConfig:
    width: int = 1  # channel multiplier k
    depth: int = 8  # total residual blocks K
    base_channels: int = 16
    num_classes: int = 100
    in_channels: int = 3
    norm: str = "batch"  # "batch" | "group" | "none"
    residual_multiplier: float = 1.0
    output_multiplier: float = 1.0
    stem_role: str = "embedding"  # "embedding" | "hidden"
    norm_groups: int = 8  # GroupNorm groups; base_channels * width must be divisible by it

    def __post_init__(self) -> None:
        def bad(field: str, value: object, fix: str) -> ValueError:
            return ValueError(f"ResNetConfig.{field}={value!r} is invalid: {fix}")

        for field in ("width", "base_channels", "num_classes", "in_channels", "norm_groups"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise bad(field, value, "use a positive integer")
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 3:
            raise bad("depth", self.depth, "use an integer >= 3 (total residual blocks, >= 1 per stage)")
        if self.norm not in NORMS:
            raise bad("norm", self.norm, f"use one of {list(NORMS)}")
        if self.stem_role not in STEM_ROLES:
            raise bad("stem_role", self.stem_role, f"use one of {list(STEM_ROLES)}")
        for field in ("residual_multiplier", "output_multiplier"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise bad(field, value, "use a finite number")
        if self.norm == "group" and (self.base_channels * self.width) % self.norm_groups:
            raise bad(
                "norm_groups",
                self.norm_groups,
                f"GroupNorm needs base_channels*width={self.base_channels * self.width} divisible by "
                f"norm_groups; pick a divisor of it",
            )

    @property
    def blocks_per_stage(self) -> tuple[int, int, int]:
        return stage_blocks(self.depth)

    @property
    def stage_channels(self) -> tuple[int, int, int]:
        c = self.base_channels * self.width
        return (c, 2 * c, 4 * c)


def stage_blocks(depth: int, stages: int = 3) -> tuple[int, ...]:
    """Spread `depth` blocks over `stages` as evenly as possible; earlier stages get the remainder."""
    q, r = divmod(depth, stages)
    return tuple(q + (1 if i < r else 0) for i in range(stages))


def _norm(kind: str, channels: int, groups: int) -> nn.Module:
    if kind == "batch":
        layer: nn.Module = nn.BatchNorm2d(channels)
    elif kind == "group":
        layer = nn.GroupNorm(groups, channels)
    else:
        return nn.Identity()
    return tag_module(layer, Role.VECTOR, Role.VECTOR)


def _conv(c_in: int, c_out: int, kernel: int, stride: int = 1, role: Role = Role.HIDDEN) -> nn.Conv2d:
    conv = nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2, bias=False)
    tag(conv.weight, role)
    return conv


class PreActBlock(nn.Module):
    """norm -> ReLU -> conv3x3(stride) -> norm -> ReLU -> conv3x3, plus identity / 1x1 projection."""

    def __init__(self, c_in: int, c_out: int, stride: int, cfg: ResNetConfig) -> None:
        super().__init__()
        self.residual_multiplier = float(cfg.residual_multiplier)
        self.norm1 = _norm(cfg.norm, c_in, cfg.norm_groups)
        self.conv1 = _conv(c_in, c_out, 3, stride)
        self.norm2 = _norm(cfg.norm, c_out, cfg.norm_groups)
        self.conv2 = _conv(c_out, c_out, 3)
        self.shortcut: nn.Conv2d | None = None
        if stride != 1 or c_in != c_out:
            self.shortcut = _conv(c_in, c_out, 1, stride)

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu(self.norm1(x))
        skip = x if self.shortcut is None else self.shortcut(h)
        out = self.conv1(h)
        out = self.conv2(F.relu(self.norm2(out)))
        return skip + self.residual_multiplier * out


class ResNet(nn.Module):
    def __init__(self, config: ResNetConfig) -> None:
        super().__init__()
        self.config = config
        c1, c2, c3 = config.stage_channels
        self.stem = _conv(config.in_channels, c1, 3, role=Role(config.stem_role))
        stages = []
        c_in = c1
        for i, (c_out, n) in enumerate(zip(config.stage_channels, config.blocks_per_stage, strict=True)):
            blocks = []
            for j in range(n):
                stride = 2 if (i > 0 and j == 0) else 1
                blocks.append(PreActBlock(c_in, c_out, stride, config))
                c_in = c_out
            stages.append(nn.Sequential(*blocks))
        self.stages = nn.ModuleList(stages)
        self.final_norm = _norm(config.norm, c3, config.norm_groups)
        self.head = tag_module(nn.Linear(c3, config.num_classes), Role.OUTPUT, Role.VECTOR)
        self.output_multiplier = float(config.output_multiplier)
        self.reset_parameters()

    @property
    def blocks(self) -> list[PreActBlock]:
        return [b for stage in self.stages for b in stage]

    @torch.no_grad()
    def reset_parameters(self) -> None:
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d | nn.GroupNorm):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
        nn.init.normal_(self.head.weight, std=self.head.in_features**-0.5)
        nn.init.zeros_(self.head.bias)

    def features(self, x: Tensor) -> Tensor:
        h = self.stem(x)
        for stage in self.stages:
            h = stage(h)
        h = F.relu(self.final_norm(h))
        return h.mean(dim=(2, 3))

    def forward(self, x: Tensor) -> Tensor:
        return self.output_multiplier * self.head(self.features(x))
