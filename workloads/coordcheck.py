"""Coordinate check: does every module's activation size stay put as the model gets wider (or deeper)?

For widths (or depths) v_0 < ... < v_n, seeds and steps t = 1..k (t = 1 is the initialization, t = k
is after k-1 updates at a fixed LR on the task's training batches), record each module's mean
|activation| with forward hooks, averaged over seeds. Per module and step report the log-log slope
against the scale and the spread (max/min across scales). Verdict: a module *grows* at a step when
its slope exceeds `tolerance`; the check passes when nothing grows (a shrinking module — e.g. the
logits at initialization under μP, ∝ 1/sqrt(width) — passes unless `strict`).
(../shared/ALGORITHMS.md §8; Tensor Programs V, arXiv 2203.03466, §D.)

Modules recorded: every submodule except containers (ModuleList/ModuleDict), Identity, and layers
that own an `output`-role weight (their raw output is taken before the output multiplier); the
model's own output is recorded as `logits`. In a depth check, children of containers whose length
changes with depth are merged: `blocks.3.attn` -> `blocks.*.attn` (mean over blocks).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from torch import nn

from workloads.build import build_trial_objects
from workloads.config import (
    GPT2Workload,
    OptimizerConfig,
    ParametrizationConfig,
    ResNetWorkload,
    TrialConfig,
)
from workloads.roles import Role, named_roles

Axis = Literal["width", "depth"]
LOGITS = "logits"
DEFAULT_TOLERANCE = 0.15  # |log-log slope| above which a module counts as growing/shrinking
# LRs at which a wrong width parametrization is visible within 3 updates at widths 64..512
# (GPT-2, depth 2, seq 16, batch 8): large enough to move, small enough not to diverge under μP.
DEFAULT_LRS: dict[str, float] = {
    "adamw": 1e-2, "lion": 1e-3, "muon": 0.05, "muown": 0.05, "orscale": 0.05,
    "moga": 0.05, "moga_col": 0.05, "moga_sign": 0.05,
    "scion": 0.01, "scion_unconstrained": 0.01, "projected_scion": 0.01,
}


def default_workload(kind: str) -> GPT2Workload | ResNetWorkload:
    """A tiny workload for coordinate checks: seq 16, batch 8, head dim 32 (GPT-2); batch 16 (ResNet)."""
    if kind == "gpt2":
        return GPT2Workload(seq_len=16, batch_size=8, head_dim=32, steps=1, eval_batches=1)
    if kind == "resnet":
        return ResNetWorkload(batch_size=16, augment=False, steps=1, eval_batches=1)
    raise ValueError(f"workload={kind!r}: use 'gpt2' or 'resnet'")


@dataclass
class CoordCheckResult:
    axis: Axis
    values: list[int]
    steps: int
    seeds: list[int]
    modules: list[str]
    mean_abs: dict[str, np.ndarray]  # module -> [len(values), steps], mean over seeds
    tolerance: float
    strict: bool
    meta: dict[str, Any] = field(default_factory=dict)
    wall_time_s: float = 0.0

    def slope(self, module: str) -> np.ndarray:
        """Least-squares slope of log(mean |act|) against log(scale), per step."""
        x = np.log(np.asarray(self.values, dtype=float))
        out = np.full(self.steps, np.nan)
        for t in range(self.steps):
            y = self.mean_abs[module][:, t]
            if not np.all(np.isfinite(y)):
                continue
            if np.all(y == 0):
                out[t] = 0.0  # e.g. a zero-initialized readout at t = 1
            elif np.all(y > 0):
                out[t] = np.polyfit(x, np.log(y), 1)[0]
        return out

    def spread(self, module: str) -> np.ndarray:
        """max/min across scales, per step (1 when all are 0; inf when some are 0 or not finite)."""
        v = self.mean_abs[module]
        out = np.full(self.steps, np.inf)
        for t in range(self.steps):
            y = v[:, t]
            if np.all(y == 0):
                out[t] = 1.0
            elif np.all(np.isfinite(y)) and np.all(y > 0):
                out[t] = float(y.max() / y.min())
        return out

    def verdicts(self, module: str) -> list[str]:
        """Per step: flat | grows | shrinks | nonfinite."""
        out = []
        for s in self.slope(module):
            if not math.isfinite(s):
                out.append("nonfinite")
            elif s > self.tolerance:
                out.append("grows")
            elif s < -self.tolerance:
                out.append("shrinks")
            else:
                out.append("flat")
        return out

    def failures(self) -> list[tuple[str, int, str]]:
        """(module, step, verdict) that fail the check."""
        bad = {"grows", "nonfinite"} | ({"shrinks"} if self.strict else set())
        return [(m, t + 1, v) for m in self.modules for t, v in enumerate(self.verdicts(m)) if v in bad]

    @property
    def passed(self) -> bool:
        return not self.failures()

    def to_dict(self) -> dict[str, Any]:
        def clean(a: np.ndarray) -> list:
            return [None if not math.isfinite(float(x)) else float(x) for x in np.ravel(a)]

        return {
            "axis": self.axis,
            "values": self.values,
            "steps": self.steps,
            "seeds": self.seeds,
            "tolerance": self.tolerance,
            "strict": self.strict,
            "passed": self.passed,
            "failures": [{"module": m, "step": t, "verdict": v} for m, t, v in self.failures()],
            "wall_time_s": round(self.wall_time_s, 3),
            **self.meta,
            "modules": {
                m: {
                    "mean_abs": [clean(self.mean_abs[m][:, t]) for t in range(self.steps)],  # [step][scale]
                    "slope": clean(self.slope(m)),
                    "spread": clean(self.spread(m)),
                    "verdict": self.verdicts(m),
                }
                for m in self.modules
            },
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def report(self) -> str:
        """Human-readable: per module and step, slope and spread; failures marked; the verdict."""
        meta = self.meta
        lines = [
            f"coordinate check over {self.axis} {self.values}, steps 1..{self.steps} (1 = init), "
            f"seeds {self.seeds}: {meta.get('workload')} / {meta.get('parametrization')} / "
            f"{meta.get('optimizer')} lr={meta.get('lr')}",
            f"slope of log mean|act| vs log {self.axis} (spread max/min); tolerance |slope| <= {self.tolerance}",
        ]
        name_w = max(len(m) for m in self.modules)
        lines.append(" " * name_w + "  " + "  ".join(f"{'t=' + str(t + 1):>15}" for t in range(self.steps)))
        for m in self.modules:
            cells = []
            for s, sp, v in zip(self.slope(m), self.spread(m), self.verdicts(m), strict=True):
                mark = {"grows": "^", "shrinks": "v", "nonfinite": "!", "flat": " "}[v]
                cells.append(f"{s:+6.2f} ({sp:5.2f}x){mark}")
            lines.append(f"{m:<{name_w}}  " + "  ".join(f"{c:>15}" for c in cells))
        fails = self.failures()
        if fails:
            worst: dict[str, list[int]] = defaultdict(list)
            for m, t, _ in fails:
                worst[m].append(t)
            lines.append(f"FAIL: {len(worst)} module(s) grow with {self.axis}: "
                         + ", ".join(f"{m} (steps {ts})" for m, ts in worst.items()))
        else:
            lines.append(f"PASS: no module grows with {self.axis} (^ grows, v shrinks)")
        lines.append(f"time: {self.wall_time_s:.1f} s")
        return "\n".join(lines)


def _recorded_modules(model: nn.Module) -> dict[str, nn.Module]:
    output_owners = set()
    for name, _, role in named_roles(model):
        if role is Role.OUTPUT:
            output_owners.add(name.rsplit(".", 1)[0] if "." in name else "")
    out = {}
    for name, module in model.named_modules():
        if not name or name in output_owners:
            continue
        if isinstance(module, nn.ModuleList | nn.ModuleDict | nn.Identity):
            continue
        out[name] = module
    return out


def _container_lengths(model: nn.Module) -> dict[str, int]:
    return {name: len(m) for name, m in model.named_modules() if isinstance(m, nn.ModuleList | nn.Sequential)}


def _canonical(name: str, varying: set[str]) -> str:
    parts = name.split(".")
    for i in range(1, len(parts)):
        if parts[i].isdigit() and ".".join(parts[:i]) in varying:
            parts[i] = "*"
    return ".".join(parts)


@torch.no_grad()
def _mean_abs(out: Any) -> float | None:
    if isinstance(out, tuple | list):
        out = out[0] if out else None
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        return None
    return float(out.detach().abs().mean())


def _record_run(config: TrialConfig, steps: int, device: str) -> tuple[list[dict[str, float]], dict[str, int]]:
    """Per step t = 1..steps, {module: mean |act|} of the forward pass before update t."""
    from workloads.trial import seed_everything

    generator = seed_everything(config.seed)
    objs = build_trial_objects(config, device, generator)
    model, task, optimizer = objs.model, objs.task, objs.optimizer
    current: dict[str, float] = {}

    def hook_for(name: str):
        def hook(_module: nn.Module, _inputs: Any, output: Any) -> None:
            value = _mean_abs(output)
            if value is not None:
                current[name] = value
        return hook

    handles = [m.register_forward_hook(hook_for(n)) for n, m in _recorded_modules(model).items()]
    handles.append(model.register_forward_hook(hook_for(LOGITS)))
    records = []
    model.train()
    try:
        for t in range(steps):
            current = {}
            loss = task.loss(model, task.train_batch(t))
            records.append(dict(current))
            if t + 1 < steps:
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
    finally:
        for h in handles:
            h.remove()
    return records, _container_lengths(model)


def coord_check(
    workload: GPT2Workload | ResNetWorkload | str = "gpt2",
    parametrization: ParametrizationConfig | str = "sp",
    optimizer: OptimizerConfig | str = "adamw",
    *,
    widths: list[int] | None = None,
    depths: list[int] | None = None,
    width: int | None = None,
    depth: int = 2,
    steps: int = 4,
    seeds: int | list[int] = 2,
    lr: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE,
    strict: bool = False,
    device: str = "cpu",
) -> CoordCheckResult:
    """Run a width (`widths`) or depth (`depths`) coordinate check; see the module doc.

    `parametrization.base_width` / `base_depth` default to the smallest width / depth checked (the
    recipe equals SP there). `width` is the fixed width of a depth check (default 128 for GPT-2,
    1 for ResNet); `depth` the fixed depth of a width check.
    """
    if (widths is None) == (depths is None):
        raise ValueError("give exactly one of widths=[...] or depths=[...]")
    axis: Axis = "width" if widths is not None else "depth"
    values = sorted(set(widths if widths is not None else depths or []))
    if len(values) < 2:
        raise ValueError(f"{axis}s={values}: a coordinate check needs at least two distinct values")
    if steps < 1:
        raise ValueError(f"steps={steps} must be >= 1")
    wl = default_workload(workload) if isinstance(workload, str) else workload
    pz = ParametrizationConfig(kind=parametrization) if isinstance(parametrization, str) else parametrization
    if isinstance(optimizer, str):
        if lr is None and optimizer not in DEFAULT_LRS:
            raise ValueError(f"optimizer {optimizer!r} has no default coordinate-check LR; pass lr=")
        optimizer = OptimizerConfig(name=optimizer, lr=lr if lr is not None else DEFAULT_LRS[optimizer])
    elif lr is not None:
        optimizer = optimizer.model_copy(update={"lr": lr})
    if axis == "width" and pz.base_width is None:
        pz = pz.model_copy(update={"base_width": values[0]})
    if axis == "depth" and pz.base_depth is None:
        pz = pz.model_copy(update={"base_depth": values[0]})
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if not seed_list:
        raise ValueError("seeds: need at least one seed")
    fixed_width = width if width is not None else (128 if wl.kind == "gpt2" else 1)

    t0 = time.perf_counter()
    # sums[module][value_index][step] over seeds (and over merged blocks in a depth check)
    sums: dict[str, np.ndarray] = {}
    counts: dict[str, np.ndarray] = {}
    lengths: list[dict[str, int]] = []
    raw: list[tuple[int, list[dict[str, float]]]] = []
    for i, v in enumerate(values):
        w, d = (v, depth) if axis == "width" else (fixed_width, v)
        for seed in seed_list:
            cfg = TrialConfig(workload=wl, width=w, depth=d, seed=seed, parametrization=pz, optimizer=optimizer)
            records, lens = _record_run(cfg, steps, device)
            raw.append((i, records))
            lengths.append(lens)
    varying: set[str] = set()
    if axis == "depth":
        names = set.intersection(*(set(lens) for lens in lengths))
        varying = {n for n in names if len({lens[n] for lens in lengths}) > 1}
    order: list[str] = []
    for i, records in raw:
        for t, rec in enumerate(records):
            for name, value in rec.items():
                key = _canonical(name, varying)
                if key not in sums:
                    sums[key] = np.zeros((len(values), steps))
                    counts[key] = np.zeros((len(values), steps))
                    order.append(key)
                sums[key][i, t] += value
                counts[key][i, t] += 1
    modules = [m for m in order if np.all(counts[m] > 0)]  # present at every scale
    if LOGITS in modules:
        modules.remove(LOGITS)
        modules.append(LOGITS)
    mean_abs = {m: sums[m] / counts[m] for m in modules}
    meta = {
        "workload": wl.kind,
        "parametrization": pz.kind,
        "base_width": pz.base_width,
        "base_depth": pz.base_depth,
        "alpha": pz.alpha,
        "options": dict(pz.options),
        "optimizer": optimizer.name,
        "lr": optimizer.lr,
        "hparams": dict(optimizer.hparams),
        "fixed": {"depth": depth} if axis == "width" else {"width": fixed_width},
    }
    return CoordCheckResult(axis, values, steps, seed_list, modules, mean_abs, tolerance, strict, meta,
                            time.perf_counter() - t0)


def plot(result: CoordCheckResult, path: str, title: str | None = None) -> None:
    """One panel per step (log-log mean |act| vs scale), one line per module; growing modules dashed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = result.steps
    legend_w = 2.0  # inches right of the panels
    fig, axes = plt.subplots(1, n, figsize=(3.2 * n + legend_w, 3.6), sharey=True, squeeze=False)
    cmap = plt.get_cmap("tab20")
    for t in range(n):
        ax = axes[0, t]
        for k, m in enumerate(result.modules):
            y = result.mean_abs[m][:, t]
            grows = result.verdicts(m)[t] == "grows"
            ax.plot(result.values, y, marker="o", ms=3, lw=1.4, ls="--" if grows else "-",
                    color=cmap(k % 20), label=m)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(result.values)
        ax.set_xticklabels([str(v) for v in result.values], fontsize=8)
        ax.set_title(f"t = {t + 1}" + (" (init)" if t == 0 else ""), fontsize=10)
        ax.set_xlabel(result.axis)
        ax.grid(True, which="major", alpha=0.3)
    axes[0, 0].set_ylabel("mean |activation|")
    meta = result.meta
    verdict = "PASS" if result.passed else "FAIL"
    fig.suptitle(title or f"{meta.get('workload')} {meta.get('parametrization')} + {meta.get('optimizer')} "
                          f"(lr {meta.get('lr'):g}): {verdict}", fontsize=11)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center right", fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0, 1 - legend_w / (3.2 * n + legend_w), 0.94))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def short_name(module: str) -> str:
    """`blocks.0.attn.c_proj` -> `b0.attn.c_proj` (for compact listings)."""
    return re.sub(r"^blocks\.(\d+|\*)\.", r"b\1.", module)
