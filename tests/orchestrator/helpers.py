"""Tiny sweep specs and a CLI runner for the orchestrator tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from orchestrator.cli import main


def tiny_spec(store: Path, *, name: str = "tiny", widths: tuple[int, ...] = (32, 64),
              lrs: tuple[float, ...] = (0.001, 0.004, 0.016), steps: int = 20, **overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "workload": {"kind": "gpt2", "seq_len": 32, "head_dim": 32, "batch_size": 8, "steps": steps,
                     "eval_every": 10, "eval_batches": 1, "log_every": 5},
        "parametrization": {"kind": "sp"},
        "grid": {"width": list(widths), "depth": [1], "seed": [0]},
        "optimizers": [{"name": "adamw", "lr": list(lrs)}],
        "resources": {"cpu": 1, "gpu": 0},
        "execution": {"max_concurrent": 2, "max_failures": 1, "checkpoint_every": 10},
        "store": str(store),
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(spec.get(key), dict):
            spec[key] = {**spec[key], **value}
        else:
            spec[key] = value
    return spec


def write_spec(path: Path, spec: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def hpt(*args: str) -> int:
    return main([str(a) for a in args])


def mtime(path: str | os.PathLike) -> int:
    return os.stat(path).st_mtime_ns
