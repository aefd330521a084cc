"""MOGA: steepest descent in mean-normalized row / column / sign geometries (arXiv 2603.09952)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

from ._base import HybridOptimizer, check_non_negative, momentum_buffer
from .geometry import as_matrix, from_matrix, l2_norm, lmo_col_norm, lmo_row_norm, lmo_sign

MOGA_NORMS = ("row", "col", "sign")


class MOGA(HybridOptimizer):
    """Row- / column-normalized (or sign) momentum updates for ≥2-D parameters; AdamW groups as usual.

    norm="row": (p,mean)->(inf,mean) geometry; for p = 2, D_i = m_i / (sqrt(d_in)·||m_i|| + eps).
    norm="col": (1,mean)->(q,mean) geometry; for q = 2, D_j = (sqrt(d_out)/d_in)·m_j / (||m_j|| + eps).
    norm="sign": (1,mean)->(inf,mean) geometry, D = sign(m)/d_in — rescaled AdamW (μP's Adam rule).
    Update W <- (1 - lr·wd)·W - lr·D with Nesterov momentum in sum form (M <- βM + G; U = G + βM).
    ``p`` is the input exponent of the row norm, ``q`` the output exponent of the column norm.
    """

    family = "normalized"
    rule = "moga"

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 0.02,
        norm: str = "row",
        p: float = 2.0,
        momentum: float = 0.95,
        nesterov: bool = True,
        weight_decay: float = 0.0,
        eps: float = 1e-7,
        q: float = 2.0,
    ) -> None:
        check_non_negative(lr=lr, momentum=momentum, weight_decay=weight_decay, eps=eps)
        if norm not in MOGA_NORMS:
            raise ValueError(f"MOGA norm={norm!r}; use one of {list(MOGA_NORMS)}")
        if not 1.0 <= p < math.inf:
            raise ValueError(f"MOGA p={p} must be in [1, inf)")
        if not 1.0 < q <= math.inf:
            raise ValueError(f"MOGA q={q} must be in (1, inf]")
        defaults = dict(lr=lr, norm=norm, p=p, q=q, momentum=momentum, nesterov=nesterov,
                        weight_decay=weight_decay, eps=eps)
        super().__init__(params, defaults)

    def _rule_group(self, group: dict[str, Any]) -> None:
        # MOGA: M <- bM + G; U = G + bM; W <- (1 - lr*wd) W - lr*LMO(U), mean-normalized (arXiv 2603.09952)
        lr, wd, beta, eps = group["lr"], group["weight_decay"], group["momentum"], group["eps"]
        norm, in_out = group["norm"], group["in_out"]
        for w in group["params"]:
            if w.grad is None:
                continue
            grad = w.grad
            state = self.state[w]
            buf = momentum_buffer(state, grad)
            torch.add(grad, buf, alpha=beta, out=buf)
            update = torch.add(grad, buf, alpha=beta) if group["nesterov"] else buf
            m = as_matrix(update, in_out)
            if wd != 0.0:
                w.mul_(1.0 - lr * wd)
            if norm == "row" and group["p"] == 2.0:
                # fused: W -= lr * m_i / (sqrt(d_in) ||m_i|| + eps), without materializing D
                scale = torch.linalg.vector_norm(m, 2, dim=1, keepdim=True).mul_(math.sqrt(m.shape[1])).add_(eps)
                scale = torch.reciprocal(scale)
                if not in_out and w.ndim == 2:
                    w.addcmul_(update, scale, value=-lr)
                    continue
                d = m * scale
            elif norm == "row":
                d = lmo_row_norm(m, p=group["p"], eps=eps)
            elif norm == "col" and group["q"] == 2.0:
                # fused: W -= lr * (sqrt(d_out)/d_in) m_j / (||m_j|| + eps), column by column
                scale = l2_norm(m, dim=0).add_(eps)
                scale = torch.reciprocal(scale).mul_(math.sqrt(m.shape[0]) / m.shape[1])
                if not in_out and w.ndim == 2:
                    w.addcmul_(update, scale, value=-lr)
                    continue
                d = m * scale
            elif norm == "col":
                d = lmo_col_norm(m, q=group["q"], eps=eps)
            elif not in_out and w.ndim == 2:
                w.add_(torch.sign(update), alpha=-lr / m.shape[1])
                continue
            else:
                d = lmo_sign(m)
            w.add_(from_matrix(d, w, in_out), alpha=-lr)


class MOGACol(MOGA):
    """MOGA with the column geometry by default (registry name ``moga_col``)."""

    def __init__(self, params: Iterable[Any], lr: float = 0.02, norm: str = "col", **kwargs: Any) -> None:
        super().__init__(params, lr=lr, norm=norm, **kwargs)


class MOGASign(MOGA):
    """MOGA with the sign / rescaled-AdamW geometry by default (registry name ``moga_sign``)."""

    def __init__(self, params: Iterable[Any], lr: float = 0.02, norm: str = "sign", **kwargs: Any) -> None:
        super().__init__(params, lr=lr, norm=norm, **kwargs)
