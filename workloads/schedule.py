"""LR schedules as a multiplier of the peak LR: linear warmup, then constant, cosine or WSD."""

from __future__ import annotations

import math
from collections.abc import Callable

from workloads.config import ScheduleConfig


def _constant(progress: float, cfg: ScheduleConfig) -> float:
    return 1.0


def _cosine(progress: float, cfg: ScheduleConfig) -> float:
    return cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def _wsd(progress: float, cfg: ScheduleConfig) -> float:
    # warmup-stable-decay: flat, then a linear decay over the last `decay_fraction` of training
    start = 1.0 - cfg.decay_fraction
    if progress <= start:
        return 1.0
    return 1.0 - (1.0 - cfg.min_lr_ratio) * (progress - start) / cfg.decay_fraction


SCHEDULES: dict[str, Callable[[float, ScheduleConfig], float]] = {
    "constant": _constant,
    "cosine": _cosine,
    "wsd": _wsd,
}


def lr_factor(step: int, total_steps: int, cfg: ScheduleConfig) -> float:
    """Multiplier for optimizer step `step` (0-based) of `total_steps`."""
    if step < cfg.warmup:
        return (step + 1) / cfg.warmup
    span = max(1, total_steps - cfg.warmup)
    progress = min(1.0, (step - cfg.warmup) / span)
    return SCHEDULES[cfg.kind](progress, cfg)
