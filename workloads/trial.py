"""run_trial(config, sink): build, train, evaluate, report rows; detect divergence; resume.

One trial is one fully resolved grid point. It seeds everything, builds the task's model with
the recipe's forward multipliers, initializes every parameter by its role, builds the optimizer
from per-parameter rules, trains with the LR schedule, and hands curves, per-layer diagnostics
and the resolved parameter table to the sink. A diverged trial is data, not an error.
"""

from __future__ import annotations

import io
import math
import random
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from workloads import faults
from workloads.build import build_trial_objects, parameter_table
from workloads.config import RunOptions, TrialConfig
from workloads.optim.diagnostics import layer_diagnostics, snapshot
from workloads.schedule import lr_factor
from workloads.sink import TrialSink


class TrialFailure(RuntimeError):
    """Raised (after the sink recorded `failed`) so an executor can retry the trial."""


@dataclass
class TrialResult:
    trial_id: str
    status: str  # completed | diverged | failed
    summary: dict[str, Any]
    curve: list[dict[str, Any]] = field(repr=False)
    error: str | None = None


def pick_device(requested: str) -> str:
    if requested != "auto":
        return requested
    return "cuda" if torch.cuda.is_available() else "cpu"


def seed_everything(seed: int) -> torch.Generator:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


class _Diverged(Exception):
    pass


def run_trial(
    config: TrialConfig | dict[str, Any],
    sink: TrialSink,
    options: RunOptions | None = None,
    *,
    raise_on_failure: bool = False,
) -> TrialResult:
    """Run one trial to completion (or divergence) and report it through `sink`."""
    config = TrialConfig.model_validate(config)
    options = options or RunOptions()
    trial_id = config.trial_id
    if options.threads:
        torch.set_num_threads(options.threads)  # a reused Ray worker keeps its first thread count
    device = pick_device(options.device)
    wl = config.workload
    sink.begin({"trial_id": trial_id, **config.model_dump(mode="json")})

    curve: list[dict[str, Any]] = []
    layers: list[dict[str, Any]] = []
    params_table: list[dict[str, Any]] = []
    summary: dict[str, Any] = {}
    start_step, elapsed_before, initial_loss = 0, 0.0, None
    item_unit: str | None = None
    try:
        objs = build_trial_objects(config, device, seed_everything(config.seed))
        task, model, optimizer = objs.task, objs.model, objs.optimizer
        item_unit = task.item_unit
        peak_lrs = [group["lr"] for group in optimizer.param_groups]
        params_table = parameter_table(objs)

        resumed = sink.load_checkpoint()
        if resumed is not None:
            state = torch.load(io.BytesIO(resumed), map_location=device, weights_only=False)
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            task.load_state_dict(state["task"])
            start_step, elapsed_before = state["step"], state["elapsed"]
            initial_loss, curve, layers = state["initial_loss"], state["curve"], state["layers"]

        fault_plan = faults.plan_for(trial_id)
        diag_every = wl.diag_every or wl.eval_every
        params = [p for p in model.parameters() if p.requires_grad]
        t0 = time.perf_counter()

        def wall() -> float:
            return elapsed_before + time.perf_counter() - t0

        if start_step == 0:  # the initialization's held-out loss anchors every curve
            curve.append({**_curve_row(0, 0, math.nan, 0.0, math.nan, 0.0), **task.evaluate(model)})
        model.train()
        for step in range(start_step, wl.steps):
            fault_plan.before_step(step)
            factor = lr_factor(step, wl.steps, wl.schedule)
            for group, peak in zip(optimizer.param_groups, peak_lrs, strict=True):
                group["lr"] = peak * factor
            loss = task.loss(model, task.train_batch(step))
            loss_value = loss.item()
            if initial_loss is None:
                initial_loss = loss_value
            done = step + 1
            diverged = not math.isfinite(loss_value) or (
                step >= config.divergence.grace_steps
                and loss_value > config.divergence.loss_multiple * initial_loss
            )
            if diverged:
                curve.append(_curve_row(done, task.items_per_step(), loss_value, config.optimizer.lr * factor,
                                        math.nan, wall()))
                summary = {"diverged_at_step": done}
                raise _Diverged()
            loss.backward()
            is_eval = done % wl.eval_every == 0 or done == wl.steps
            is_logged = is_eval or done % wl.log_every == 0
            grad_norm = _grad_norm(params) if is_logged else math.nan
            take_diag = done % diag_every == 0 or done == wl.steps
            before = snapshot(optimizer) if take_diag else None
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if before is not None:
                layers.extend({"step": done, **row} for row in layer_diagnostics(optimizer, before))
            if is_logged:
                row = _curve_row(done, task.items_per_step(), loss_value, config.optimizer.lr * factor, grad_norm,
                                 wall())
                if is_eval:
                    row.update(task.evaluate(model))
                curve.append(row)
                sink.report(done, row)
            if options.checkpoint_every and done % options.checkpoint_every == 0 and done < wl.steps:
                state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                         "task": task.state_dict(), "step": done, "elapsed": wall(),
                         "initial_loss": initial_loss, "curve": curve, "layers": layers}
                sink.checkpoint(done, _to_bytes(state), curve, layers)
        status = "completed"
    except _Diverged:
        status = "diverged"
    except Exception as exc:  # a crash is recorded with its traceback, then surfaced
        error = traceback.format_exc()
        summary.update(_summarize(curve, item_unit))
        sink.finish("failed", summary, curve, layers, params_table, error=error)
        if raise_on_failure:
            raise TrialFailure(f"trial {trial_id} failed: {exc}") from exc
        return TrialResult(trial_id, "failed", summary, curve, error)
    summary.update(_summarize(curve, item_unit))
    sink.finish(status, summary, curve, layers, params_table)
    return TrialResult(trial_id, status, summary, curve)


def _curve_row(step: int, items_per_step: int, train_loss: float, lr: float, grad_norm: float,
               wall_time_s: float) -> dict[str, Any]:
    """One logged step: the curve schema every workload shares (evaluations add val_* keys)."""
    return {"step": step, "items": step * items_per_step, "train_loss": train_loss, "lr": lr,
            "grad_norm": grad_norm, "wall_time_s": wall_time_s}


def _to_bytes(state: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def _grad_norm(params: list[torch.nn.Parameter]) -> float:
    return torch.nn.utils.get_total_norm([p.grad for p in params if p.grad is not None]).item()


def _summarize(curve: list[dict[str, Any]], item_unit: str | None) -> dict[str, Any]:
    """Final metrics for the trials table (last eval, best eval, last train loss)."""
    out: dict[str, Any] = {"item_unit": item_unit}
    trained = [r for r in curve if r["step"] > 0]
    evals = [r for r in curve if r.get("val_loss") is not None and not _isnan(r.get("val_loss"))]
    if trained:
        last = trained[-1]
        out.update(final_train_loss=last["train_loss"], steps_done=last["step"], items_seen=last["items"],
                   wall_time_s=last["wall_time_s"])
    if evals:
        out["final_val_loss"] = evals[-1]["val_loss"]
        out["best_val_loss"] = min(r["val_loss"] for r in evals)
        if "val_accuracy" in evals[-1]:
            out["final_val_accuracy"] = evals[-1]["val_accuracy"]
    return out


def _isnan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)
