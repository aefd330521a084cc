"""Parameter roles: every trainable parameter declares what it is, so that parametrizations
and optimizers can treat it accordingly. A parameter without a role is an error, not a default.
"""

from __future__ import annotations

from collections.abc import Iterator
from enum import StrEnum

from torch import nn


class Role(StrEnum):
    EMBEDDING = "embedding"  # input weights: token/position embeddings, image stem
    HIDDEN = "hidden"  # 2-D matrices and conv kernels between width-sized spaces
    OUTPUT = "output"  # unembedding / classifier head
    VECTOR = "vector"  # norm gains, biases, scalars


_ATTR = "_hpt_role"
_TRANSPOSED = "_hpt_in_out"  # weight stored as (fan_in, fan_out), e.g. nn.Embedding tables


class MissingRoleError(ValueError):
    pass


def tag(param: nn.Parameter, role: Role | str, *, in_out: bool = False) -> nn.Parameter:
    """Attach a role to a parameter (returns it, so it can wrap a constructor).

    `in_out=True` marks a weight stored as (fan_in, fan_out) — an embedding table — instead of
    the (fan_out, fan_in, ...) layout of `nn.Linear` and conv kernels.
    """
    setattr(param, _ATTR, Role(role))
    setattr(param, _TRANSPOSED, in_out)
    return param


def is_in_out(param: nn.Parameter) -> bool:
    return bool(getattr(param, _TRANSPOSED, False))


def fans(param: nn.Parameter) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight; conv kernels count fan_in as C_in*k*k; vectors give (1, n)."""
    if param.ndim < 2:
        return 1, param.numel()
    if is_in_out(param):
        return param.shape[0], param.shape[1]
    fan_out = param.shape[0]
    return param[0].numel(), fan_out


def tag_module(module: nn.Module, weight: Role | str, bias: Role | str = Role.VECTOR) -> nn.Module:
    """Tag a layer's `weight` and (if present) `bias`."""
    if getattr(module, "weight", None) is not None:
        tag(module.weight, weight)
    if getattr(module, "bias", None) is not None:
        tag(module.bias, bias)
    return module


def role_of(param: nn.Parameter, name: str = "<unnamed>") -> Role:
    role = getattr(param, _ATTR, None)
    if role is None:
        raise MissingRoleError(
            f"parameter {name!r} (shape {tuple(param.shape)}) has no role; "
            f"tag it with workloads.roles.tag(param, Role.X) where X is one of "
            f"{[r.value for r in Role]}"
        )
    return role


def named_roles(model: nn.Module) -> Iterator[tuple[str, nn.Parameter, Role]]:
    """Yield (name, parameter, role) for every trainable parameter; raises on an untagged one."""
    for name, param in model.named_parameters():
        if param.requires_grad:
            yield name, param, role_of(param, name)


def check_roles(model: nn.Module) -> None:
    for _ in named_roles(model):
        pass
