"""OrScale: orthogonalized update with coupled weight decay, scaled by a per-layer trust ratio
(arXiv 2605.07815)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor

from ._base import HybridOptimizer, check_non_negative
from .geometry import as_matrix, dense, from_matrix, polar_express

ORSCALE_VARIANTS = ("lm", "general")
DEFAULT_RATIO_CLIP: dict[str, tuple[float, float]] = {"lm": (0.1, 5.0), "general": (0.5, 1.5)}


def resolved_ratio_clip(group: dict[str, Any]) -> tuple[float, float]:
    clip = group["ratio_clip"]
    return tuple(clip) if clip is not None else DEFAULT_RATIO_CLIP[group["variant"]]  # type: ignore[return-value]


class OrScale(HybridOptimizer):
    """OrScale for ≥2-D parameters; AdamW groups as usual.

    M <- μM + G; M̂ = μM + G; Q = PolarExpress(M̂); D = wd·W + s·Q with s = 0.2·sqrt(max(m, n)) for
    ``variant="lm"`` and 1 for ``"general"``; trust ratio r = ||W||_F / (c·||D||_F + eps), c fixed at
    the layer's first step so that r_0 = 1; r̂ = clip(r, *ratio_clip) (default [0.1, 5] lm, [0.5, 1.5]
    general); W <- W - lr·r̂·D. State per matrix: ``trust_ratio`` (r̂ of the last step), ``raw_ratio``,
    ``clipped`` (1.0 if r̂ != r), ``n_clipped`` and ``n_steps`` (fraction of steps at the clip).
    """

    family = "muon"
    rule = "orscale"

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 0.02,
        momentum: float = 0.95,
        weight_decay: float = 0.1,
        variant: str = "lm",
        ratio_clip: tuple[float, float] | None = None,
        eps: float = 1e-6,
        ns_steps: int = 5,
        ns_dtype: torch.dtype | str | None = None,
    ) -> None:
        check_non_negative(lr=lr, momentum=momentum, weight_decay=weight_decay, eps=eps)
        if variant not in ORSCALE_VARIANTS:
            raise ValueError(f"OrScale variant={variant!r}; use one of {list(ORSCALE_VARIANTS)}")
        if ratio_clip is not None:
            lo, hi = ratio_clip
            if not 0.0 <= lo <= hi:
                raise ValueError(f"ratio_clip={ratio_clip} must satisfy 0 <= lo <= hi")
            ratio_clip = (float(lo), float(hi))
        defaults = dict(lr=lr, momentum=momentum, weight_decay=weight_decay, variant=variant,
                        ratio_clip=ratio_clip, eps=eps, ns_steps=ns_steps, ns_dtype=ns_dtype)
        super().__init__(params, defaults)

    def _rule_group(self, group: dict[str, Any]) -> None:
        # OrScale: D = wd*W + s*PE(G + mu*M); r = ||W||/(c||D||+eps), r_0 = 1; W -= lr*clip(r)*D (arXiv 2605.07815)
        lr, wd, mu, eps = group["lr"], group["weight_decay"], group["momentum"], group["eps"]
        lo, hi = resolved_ratio_clip(group)
        in_out = group["in_out"]
        for w in group["params"]:
            if w.grad is None:
                continue
            grad = w.grad
            state = self.state[w]
            first = "momentum_buffer" not in state
            if first:
                state["momentum_buffer"] = torch.zeros_like(grad, memory_format=torch.preserve_format)
            buf: Tensor = state["momentum_buffer"]
            torch.add(grad, buf, alpha=mu, out=buf)
            m_hat = torch.add(grad, buf, alpha=mu)
            mm = as_matrix(m_hat, in_out)
            d_out, d_in = mm.shape
            s = 0.2 * math.sqrt(max(d_out, d_in)) if group["variant"] == "lm" else 1.0
            q = from_matrix(polar_express(mm, steps=group["ns_steps"], dtype=group["ns_dtype"]), w, in_out)
            q = dense(q, w.dtype).view(-1)
            flat = w.view(-1) if w.is_contiguous() else w.reshape(-1)
            # ||D||^2 = wd^2 ||W||^2 + 2 wd s <W, Q> + s^2 ||Q||^2, without materializing D = wd W + s Q
            w_norm = torch.linalg.vector_norm(flat)
            q_norm = torch.linalg.vector_norm(q)
            d_sq = (s * q_norm) ** 2
            if wd != 0.0:
                d_sq = d_sq + (wd * w_norm) ** 2 + 2.0 * wd * s * torch.dot(flat, q)
            d_norm = d_sq.clamp_min(0.0).sqrt()
            if first:
                fallback = torch.full_like(w_norm, 0.2 * math.sqrt(max(d_out, d_in)))
                ok = (w_norm >= eps) & (d_norm >= eps)
                state["c"] = torch.where(ok, w_norm / d_norm.clamp_min(eps), fallback)
                state["n_clipped"] = torch.zeros_like(w_norm)
                state["n_steps"] = torch.zeros_like(w_norm)
            ratio = w_norm / (state["c"] * d_norm + eps)
            clipped_ratio = ratio.clamp(lo, hi)
            state["raw_ratio"] = ratio
            state["trust_ratio"] = clipped_ratio
            state["clipped"] = (clipped_ratio != ratio).to(w_norm.dtype)
            state["n_clipped"] += state["clipped"]
            state["n_steps"] += 1
            # W <- W - lr r (wd W + s Q) = (1 - lr r wd) W - (lr r s) Q
            if wd != 0.0:
                w.mul_(1.0 - lr * wd * clipped_ratio)
            w.addcmul_(q.view_as(w), clipped_ratio, value=-lr * s)
