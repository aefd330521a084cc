"""Muown: Muon on row directions, Adam (or Signum) on row magnitudes (arXiv 2605.10797)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor

from ._base import HybridOptimizer, check_non_negative
from .geometry import NS_COEFFICIENTS, as_matrix, dense, from_matrix, newton_schulz

MAGNITUDE_UPDATES = ("adam", "signum")


class Muown(HybridOptimizer):
    """Muown for ≥2-D parameters: W = diag(g)·V̂ with V̂_i = v_i/||v_i||, both kept in the optimizer state
    (the model keeps a plain weight W, rebuilt every step as g ⊙ V/||V||_row).

    Directions V take a Muon step (Nesterov, NS quintic, s = 0.2·sqrt(max(d_out, d_in)); a packed matrix
    with group key ``qkv_chunks=k`` is orthogonalized per chunk of d_out/k rows, s = 0.2·sqrt(max(d_out/k,
    d_in))); magnitudes g take an Adam step (``magnitude_update="adam"``, betas / eps, bias-corrected) or a
    Signum step (``"signum"``: g <- g - lr·sign(m_g), m_g an EMA with betas[0]) with the same lr.
    Weight decay scales the old W (hence g) by (1 - lr·wd).
    """

    family = "muon"
    rule = "muown"

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 0.02,
        momentum: float = 0.95,
        nesterov: bool = True,
        betas: tuple[float, float] = (0.9, 0.95),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        magnitude_update: str = "adam",
        ns_steps: int = 5,
        ns_dtype: torch.dtype | str | None = None,
        qkv_chunks: int = 1,
    ) -> None:
        check_non_negative(lr=lr, momentum=momentum, weight_decay=weight_decay, eps=eps)
        if magnitude_update not in MAGNITUDE_UPDATES:
            raise ValueError(f"magnitude_update={magnitude_update!r}; use one of {list(MAGNITUDE_UPDATES)}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"betas={betas} must lie in [0, 1)")
        defaults = dict(lr=lr, momentum=momentum, nesterov=nesterov, betas=tuple(betas), eps=eps,
                        weight_decay=weight_decay, magnitude_update=magnitude_update, ns_steps=ns_steps,
                        ns_dtype=ns_dtype, qkv_chunks=qkv_chunks)
        super().__init__(params, defaults)

    def _orthogonalize(self, u: Tensor, group: dict[str, Any]) -> tuple[Tensor, float]:
        # Muown direction step: O = NS(U)·0.2·sqrt(max(d_out, d_in)), per square chunk for packed QKV (arXiv 2605.10797)
        k = int(group["qkv_chunks"])
        d_out, d_in = u.shape
        if k > 1 and d_out % k != 0:
            raise ValueError(f"qkv_chunks={k} does not divide d_out={d_out}")
        rows = d_out // k
        s = 0.2 * math.sqrt(max(rows, d_in))
        if k == 1:
            return newton_schulz(u, NS_COEFFICIENTS, group["ns_steps"], 1e-7, group["ns_dtype"]), s
        chunks = [newton_schulz(c, NS_COEFFICIENTS, group["ns_steps"], 1e-7, group["ns_dtype"])
                  for c in u.split(rows, dim=0)]
        return torch.cat(chunks, dim=0), s

    def _rule_group(self, group: dict[str, Any]) -> None:
        # Muown: u_i = V_i/||V_i||; grad_g = <G_i,u_i>; grad_V = (g_i/||v_i||)(G_i - grad_g u_i) (arXiv 2605.10797)
        lr, wd, beta, eps = group["lr"], group["weight_decay"], group["momentum"], group["eps"]
        beta1, beta2 = group["betas"]
        in_out = group["in_out"]
        for w in group["params"]:
            if w.grad is None:
                continue
            wm = as_matrix(w, in_out)
            gm = as_matrix(w.grad, in_out)
            state = self.state[w]
            if "direction" not in state:
                g0 = torch.linalg.vector_norm(wm, dim=1)
                state["step"] = torch.tensor(0.0)
                state["magnitude"] = g0.clone()
                state["direction"] = wm / g0.clamp_min(1e-30).unsqueeze(1)
                state["momentum_buffer"] = torch.zeros_like(wm)
                state["mag_exp_avg"] = torch.zeros_like(g0)
                state["mag_exp_avg_sq"] = torch.zeros_like(g0)
            g: Tensor = state["magnitude"]
            v: Tensor = state["direction"]
            buf: Tensor = state["momentum_buffer"]
            inv_vnorm = torch.linalg.vector_norm(v, dim=1).clamp_min_(1e-30).reciprocal_()
            grad_g = torch.linalg.vecdot(gm, v).mul_(inv_vnorm)  # <G_i, û_i>
            # grad_V = (g_i/||v_i||)(G_i - grad_g_i û_i), û_i = v_i/||v_i||
            grad_v = torch.addcmul(gm, v, (grad_g * inv_vnorm).neg_().unsqueeze(1))
            grad_v.mul_((g * inv_vnorm).unsqueeze(1))
            if wd != 0.0:
                g.mul_(1.0 - lr * wd)  # decay of the old W = g ⊙ û: the row norms shrink, directions stay
            # directions: Muon (EMA momentum, Nesterov) on V
            buf.lerp_(grad_v, 1.0 - beta)
            upd = grad_v.lerp_(buf, beta) if group["nesterov"] else buf
            o, s = self._orthogonalize(upd, group)
            v.add_(dense(o, v.dtype), alpha=-lr * s)
            # magnitudes: Adam (bias-corrected) or Signum, same lr
            state["step"] += 1
            t = float(state["step"])
            m1: Tensor = state["mag_exp_avg"]
            m1.lerp_(grad_g, 1.0 - beta1)
            if group["magnitude_update"] == "adam":
                m2: Tensor = state["mag_exp_avg_sq"]
                m2.mul_(beta2).addcmul_(grad_g, grad_g, value=1.0 - beta2)
                denom = (m2.sqrt() / math.sqrt(1.0 - beta2**t)).add_(eps)
                g.addcdiv_(m1, denom, value=-lr / (1.0 - beta1**t))
            else:
                g.sub_(torch.sign(m1), alpha=lr)
            row_scale = (g / torch.linalg.vector_norm(v, dim=1).clamp_min_(1e-30)).unsqueeze(1)
            if w.ndim == 2 and not in_out and w.is_contiguous():
                torch.mul(v, row_scale, out=w)
            else:
                w.copy_(from_matrix(v * row_scale, w, in_out))
