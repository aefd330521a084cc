"""`hpt trial --explain`: build a trial's model, recipe and optimizer without training, and show the
resolved per-parameter table (role, shape, algorithm, lr, wd, eps, init, multipliers)."""

from __future__ import annotations

import math
from typing import Any

import torch

from workloads.build import build_trial_objects, parameter_table
from workloads.config import TrialConfig

COLUMNS = ("name", "role", "shape", "algorithm", "lr", "lr_mult", "weight_decay", "eps", "init_kind", "init_std",
           "forward_multiplier", "norm", "radius")
HEADERS = {"weight_decay": "wd", "forward_multiplier": "mult", "init_kind": "init", "lr_mult": "x lr"}


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return f"{v:.4g}"
    return str(v)


def format_table(rows: list[dict[str, Any]], columns: tuple[str, ...] = COLUMNS) -> str:
    cols = [c for c in columns if any(r.get(c) is not None for r in rows)]
    cells = [[HEADERS.get(c, c) for c in cols]] + [[_fmt(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def explain(config: TrialConfig, device: str = "cpu") -> str:
    """A readable description of what `config` would train: scale, recipe, multipliers, per-parameter table."""
    config = TrialConfig.model_validate(config)
    objs = build_trial_objects(config, device, torch.Generator().manual_seed(config.seed))
    scale, mults, pz = objs.recipe.scale, objs.recipe.forward_multipliers(), config.parametrization
    options = ", ".join(f"{k}={v}" for k, v in objs.recipe.options.items() if k != "branch_pattern")
    head = [
        f"trial {config.trial_id}: {config.workload.kind} width={config.width} depth={config.depth} seed={config.seed}",
        f"parametrization {pz.kind!r}: base_width={scale.base_width} base_depth={scale.base_depth} "
        f"m_N={scale.m_width:.4g} m_L={scale.m_depth:.4g} alpha={pz.alpha}",
        f"  options: {options}",
        f"optimizer {config.optimizer.name!r} (family {objs.family}): lr={config.optimizer.lr:g} "
        f"weight_decay={config.optimizer.weight_decay:g} hparams={dict(config.optimizer.hparams)}",
        f"forward multipliers: residual={mults.residual:.4g} output={mults.output:.4g} "
        f"attention=1/d_head^{mults.attn_scale_power:g}",
        f"parameters: {sum(rp.param.numel() for rp in objs.resolved):,} in {len(objs.resolved)} tensors "
        f"(mult: output multiplier for the head, residual multiplier inside residual branches)",
        "",
    ]
    return "\n".join(head) + format_table(parameter_table(objs))
