"""Width/depth parametrizations as named recipes.

A recipe maps (role, fan_in, fan_out, width multiplier m_N, depth multiplier m_L, optimizer
family) to an init std, an LR multiplier, a weight-decay multiplier and an Adam-epsilon
multiplier, and sets the model's forward multipliers (residual branches, output logits,
attention scale). Formulas: ../shared/ALGORITHMS.md §5, §7.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import torch
from torch import nn

from workloads.config import ParametrizationConfig
from workloads.roles import Role, fans, named_roles


@dataclass(frozen=True)
class ForwardMultipliers:
    residual: float = 1.0  # x + residual * F(x) on every residual branch
    output: float = 1.0  # logits multiplier
    attn_scale_power: float = 0.5  # q.k / head_dim**power (0.5 standard, 1.0 muP)


@dataclass(frozen=True)
class ParamRule:
    init_std: float | None  # None: keep the module's own init (norm gains 1, biases 0)
    lr_mult: float = 1.0
    wd_mult: float = 1.0
    eps_mult: float = 1.0
    extra: dict[str, Any] = field(default_factory=dict)  # optimizer-specific (e.g. SCION norm/radius)


@dataclass(frozen=True)
class Scale:
    width: int
    depth: int
    base_width: int
    base_depth: int

    @property
    def m_width(self) -> float:
        return self.width / self.base_width

    @property
    def m_depth(self) -> float:
        return self.depth / self.base_depth


class Recipe(ABC):
    """A named parametrization. Subclasses register themselves in RECIPES by `name`."""

    name: ClassVar[str]

    def __init__(self, config: ParametrizationConfig, width: int, depth: int) -> None:
        self.config = config
        self.scale = Scale(width, depth, config.base_width or width, config.base_depth or depth)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            RECIPES[cls.name] = cls

    @abstractmethod
    def forward_multipliers(self) -> ForwardMultipliers: ...

    @abstractmethod
    def rule(self, role: Role, fan_in: int, fan_out: int, family: str) -> ParamRule: ...


RECIPES: dict[str, type[Recipe]] = {}


class StandardParametrization(Recipe):
    """SP: init std 1/sqrt(fan_in) for matrices (embeddings std 1), one global LR."""

    name = "sp"

    def forward_multipliers(self) -> ForwardMultipliers:
        return ForwardMultipliers()

    def rule(self, role: Role, fan_in: int, fan_out: int, family: str) -> ParamRule:
        if role is Role.VECTOR:
            return ParamRule(init_std=None)
        if role is Role.EMBEDDING:
            return ParamRule(init_std=1.0)
        return ParamRule(init_std=1.0 / math.sqrt(fan_in))


def make_recipe(config: ParametrizationConfig, width: int, depth: int) -> Recipe:
    try:
        cls = RECIPES[config.kind]
    except KeyError:
        raise ValueError(
            f"parametrization.kind={config.kind!r} is not a registered recipe; choose one of {sorted(RECIPES)}"
        ) from None
    return cls(config, width, depth)


@dataclass
class ResolvedParam:
    name: str
    param: nn.Parameter
    role: Role
    fan_in: int
    fan_out: int
    rule: ParamRule
    forward_multiplier: float

    def row(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role.value,
            "shape": "x".join(map(str, self.param.shape)),
            "fan_in": self.fan_in,
            "fan_out": self.fan_out,
            "init_std": self.rule.init_std,
            "forward_multiplier": self.forward_multiplier,
            **{k: v for k, v in asdict(self.rule).items() if k not in ("init_std", "extra")},
            **{f"extra.{k}": v for k, v in self.rule.extra.items()},
        }


def resolve(model: nn.Module, recipe: Recipe, family: str) -> list[ResolvedParam]:
    """Per-parameter rules for a built model (whose forward multipliers came from `recipe`)."""
    mults = recipe.forward_multipliers()
    out = []
    for name, param, role in named_roles(model):
        fan_in, fan_out = fans(param)
        forward = mults.output if role is Role.OUTPUT else 1.0
        out.append(ResolvedParam(name, param, role, fan_in, fan_out, recipe.rule(role, fan_in, fan_out, family), forward))
    return out


@torch.no_grad()
def apply_init(resolved: list[ResolvedParam], generator: torch.Generator | None = None) -> None:
    for rp in resolved:
        if rp.rule.init_std is not None:
            rp.param.normal_(0.0, rp.rule.init_std, generator=generator)
