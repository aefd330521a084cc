"""The optimizers of the papers as ``torch.optim.Optimizer`` subclasses, their geometry, a registry,
a role-aware builder and per-layer diagnostics. Imports nothing else of the project: a user can take
``from workloads.optim import Muown`` into their own training code.
"""

from .builder import ParamSpec, allowed_hparams, build_optimizer, resolved_table
from .diagnostics import layer_diagnostics, snapshot, spectral_norm
from .lion import AdamW, Lion
from .moga import MOGA, MOGACol, MOGASign
from .muon import Muon
from .muown import Muown
from .orscale import OrScale
from .registry import FAMILIES, REGISTRY, family_of, get_optimizer_class
from .scion import ProjectedScion, Scion, ScionUnconstrained

__all__ = [
    "AdamW",
    "FAMILIES",
    "Lion",
    "MOGA",
    "MOGACol",
    "MOGASign",
    "Muon",
    "Muown",
    "OrScale",
    "ParamSpec",
    "ProjectedScion",
    "REGISTRY",
    "Scion",
    "ScionUnconstrained",
    "allowed_hparams",
    "build_optimizer",
    "family_of",
    "get_optimizer_class",
    "layer_diagnostics",
    "resolved_table",
    "snapshot",
    "spectral_norm",
]
