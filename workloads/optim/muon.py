"""Muon: momentum, Newton–Schulz orthogonalization, shape factor, decoupled weight decay."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from ._base import HybridOptimizer, check_non_negative, momentum_buffer
from .geometry import NS_COEFFICIENTS, SHAPE_FACTORS, as_matrix, dense, from_matrix, newton_schulz, shape_factor


class Muon(HybridOptimizer):
    """Muon for ≥2-D parameters (convs flattened); groups with ``algorithm="adamw"`` run AdamW.

    ``adjust_lr`` is the shape factor s multiplying NS(M): "original" (sqrt(max(1, d_out/d_in)), the
    default of torch.optim.Muon), "match_rms_adamw" (0.2·sqrt(max(d_out, d_in)), Moonlight),
    "spectral" (sqrt(d_out/d_in)), "none". ``ns_dtype`` None means bf16 on CUDA and fp32 on CPU; pass
    ``torch.bfloat16`` to reproduce torch.optim.Muon exactly. With the same settings (and bf16) the
    update equals ``torch.optim.Muon``'s.
    """

    family = "muon"
    rule = "muon"

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 0.02,
        momentum: float = 0.95,
        nesterov: bool = True,
        weight_decay: float = 0.0,
        adjust_lr: str | None = "original",
        ns_steps: int = 5,
        ns_dtype: torch.dtype | str | None = None,
        ns_coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
        eps: float = 1e-7,
    ) -> None:
        check_non_negative(lr=lr, momentum=momentum, weight_decay=weight_decay, eps=eps)
        adjust_lr = adjust_lr or "original"
        if adjust_lr not in SHAPE_FACTORS:
            raise ValueError(f"adjust_lr={adjust_lr!r}; use one of {list(SHAPE_FACTORS)}")
        defaults = dict(
            lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay, adjust_lr=adjust_lr,
            ns_steps=ns_steps, ns_dtype=ns_dtype, ns_coefficients=tuple(ns_coefficients), eps=eps,
        )
        super().__init__(params, defaults)

    def _rule_group(self, group: dict[str, Any]) -> None:
        # Muon: M <- lerp(M, G, 1-b); U = lerp(G, M, b); W <- (1-lr*wd)W - lr*s*NS(U) (arXiv 2502.16982)
        lr, wd, beta = group["lr"], group["weight_decay"], group["momentum"]
        for p in group["params"]:
            if p.grad is None:
                continue
            grad = p.grad
            state = self.state[p]
            buf = momentum_buffer(state, grad)
            buf.lerp_(grad, 1.0 - beta)
            update = grad.lerp(buf, beta) if group["nesterov"] else buf
            m = as_matrix(update, group["in_out"])
            o = newton_schulz(m, group["ns_coefficients"], group["ns_steps"], group["eps"], group["ns_dtype"])
            s = shape_factor(m.shape[0], m.shape[1], group["adjust_lr"])
            if wd != 0.0:
                p.mul_(1.0 - lr * wd)  # decoupled decay uses the unadjusted lr
            # one contiguous copy in p's dtype: a mixed-dtype add with a transposed operand is ~8x slower on CPU
            o = dense(from_matrix(o, p, group["in_out"]), p.dtype)
            p.add_(o, alpha=-lr * s)
