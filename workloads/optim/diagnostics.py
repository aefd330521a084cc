"""Per-parameter diagnostics at logged steps: update RMS, weight RMS, spectral norm (power iteration),
max row norm, and OrScale's trust ratio / clip flag. Works for any torch optimizer; group keys
"name" / "role" / "in_out" (set by the builder) are used when present.

Usage: ``before = snapshot(opt); opt.step(); rows = layer_diagnostics(opt, before)``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.optim import Optimizer

from .geometry import as_matrix

Key = tuple[int, int]


def _name(group: dict[str, Any], gi: int, pi: int) -> str:
    base = group.get("name")
    if base:
        return base if len(group["params"]) == 1 else f"{base}.{pi}"
    return f"group{gi}.param{pi}"


@torch.no_grad()
def snapshot(optimizer: Optimizer) -> dict[Key, Tensor]:
    """Copies of every parameter, keyed by (group index, param index); take it right before ``step()``."""
    return {(gi, pi): p.detach().clone()
            for gi, g in enumerate(optimizer.param_groups) for pi, p in enumerate(g["params"])}


@torch.no_grad()
def spectral_norm(w: Tensor, iters: int = 8) -> float:
    """Largest singular value of a (flattened) matrix by power iteration from a fixed start vector
    (a slight underestimate when the top two singular values are close)."""
    m = w.float()
    gen = torch.Generator(device="cpu").manual_seed(0)
    v = torch.randn(m.shape[1], generator=gen).to(m.device)
    v /= v.norm()
    sigma = 0.0
    for _ in range(iters):
        u = m @ v
        un = u.norm()
        if un == 0:
            return 0.0
        v = m.T @ (u / un)
        sigma = float(v.norm())
        if sigma == 0.0:
            return 0.0
        v /= sigma
    return sigma


def _f(x: Any) -> float | None:
    if x is None:
        return None
    return float(x.item() if isinstance(x, Tensor) else x)


@torch.no_grad()
def layer_diagnostics(optimizer: Optimizer, before: dict[Key, Tensor], power_iters: int = 8) -> list[dict[str, Any]]:
    """One row per parameter: name, role, update_rms (RMS of W_after - W_before), weight_rms,
    spectral_norm and max_row_norm (≥2-D, in (d_out, d_in) layout; None for vectors), trust_ratio and
    clipped (OrScale matrices; None otherwise)."""
    rows: list[dict[str, Any]] = []
    for gi, group in enumerate(optimizer.param_groups):
        in_out = bool(group.get("in_out", False))
        for pi, p in enumerate(group["params"]):
            w = p.detach()
            prev = before.get((gi, pi))
            wf = w.float()
            upd = None if prev is None else float((wf - prev.float()).pow(2).mean().sqrt())
            matrix = w.ndim >= 2
            m = as_matrix(wf, in_out) if matrix else None
            state = optimizer.state.get(p, {})
            ratio = state.get("trust_ratio")
            clipped = state.get("clipped")
            rows.append({
                "name": _name(group, gi, pi),
                "role": group.get("role"),
                "update_rms": upd,
                "weight_rms": float(wf.pow(2).mean().sqrt()),
                "spectral_norm": spectral_norm(m, power_iters) if m is not None else None,
                "max_row_norm": float(torch.linalg.vector_norm(m, dim=1).max()) if m is not None else None,
                "trust_ratio": _f(ratio),
                "clipped": None if clipped is None else bool(_f(clipped)),
            })
    return rows
