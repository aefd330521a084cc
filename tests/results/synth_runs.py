"""Synthetic run directories with a known optimum, written through the real store writer.

Final val loss of a trial = floor + curvature * (log2 lr - c(width, depth))^2 + noise, where
c = c0 + drift_w * log2(width / widths[0]) + drift_d * log2(depth / depths[0]).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Sequence

import numpy as np

from results.store import RunStore

SPEC = "name: synthetic\nworkload: {kind: gpt2, steps: 100}\n"


def make_run(
    path: str,
    *,
    widths: Sequence[int] = (64, 128, 256),
    depths: Sequence[int] = (2,),
    optimizers: dict[str, tuple[float, float]] | None = None,  # name -> (drift_w, drift_d)
    log2_lrs: Sequence[float] = tuple(range(-12, -3)),
    seeds: Sequence[int] = (0, 1, 2),
    c0: float = -8.0,
    curvature: float = 0.05,
    floor: float = 2.0,
    noise: float = 0.005,
    eval_noise: float = 0.0,
    steps: int = 100,
    eval_every: int = 20,
    log_every: int = 10,
    diverge_above: float | None = None,  # log2 lr - c above which a trial diverges
    status_of: Callable[[dict], str | None] | None = None,  # override status per config
    with_layers: bool = False,
    rng_seed: int = 0,
) -> RunStore:
    rng = np.random.default_rng(rng_seed)
    store = RunStore(path)
    store.write_spec(SPEC)
    optimizers = optimizers or {"adamw": (0.0, 0.0)}
    for name, (drift_w, drift_d) in optimizers.items():
        for w in widths:
            for d in depths:
                c = c0 + drift_w * math.log2(w / widths[0]) + drift_d * math.log2(d / depths[0])
                for x in log2_lrs:
                    for s in seeds:
                        cfg = {
                            "workload": {"kind": "gpt2", "steps": steps, "batch_size": 32,
                                         "eval_every": eval_every, "log_every": log_every},
                            "width": w, "depth": d, "seed": s,
                            "parametrization": {"kind": "mup", "base_width": widths[0], "alpha": 1.0},
                            "optimizer": {"name": name, "lr": float(2.0**x), "weight_decay": 0.0,
                                          "hparams": {"betas": [0.9, 0.95]}},
                        }
                        tid = hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:16]
                        final = floor + curvature * (x - c) ** 2 + noise * rng.standard_normal()
                        status = "completed"
                        if diverge_above is not None and x - c > diverge_above:
                            status = "diverged"
                        if status_of is not None:
                            status = status_of({**cfg, "trial_id": tid}) or status
                        write_trial(store, tid, cfg, status, final, steps, eval_every, log_every, eval_noise,
                                    rng, with_layers)
    return store


def write_trial(store: RunStore, tid: str, cfg: dict, status: str, final: float, steps: int, eval_every: int,
                log_every: int, eval_noise: float, rng: np.random.Generator, with_layers: bool) -> None:
    writer = store.writer(tid)
    writer.begin({"trial_id": tid, **cfg})
    if status == "running":
        return
    last = steps if status != "diverged" else steps // 2
    curve = []
    for step in range(0, last + 1, log_every):
        loss = final + 3.0 * math.exp(-step / (steps / 5))
        row = {"step": step, "items": step * 32, "train_loss": loss + 0.01, "lr": cfg["optimizer"]["lr"],
               "grad_norm": 1.0, "wall_time_s": step * 0.01, "val_loss": math.nan}
        if step % eval_every == 0:
            row["val_loss"] = loss + eval_noise * float(rng.standard_normal())
        curve.append(row)
    if status == "diverged":
        curve.append({"step": last + 1, "items": (last + 1) * 32, "train_loss": math.inf, "lr": 0.0,
                      "grad_norm": math.nan, "wall_time_s": 1.0, "val_loss": math.nan})
    evals = [r["val_loss"] for r in curve if not math.isnan(r["val_loss"])]
    summary = {"final_train_loss": curve[-1]["train_loss"], "steps_done": curve[-1]["step"],
               "items_seen": curve[-1]["items"], "wall_time_s": curve[-1]["wall_time_s"]}
    if evals and status == "completed":
        summary.update(final_val_loss=evals[-1], best_val_loss=min(evals))
    if status == "diverged":
        summary["diverged_at_step"] = last + 1
    layers = []
    if with_layers:
        for step in range(0, last + 1, eval_every):
            for name, role in (("wte", "embedding"), ("h.0.attn", "hidden"), ("lm_head", "output")):
                layers.append({"step": step, "name": name, "role": role, "update_rms": 1e-3,
                               "weight_rms": 0.02, "spectral_norm": 1.0 + step / steps * (2 if role == "hidden" else 1),
                               "max_row_norm": 0.5, "trust_ratio": 0.5 + 0.1 * math.sin(step), "clipped": False})
    error = "RuntimeError: boom" if status == "failed" else None
    writer.finish(status, summary, curve, layers, [], error=error)
