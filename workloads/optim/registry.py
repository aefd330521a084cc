"""Name -> optimizer class, and each class's ``family`` (used by parametrizations to pick per-layer LR rules).

Families: "adam" (AdamW), "muon" (orthogonalized updates: Muon, Muown, OrScale), "normalized"
(MOGA row / column / sign geometries, whose LMOs already carry the per-layer width factors), "sign"
(Lion), "scion" (SCION and its variants: per-layer norms and radii).
"""

from __future__ import annotations

import torch
from torch.optim import Optimizer

from .lion import AdamW, Lion
from .moga import MOGA, MOGACol, MOGASign
from .muon import Muon
from .muown import Muown
from .orscale import OrScale
from .scion import ProjectedScion, Scion, ScionUnconstrained

FAMILIES = ("adam", "muon", "normalized", "sign", "scion")

REGISTRY: dict[str, type[Optimizer]] = {
    "adamw": AdamW,
    "muon": Muon,
    "moga": MOGA,
    "moga_col": MOGACol,
    "moga_sign": MOGASign,
    "muown": Muown,
    "orscale": OrScale,
    "scion": Scion,
    "scion_unconstrained": ScionUnconstrained,
    "projected_scion": ProjectedScion,
    "lion": Lion,
}


def family_of(name_or_cls: str | type[Optimizer]) -> str:
    """Family of a registered optimizer (by name or class)."""
    cls = get_optimizer_class(name_or_cls) if isinstance(name_or_cls, str) else name_or_cls
    fam = getattr(cls, "family", None)
    if fam is None and isinstance(cls, type) and issubclass(cls, torch.optim.AdamW):
        return "adam"
    if fam not in FAMILIES:
        raise ValueError(f"optimizer class {cls!r} has no family; expected one of {list(FAMILIES)}")
    return fam


def get_optimizer_class(name: str) -> type[Optimizer]:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"optimizer {name!r} is unknown; use one of {sorted(REGISTRY)}") from None
