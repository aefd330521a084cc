"""The trial runner on the real GPT-2 workload and the committed Shakespeare corpus."""

from __future__ import annotations

import gzip
import math
import struct

import numpy as np
import pytest
import torch

from results.store import RunStore, load_curves, load_params, load_trials
from workloads.config import RunOptions, TrialConfig
from workloads.trial import run_trial


def gpt2_config(**overrides) -> TrialConfig:
    data = {
        "workload": {"kind": "gpt2", "seq_len": 32, "batch_size": 16, "steps": 20, "eval_every": 10,
                     "eval_batches": 2, "log_every": 5},
        "width": 64,
        "depth": 2,
        "seed": 0,
        "optimizer": {"name": "adamw", "lr": 3e-3},
    }
    for key, value in overrides.items():
        data[key] = value
    return TrialConfig.model_validate(data)


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def test_twenty_steps_at_width_64_lower_the_loss(tmp_path):
    config = gpt2_config()
    store = RunStore(str(tmp_path))
    result = run_trial(config, store.writer(config.trial_id))
    assert result.status == "completed"
    curve = load_curves(str(tmp_path))
    evals = curve.dropna(subset=["val_loss"]).sort_values("step")
    assert list(evals["step"]) == [0, 10, 20]
    # char-level: the initial loss is about ln(vocab)=4.3; 20 AdamW steps must cut it clearly
    assert evals["val_loss"].iloc[-1] < evals["val_loss"].iloc[0] - 0.5
    trials = load_trials(str(tmp_path))
    row = trials.iloc[0]
    assert row["status"] == "completed" and row["steps_done"] == 20 and row["width"] == 64
    assert row["items_seen"] == 20 * 16 * 32
    assert row["final_val_loss"] == pytest.approx(evals["val_loss"].iloc[-1])
    params = load_params(str(tmp_path), config.trial_id)
    assert set(params["role"]) == {"embedding", "hidden", "output", "vector"}
    assert {"name", "shape", "lr", "init_std"} <= set(params.columns)


def test_huge_lr_is_recorded_as_diverged_not_raised(tmp_path):
    config = gpt2_config(optimizer={"name": "adamw", "lr": 30.0})
    result = run_trial(config, RunStore(str(tmp_path)).writer(config.trial_id))
    assert result.status == "diverged"
    assert result.summary["diverged_at_step"] < 20
    status = RunStore(str(tmp_path)).status(config.trial_id)
    assert status["status"] == "diverged" and status["error"] is None


def test_same_config_same_curve_and_id():
    a, b = gpt2_config(), gpt2_config()
    assert a.trial_id == b.trial_id
    assert gpt2_config(seed=1).trial_id != a.trial_id


def test_checkpoint_resume_keeps_each_step_once(tmp_path):
    config = gpt2_config()
    store = RunStore(str(tmp_path / "a"))
    full = run_trial(config, store.writer(config.trial_id))

    class StopAfter10(Exception):
        pass

    class CrashingWriter:
        """A real store writer whose process 'dies' right after the step-10 checkpoint."""

        def __init__(self, inner):
            self.inner = inner

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def checkpoint(self, step, state, curve, layers):
            self.inner.checkpoint(step, state, curve, layers)
            if step == 10:
                raise StopAfter10()

    store_b = RunStore(str(tmp_path / "b"))
    crashed = run_trial(config, CrashingWriter(store_b.writer(config.trial_id)), RunOptions(checkpoint_every=5))
    assert crashed.status == "failed"
    assert store_b.read_bytes(store_b.trial_path(config.trial_id, "checkpoint.pt")) is not None
    resumed = run_trial(config, store_b.writer(config.trial_id), RunOptions(checkpoint_every=5))
    assert resumed.status == "completed"
    steps = [r["step"] for r in resumed.curve]
    assert steps == sorted(set(steps)) == [r["step"] for r in full.curve]
    for x, y in zip(full.curve, resumed.curve, strict=True):
        assert math.isclose(x["train_loss"], y["train_loss"], rel_tol=1e-5) or (
            math.isnan(x["train_loss"]) and math.isnan(y["train_loss"]))


def test_failure_is_recorded_with_traceback(tmp_path):
    config = gpt2_config(workload={"kind": "gpt2", "dataset": "shards", "data_path": str(tmp_path / "none"),
                                   "steps": 5})
    result = run_trial(config, RunStore(str(tmp_path)).writer(config.trial_id))
    assert result.status == "failed"
    status = RunStore(str(tmp_path)).status(config.trial_id)
    assert status["status"] == "failed"
    assert "Traceback" in status["error"] and "hpt data prepare" in status["error"]


def _write_idx(path, array: np.ndarray) -> None:
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.tobytes())


def _learnable_fashion_mnist(root) -> None:
    """Tiny IDX files in the Fashion-MNIST layout whose class is visible in the pixels."""
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 256), ("t10k", 64)):
        labels = rng.integers(0, 10, n).astype(np.uint8)
        images = rng.integers(0, 60, (n, 28, 28)).astype(np.uint8)
        for i, y in enumerate(labels):  # a bright bar whose row depends on the class
            images[i, 2 + 2 * int(y): 4 + 2 * int(y), :] = 250
        _write_idx(root / f"{prefix}-images-idx3-ubyte.gz", images)
        _write_idx(root / f"{prefix}-labels-idx1-ubyte.gz", labels)


def test_resnet_trial_with_8_blocks_lowers_the_loss(tmp_path):
    _learnable_fashion_mnist(tmp_path)
    config = TrialConfig.model_validate({
        "workload": {"kind": "resnet", "dataset": "fashion_mnist", "data_root": str(tmp_path), "base_channels": 4,
                     "batch_size": 32, "steps": 20, "eval_every": 10, "eval_batches": 2, "log_every": 5,
                     "augment": False},
        "width": 1, "depth": 8, "optimizer": {"name": "adamw", "lr": 3e-3},
    })
    result = run_trial(config, RunStore(str(tmp_path / "run")).writer(config.trial_id))
    assert result.status == "completed", result.error
    curve = load_curves(str(tmp_path / "run"))
    trained = curve[curve["step"] > 0].sort_values("step")
    assert trained["train_loss"].iloc[-1] < trained["train_loss"].iloc[0]
    assert {"val_loss", "val_accuracy"} <= set(curve.columns)
    row = load_trials(str(tmp_path / "run")).iloc[0]
    assert row["items_seen"] == 20 * 32 and 0.0 <= row["final_val_accuracy"] <= 1.0
