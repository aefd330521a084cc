"""Lion (arXiv 2302.06675) and the registered AdamW."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import torch
from torch import Tensor
from torch.optim import Optimizer

from ._base import evaluate_closure


class Lion(Optimizer):
    """Lion: u = sign(β1·m + (1-β1)·G); W <- (1 - lr·wd)·W - lr·u; m <- β2·m + (1-β2)·G."""

    family: ClassVar[str] = "sign"

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.99),
        weight_decay: float = 0.0,
    ) -> None:
        if not lr >= 0.0:
            raise ValueError(f"lr={lr} must be >= 0")
        if not weight_decay >= 0.0:
            raise ValueError(f"weight_decay={weight_decay} must be >= 0")
        if not (0.0 <= betas[0] <= 1.0 and 0.0 <= betas[1] <= 1.0):
            raise ValueError(f"betas={betas} must lie in [0, 1]")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:  # type: ignore[override]
        # Lion: u = sign(lerp(m, G, 1-b1)); W <- (1-lr*wd)W - lr*u; m <- lerp(m, G, 1-b2) (arXiv 2302.06675)
        loss = evaluate_closure(closure)
        for group in self.param_groups:
            lr, wd = group["lr"], group["weight_decay"]
            beta1, beta2 = group["betas"]
            for w in group["params"]:
                if w.grad is None:
                    continue
                state = self.state[w]
                if "exp_avg" not in state:
                    state["exp_avg"] = torch.zeros_like(w, memory_format=torch.preserve_format)
                m: Tensor = state["exp_avg"]
                u = m.lerp(w.grad, 1.0 - beta1).sign_()
                if wd != 0.0:
                    w.mul_(1.0 - lr * wd)
                w.add_(u, alpha=-lr)
                m.lerp_(w.grad, 1.0 - beta2)
        return loss


class AdamW(torch.optim.AdamW):
    """torch.optim.AdamW with the registry's ``family`` attribute; the fused kernel by default.

    The fused step is ~5x faster than the default foreach one on CPU (one kernel per parameter
    group instead of several), which matters because a trial keeps one group per parameter.
    Pass ``fused=False`` (or ``foreach=True``) for torch's default implementation.
    """

    family: ClassVar[str] = "adam"

    def __init__(self, params: Any, *args: Any, fused: bool | None = None, foreach: bool | None = None,
                 **kwargs: Any) -> None:
        if fused is None and not foreach:
            fused = True
        super().__init__(params, *args, fused=fused, foreach=foreach, **kwargs)
