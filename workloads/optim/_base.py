"""Base class of the matrix optimizers: param groups name their ``algorithm`` — the optimizer's own
rule or ``"adamw"`` — so one optimizer object (and one ``state_dict``) covers a whole model, the way
hybrid Muon recipes are used."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import torch
from torch import Tensor
from torch.optim import Optimizer

ADAMW = "adamw"
# AdamW part of hybrid recipes (Moonlight, MOGA, OrScale, Muown): betas (0.9, 0.95), eps 1e-8.
ADAMW_GROUP_DEFAULTS: dict[str, Any] = {"betas": (0.9, 0.95), "eps": 1e-8}


def check_non_negative(**values: float) -> None:
    for k, v in values.items():
        if not v >= 0.0:
            raise ValueError(f"{k}={v} must be >= 0")


class HybridOptimizer(Optimizer):
    """An optimizer with a matrix rule (``rule``) and an AdamW rule for groups with ``algorithm="adamw"``."""

    family: ClassVar[str] = ""
    rule: ClassVar[str] = ""
    matrix_only: ClassVar[bool] = True  # the rule needs >= 2-D parameters

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        defaults = {"algorithm": self.rule, "in_out": False, **defaults}
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        algo = param_group.get("algorithm", self.defaults.get("algorithm", self.rule))
        if algo not in (self.rule, ADAMW):
            raise ValueError(
                f"{type(self).__name__}: param group algorithm={algo!r}; use {self.rule!r} or {ADAMW!r}"
            )
        param_group["algorithm"] = algo
        if algo == ADAMW:
            for k, v in ADAMW_GROUP_DEFAULTS.items():
                param_group.setdefault(k, v)
            beta1, beta2 = param_group["betas"]
            if not (0.0 <= beta1 < 1.0 and 0.0 <= beta2 < 1.0):
                raise ValueError(f"adamw group betas={param_group['betas']} must lie in [0, 1)")
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        check_non_negative(lr=float(group["lr"]), weight_decay=float(group.get("weight_decay", 0.0)))
        if algo == self.rule and self.matrix_only:
            for p in group["params"]:
                if p.ndim < 2:
                    name = group.get("name", "<unnamed>")
                    raise ValueError(
                        f"{type(self).__name__}: parameter {name!r} of shape {tuple(p.shape)} is not a matrix; "
                        f"put it in a param group with algorithm='adamw'"
                    )

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        loss = evaluate_closure(closure)
        for group in self.param_groups:
            if group["algorithm"] == ADAMW:
                self._adamw_group(group)
            else:
                self._rule_group(group)
        return loss

    def _rule_group(self, group: dict[str, Any]) -> None:
        raise NotImplementedError

    def _adamw_group(self, group: dict[str, Any]) -> None:
        # AdamW, decoupled weight decay, bias-corrected; the same arithmetic as torch.optim.AdamW (arXiv 1711.05101)
        lr, wd, eps = group["lr"], group["weight_decay"], group["eps"]
        beta1, beta2 = group["betas"]
        for p in group["params"]:
            if p.grad is None:
                continue
            grad = p.grad
            state = self.state[p]
            if "exp_avg" not in state:
                state["step"] = torch.tensor(0.0)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["step"] += 1
            step = float(state["step"])
            exp_avg: Tensor = state["exp_avg"]
            exp_avg_sq: Tensor = state["exp_avg_sq"]
            if wd != 0.0:
                p.mul_(1.0 - lr * wd)
            exp_avg.lerp_(grad, 1.0 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
            step_size = lr / (1.0 - beta1**step)
            denom = (exp_avg_sq.sqrt() / (1.0 - beta2**step) ** 0.5).add_(eps)
            p.addcdiv_(exp_avg, denom, value=-step_size)


def momentum_buffer(state: dict[str, Any], grad: Tensor) -> Tensor:
    """The parameter's momentum buffer, created as zeros on its first step."""
    if "momentum_buffer" not in state:
        state["momentum_buffer"] = torch.zeros_like(grad, memory_format=torch.preserve_format)
    return state["momentum_buffer"]


def evaluate_closure(closure: Callable[[], float] | None) -> float | None:
    """The `torch.optim.Optimizer.step(closure)` contract: re-evaluate the loss with grad enabled."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()
