"""SCION: stochastic conditional gradient with per-layer norms (arXiv 2502.07529), its unconstrained
form, and Projected SCION (unconstrained step, then projection onto each norm ball)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor

from ._base import HybridOptimizer, check_non_negative, momentum_buffer
from .geometry import LMO_NAMES, as_matrix, from_matrix, lmo, project, shape_factor

SCION_NORMS = ("auto", *LMO_NAMES)


def resolve_norm(norm: str, param: Tensor) -> str:
    """``auto``: bias_rms for vectors, spectral for matrices, spectral_conv for 4-D kernels."""
    if norm != "auto":
        return norm
    if param.ndim < 2:
        return "bias_rms"
    return "spectral_conv" if param.ndim == 4 else "spectral"


class Scion(HybridOptimizer):
    """SCION over all parameters, each group with a ``norm`` (LMO) and a ``radius`` ρ.

    d <- (1 - α)·d + α·G (``momentum`` = α, SCION's convention: 0.1 means a long average);
    u = ρ·lmo(d); constrained: W <- (1 - lr)·W - lr·u (W stays in the ρ-ball of its norm when it starts
    there and lr <= 1); unconstrained: W <- W - lr·u.
    Group keys: ``norm`` in {auto, spectral, spectral_conv, sign, rownorm, colnorm, bias_rms},
    ``radius``, ``normalized`` (the 1/d_in of sign / rownorm / colnorm, sqrt(d_out/d_in) vs sqrt(d_out)
    of spectral), ``in_out`` (weight stored (fan_in, fan_out), e.g. an embedding table), ``p`` / ``q``
    (row / column exponents), ``ns_steps``, ``ns_dtype``. ``init()`` re-initializes the ≥2-D weights
    consistently with their norm (times the radius).
    """

    family = "scion"
    rule = "scion"
    matrix_only = False

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 3.6e-4,
        momentum: float = 0.1,
        constrained: bool = True,
        norm: str = "auto",
        radius: float = 1.0,
        normalized: bool = True,
        ns_steps: int = 5,
        ns_dtype: torch.dtype | str | None = None,
        eps: float = 1e-8,
        p: float = 2.0,
        q: float = 2.0,
        weight_decay: float = 0.0,
    ) -> None:
        check_non_negative(lr=lr, radius=radius, eps=eps, weight_decay=weight_decay)
        if not 0.0 < momentum <= 1.0:
            raise ValueError(f"SCION momentum (alpha) = {momentum} must be in (0, 1]; 1 means no averaging")
        defaults = dict(lr=lr, momentum=momentum, constrained=constrained, norm=norm, radius=radius,
                        normalized=normalized, ns_steps=ns_steps, ns_dtype=ns_dtype, eps=eps, p=p, q=q,
                        weight_decay=weight_decay)
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        if group["algorithm"] == self.rule:
            if group["norm"] not in SCION_NORMS:
                raise ValueError(f"SCION norm={group['norm']!r}; use one of {list(SCION_NORMS)}")
            for w in group["params"]:
                n = resolve_norm(group["norm"], w)
                if n != "bias_rms" and w.ndim < 2:
                    raise ValueError(f"SCION norm={n!r} needs a matrix, got shape {tuple(w.shape)}")
                if n == "spectral_conv" and w.ndim != 4:
                    raise ValueError(f"SCION norm='spectral_conv' needs a 4-D kernel, got {tuple(w.shape)}")

    def _direction(self, group: dict[str, Any], w: Tensor, d: Tensor) -> Tensor:
        return lmo(resolve_norm(group["norm"], w), d, in_out=group["in_out"], normalized=group["normalized"],
                   p=group["p"], q=group["q"], ns_steps=group["ns_steps"], ns_dtype=group["ns_dtype"],
                   eps=group["eps"])

    def _rule_group(self, group: dict[str, Any]) -> None:
        # SCION: d <- (1-a)d + aG; u = rho*lmo(d); W <- (1-lr)W - lr*u (constrained) or W - lr*u (arXiv 2502.07529)
        lr, alpha, radius = group["lr"], group["momentum"], group["radius"]
        for w in group["params"]:
            if w.grad is None:
                continue
            state = self.state[w]
            buf = momentum_buffer(state, w.grad)
            buf.lerp_(w.grad, alpha)
            u = self._direction(group, w, buf)
            if group["constrained"]:
                w.mul_(1.0 - lr)
            elif group["weight_decay"] != 0.0:
                w.mul_(1.0 - lr * group["weight_decay"])
            w.add_(u.to(w.dtype), alpha=-lr * radius)
            self._after_update(group, w)

    def _after_update(self, group: dict[str, Any], w: Tensor) -> None:
        return None

    @torch.no_grad()
    def init(self, generator: torch.Generator | None = None) -> None:
        """Norm-consistent initialization of every ≥2-D weight of the SCION groups, times its radius:
        spectral: (semi-)orthogonal · shape factor; spectral_conv: orthogonal flattened kernel ·
        sqrt(C_out/C_in)/k²; sign: random ±1 (/d_in if normalized); rownorm / colnorm: Gaussian rows /
        columns rescaled to unit norm in the geometry. Vectors (bias_rms) keep their model init."""
        # norm-consistent init: W0 = rho * (unit-norm point of the layer's geometry) (arXiv 2502.07529)
        for group in self.param_groups:
            if group["algorithm"] != self.rule:
                continue
            for w in group["params"]:
                n = resolve_norm(group["norm"], w)
                if n == "bias_rms":
                    continue
                w.copy_(_unit_init(n, w, group, generator).mul_(group["radius"]))


def _unit_init(norm: str, w: Tensor, group: dict[str, Any], gen: torch.Generator | None) -> Tensor:
    m = as_matrix(w, group["in_out"] and norm != "spectral_conv")
    d_out, d_in = m.shape
    normalized = group["normalized"]
    z = torch.randn(m.shape, generator=gen, dtype=torch.float32).to(w.device)
    if norm in ("spectral", "spectral_conv"):
        q, r = torch.linalg.qr(z.T if d_out < d_in else z)
        q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)
        o = q.T if d_out < d_in else q
        if norm == "spectral":
            o = o * shape_factor(d_out, d_in, "spectral" if normalized else "sqrt_d_out")
        else:
            c_out, c_in, kh, kw = w.shape
            o = o * (math.sqrt(c_out / c_in) / (kh * kw))
            return o.reshape(w.shape).to(w.dtype)
    elif norm == "sign":
        o = torch.sign(z) / (d_in if normalized else 1.0)
    elif norm == "rownorm":
        o = lmo("rownorm", z, normalized=normalized, p=group["p"])
    elif norm == "colnorm":
        o = lmo("colnorm", z, normalized=normalized, q=group["q"])
    else:
        raise ValueError(f"no init for norm {norm!r}")
    return from_matrix(o.to(w.dtype), w, group["in_out"])


class ScionUnconstrained(Scion):
    """Unconstrained SCION: W <- W - lr·ρ·lmo(d) (optionally with decoupled ``weight_decay``)."""

    def __init__(self, params: Iterable[Any], lr: float = 3.6e-4, constrained: bool = False, **kw: Any) -> None:
        super().__init__(params, lr=lr, constrained=constrained, **kw)


class ProjectedScion(Scion):
    """Projected SCION [open in ALGORITHMS.md]: an unconstrained SCION step, then each weight is
    projected back onto the ρ-ball of its norm (spectral: singular values clipped at ρ·sqrt(d_out/d_in)
    by SVD; sign: entries clamped to ±ρ/d_in; row / column / RMS balls: rescaled)."""

    def __init__(self, params: Iterable[Any], lr: float = 3.6e-4, constrained: bool = False, **kw: Any) -> None:
        super().__init__(params, lr=lr, constrained=constrained, **kw)

    def _after_update(self, group: dict[str, Any], w: Tensor) -> None:
        # Projected SCION: W <- Proj_{||W|| <= rho}(W - lr*rho*lmo(d)) (summary of arXiv 2502.07529; [open])
        n = resolve_norm(group["norm"], w)
        w.copy_(project(n, w, group["radius"], in_out=group["in_out"], normalized=group["normalized"],
                        p=group["p"], q=group["q"]))
