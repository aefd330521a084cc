"""Roles -> param groups -> an optimizer from the registry, by name; and the resolved per-parameter table.

Routing (one param group per ParamSpec; groups carry "name", "role", "algorithm"):
- "adamw", "lion": every parameter uniformly.
- "muon", "moga", "moga_col", "moga_sign", "muown", "orscale": hidden ≥2-D weights take the matrix
  rule; embedding, output, vectors (and hidden vectors) take AdamW (betas (0.9, 0.95), eps 1e-8, the same
  lr unless ``adam_lr`` is given). ``spec.extra={"algorithm": ...}`` overrides.
- "scion", "scion_unconstrained", "projected_scion": every layer with a per-role norm and radius:
  embedding Sign (normalized=False), hidden Spectral (SpectralConv for 4-D), output Sign, vector BiasRMS;
  radii 1 / 3 / 10 / 1 (the shallow nanoGPT width-transfer recipe). Hparams ``{role}_norm``,
  ``{role}_radius``, ``embedding_normalized``; per-parameter overrides through ``spec.extra``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.optim import Optimizer

from ._base import ADAMW, ADAMW_GROUP_DEFAULTS, HybridOptimizer
from .registry import REGISTRY, get_optimizer_class
from .scion import SCION_NORMS, Scion, resolve_norm

ROLES = ("embedding", "hidden", "output", "vector")

SCION_ROLE_DEFAULTS: dict[str, dict[str, Any]] = {
    "embedding": {"norm": "sign", "radius": 1.0, "normalized": False},
    "hidden": {"norm": "auto", "radius": 3.0, "normalized": True},
    "output": {"norm": "sign", "radius": 10.0, "normalized": True},
    "vector": {"norm": "bias_rms", "radius": 1.0, "normalized": True},
}
_HYBRID_EXTRA_HPARAMS = ("adam_betas", "adam_eps", "adam_lr", "adam_weight_decay")
_SCION_EXTRA_HPARAMS = tuple(f"{r}_{k}" for r in ROLES for k in ("norm", "radius")) + ("embedding_normalized",)
_ADAMW_GROUP_KEYS = ("algorithm", "lr", "weight_decay", "betas", "eps")


@dataclass
class ParamSpec:
    """One parameter with its role and the parametrization's multipliers / overrides."""

    name: str
    param: torch.nn.Parameter
    role: str  # "embedding" | "hidden" | "output" | "vector"
    lr_mult: float = 1.0
    wd_mult: float = 1.0
    eps_mult: float = 1.0
    extra: dict = field(default_factory=dict)
    in_out: bool = False  # stored (fan_in, fan_out), e.g. nn.Embedding (vocab, d)


def constructor_hparams(cls: type[Optimizer]) -> list[str]:
    """Keyword arguments of an optimizer class (through **kwargs-forwarding subclasses), minus params/lr/wd."""
    names: list[str] = []
    for klass in cls.__mro__:
        if klass in (HybridOptimizer, Optimizer, object):
            break
        if "__init__" not in vars(klass):
            continue
        for pname, prm in inspect.signature(vars(klass)["__init__"]).parameters.items():
            if prm.kind in (prm.VAR_KEYWORD, prm.VAR_POSITIONAL) or pname in ("self", "params", "lr", "weight_decay"):
                continue
            if pname not in names:
                names.append(pname)
        if klass.__module__.startswith("torch."):
            break
    return names


def allowed_hparams(name: str) -> list[str]:
    cls = get_optimizer_class(name)
    extra: tuple[str, ...] = ()
    if issubclass(cls, Scion):
        # norm / radius / normalized come per role ({role}_norm, ...); the registry name fixes `constrained`
        hidden = {"norm", "radius", "normalized", "constrained"}
        return [k for k in constructor_hparams(cls) if k not in hidden] + list(_SCION_EXTRA_HPARAMS)
    if issubclass(cls, HybridOptimizer):
        extra = _HYBRID_EXTRA_HPARAMS
    return constructor_hparams(cls) + list(extra)


def _check(specs: list[ParamSpec]) -> None:
    seen: set[int] = set()
    for s in specs:
        if s.role not in ROLES:
            raise ValueError(f"ParamSpec {s.name!r}: role={s.role!r}; use one of {list(ROLES)}")
        if id(s.param) in seen:
            raise ValueError(f"ParamSpec {s.name!r}: the same parameter appears twice")
        seen.add(id(s.param))


def build_optimizer(
    name: str, specs: list[ParamSpec], lr: float, weight_decay: float = 0.0, **hparams: Any
) -> Optimizer:
    """Build registered optimizer ``name`` over ``specs`` (one param group per spec).

    Group lr = lr·lr_mult, weight_decay = weight_decay·wd_mult, Adam eps = eps·eps_mult. Unknown names
    or hparams raise ValueError listing the allowed values.
    """
    cls = get_optimizer_class(name)
    allowed = allowed_hparams(name)
    unknown = sorted(set(hparams) - set(allowed))
    if unknown:
        raise ValueError(f"optimizer {name!r}: unknown hparam(s) {unknown}; allowed: {sorted(allowed)}")
    _check(specs)
    ctor = {k: v for k, v in hparams.items() if k not in _HYBRID_EXTRA_HPARAMS + _SCION_EXTRA_HPARAMS}
    probe = cls([torch.nn.Parameter(torch.zeros(2, 2))], lr=lr, weight_decay=weight_decay, **ctor)
    defaults = probe.defaults
    groups = [_group(name, cls, defaults, s, lr, weight_decay, hparams) for s in specs]
    return cls(groups, lr=lr, weight_decay=weight_decay, **ctor)


def _group(
    name: str, cls: type[Optimizer], defaults: dict[str, Any], spec: ParamSpec, lr: float, wd: float,
    hp: dict[str, Any],
) -> dict[str, Any]:
    g: dict[str, Any] = {"params": [spec.param], "name": spec.name, "role": spec.role, "in_out": bool(spec.in_out)}
    extra = dict(spec.extra)
    if not issubclass(cls, HybridOptimizer):  # adamw, lion: uniform
        g["algorithm"] = name
        g["lr"] = lr * spec.lr_mult
        g["weight_decay"] = wd * spec.wd_mult
        if "eps" in defaults:
            g["eps"] = float(extra.pop("eps", defaults["eps"])) * spec.eps_mult
        extra.pop("algorithm", None)
        _apply_extra(name, g, extra, allowed=list(defaults))
        return g
    rule = cls.rule  # type: ignore[attr-defined]
    if issubclass(cls, Scion):
        default_algo = rule
    else:
        default_algo = rule if (spec.role == "hidden" and spec.param.ndim >= 2) else ADAMW
    algo = extra.pop("algorithm", default_algo)
    if algo not in (rule, ADAMW):
        raise ValueError(f"ParamSpec {spec.name!r}: algorithm={algo!r}; {name!r} allows {[rule, ADAMW]}")
    g["algorithm"] = algo
    if algo == ADAMW:
        g["lr"] = float(hp["adam_lr"] if hp.get("adam_lr") is not None else lr) * spec.lr_mult
        adam_wd = hp.get("adam_weight_decay")
        g["weight_decay"] = float(adam_wd if adam_wd is not None else wd) * spec.wd_mult
        g["betas"] = tuple(extra.pop("betas", hp.get("adam_betas", ADAMW_GROUP_DEFAULTS["betas"])))
        g["eps"] = float(extra.pop("eps", hp.get("adam_eps", ADAMW_GROUP_DEFAULTS["eps"]))) * spec.eps_mult
        _apply_extra(name, g, extra, allowed=list(_ADAMW_GROUP_KEYS))
        return g
    g["lr"] = lr * spec.lr_mult
    g["weight_decay"] = wd * spec.wd_mult
    if rule == "muown":
        g["eps"] = float(extra.pop("eps", defaults["eps"])) * spec.eps_mult
        if "qkv_chunks" not in extra and spec.param.ndim == 2:
            d_out, d_in = spec.param.shape
            if d_out == 3 * d_in and any(k in spec.name for k in ("qkv", "c_attn")):
                g["qkv_chunks"] = 3
    if issubclass(cls, Scion):
        role_def = SCION_ROLE_DEFAULTS[spec.role]
        g["norm"] = hp.get(f"{spec.role}_norm", role_def["norm"])
        g["radius"] = float(hp.get(f"{spec.role}_radius", role_def["radius"]))
        normalized = hp.get("embedding_normalized", role_def["normalized"]) if spec.role == "embedding" \
            else role_def["normalized"]
        g["normalized"] = bool(normalized)
        if spec.param.ndim < 2:
            g["norm"] = "bias_rms" if g["norm"] not in ("bias_rms", "auto") else g["norm"]
        if g["norm"] not in SCION_NORMS:
            raise ValueError(f"ParamSpec {spec.name!r}: SCION norm={g['norm']!r}; use one of {list(SCION_NORMS)}")
    _apply_extra(name, g, extra, allowed=list(defaults))
    return g


def _apply_extra(name: str, g: dict[str, Any], extra: dict[str, Any], allowed: list[str]) -> None:
    for k, v in extra.items():
        if k not in allowed or k == "params":
            raise ValueError(
                f"ParamSpec {g['name']!r}: extra key {k!r} is not a {name!r} group option "
                f"({g['algorithm']}); allowed: {sorted(a for a in allowed if a != 'params')}"
            )
        g[k] = v


def _shape_str(p: torch.Tensor) -> str:
    return "x".join(str(d) for d in p.shape) if p.ndim else "scalar"


def resolved_table(optimizer: Optimizer) -> list[dict[str, Any]]:
    """One row per parameter: name, role, shape, algorithm, lr, weight_decay, eps (Adam eps or None),
    norm (SCION's LMO or MOGA's geometry; None otherwise) and radius (SCION; None otherwise)."""
    rows: list[dict[str, Any]] = []
    default_algo = getattr(optimizer, "rule", None) or type(optimizer).__name__.lower()
    for gi, group in enumerate(optimizer.param_groups):
        algo = group.get("algorithm", default_algo)
        adam_like = algo in (ADAMW, "muown") or (isinstance(optimizer, torch.optim.AdamW))
        for pi, p in enumerate(group["params"]):
            base = group.get("name")
            name = (base if len(group["params"]) == 1 else f"{base}.{pi}") if base else f"group{gi}.param{pi}"
            is_scion = algo == "scion"
            rows.append({
                "name": name,
                "role": group.get("role"),
                "shape": _shape_str(p),
                "algorithm": algo,
                "lr": float(group["lr"]),
                "weight_decay": float(group.get("weight_decay", 0.0)),
                "eps": float(group["eps"]) if adam_like and "eps" in group else None,
                "norm": resolve_norm(group["norm"], p) if is_scion else (group["norm"] if algo == "moga" else None),
                "radius": float(group["radius"]) if is_scion else None,
            })
    return rows


__all__ = ["ParamSpec", "build_optimizer", "resolved_table", "allowed_hparams", "REGISTRY", "ROLES"]
