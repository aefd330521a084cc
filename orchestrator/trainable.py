"""What a Ray Tune trial runs: `train_trial(payload)` plus the sink that joins the store and Tune.

A Tune trial's config is only its trial id; the resolved TrialConfigs, the run directory's
absolute path and the RunOptions reach the workers once per sweep as a `SweepPayload`. This
module lives in the installed package so Ray workers can import it.

Checkpoints go to both places: the store (curve so far + checkpoint.pt, what a restarted driver
resumes from) and a Ray Tune checkpoint (what `FailureConfig` retries resume from). The state
bytes contain the curve up to the checkpointed step and `run_trial` restores it, and the store's
curve file is rewritten whole at every checkpoint and at the end, so a resumed trial logs each
step exactly once.
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from dataclasses import dataclass
from typing import Any

from results.store import RunStore, TrialWriter
from workloads import faults
from workloads.config import RunOptions, TrialConfig

STATE_FILE = "state.pt"
META_FILE = "meta.json"


# What goes to Ray Tune (for progress); the full rows go to the store. Tune keeps running
# statistics per reported key for every trial, so fewer keys = a lighter driver.
REPORTED = ("train_loss", "val_loss", "val_accuracy")


def _scalars(row: dict[str, Any]) -> dict[str, Any]:
    return {k: row[k] for k in REPORTED if isinstance(row.get(k), int | float)}


class RayTuneSink:
    """A TrialSink: the store's TrialWriter plus `ray.tune.report` and Ray Tune checkpoints."""

    def __init__(self, writer: TrialWriter) -> None:
        self.writer = writer
        self.resumed_from_step: int | None = None
        self.resumed_from: str | None = None

    def begin(self, config: dict[str, Any]) -> None:
        self.writer.begin(config)

    def load_checkpoint(self) -> bytes | None:
        from ray import tune

        ckpt = tune.get_checkpoint()
        if ckpt is not None:
            with ckpt.as_directory() as d:
                path = os.path.join(d, STATE_FILE)
                if os.path.exists(path):
                    with open(path, "rb") as f:
                        data = f.read()
                    with open(os.path.join(d, META_FILE)) as f:
                        self.resumed_from_step = json.load(f)["step"]
                    self.resumed_from = "ray"
                    return data
        data = self.writer.load_checkpoint()  # a driver restarted after a crash: the store's copy
        if data is not None:
            import torch

            self.resumed_from_step = int(torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)["step"])
            self.resumed_from = "store"
        return data

    def report(self, step: int, metrics: dict[str, Any]) -> None:
        from ray import tune

        tune.report({**_scalars(metrics), "step": step})

    def checkpoint(self, step: int, state: bytes, curve: list[dict], layers: list[dict]) -> None:
        from ray import tune

        self.writer.checkpoint(step, state, curve, layers)
        with tempfile.TemporaryDirectory(prefix="hpt-ckpt-", ignore_cleanup_errors=True) as d:
            with open(os.path.join(d, STATE_FILE), "wb") as f:
                f.write(state)
            with open(os.path.join(d, META_FILE), "w") as f:
                json.dump({"step": step, "trial_id": self.writer.trial_id}, f)
            last = curve[-1] if curve else {}
            tune.report({**_scalars(last), "step": step},
                        checkpoint=tune.Checkpoint.from_directory(d))

    def finish(self, status: str, summary: dict[str, Any], curve: list[dict], layers: list[dict],
               params: list[dict], error: str | None = None) -> None:
        if self.resumed_from_step is not None:
            summary = {**summary, "resumed_from_step": self.resumed_from_step, "resumed_from": self.resumed_from}
        self.writer.finish(status, summary, curve, layers, params, error)


@dataclass(frozen=True)
class SweepPayload:
    """What the trials of one Tuner share, shipped once through Ray's object store
    (`tune.with_parameters`). A Tune trial's own config is just {"trial_id": ...}: Tune copies,
    flattens and snapshots each trial's config many times over, so it stays tiny."""

    run_dir: str  # absolute run directory (or pyarrow.fs URI)
    options: str  # RunOptions JSON
    faults: str | None  # HPT_FAULTS path, if any
    configs: dict[str, str]  # trial_id -> TrialConfig canonical JSON


def train_trial(tune_config: dict[str, Any], sweep: SweepPayload) -> None:
    """Ray Tune function trainable: one trial, `tune_config["trial_id"]` of `sweep`, reported through
    RayTuneSink."""
    import torch
    from ray import tune

    from workloads.trial import run_trial

    trial_id = tune_config["trial_id"]
    options = RunOptions.model_validate_json(sweep.options)
    torch.set_num_threads(options.threads or 1)  # a reused worker keeps its first thread count otherwise
    if sweep.faults:
        os.environ[faults.ENV_VAR] = sweep.faults
    else:
        os.environ.pop(faults.ENV_VAR, None)
    config = TrialConfig.model_validate_json(sweep.configs[trial_id])
    if config.trial_id != trial_id:
        raise RuntimeError(f"trial {trial_id}: its config hashes to {config.trial_id}")
    sink = RayTuneSink(RunStore(sweep.run_dir).writer(config.trial_id))
    result = run_trial(config, sink, options, raise_on_failure=True)
    tune.report({"hpt_status": result.status, "step": int(result.summary.get("steps_done", 0))})
