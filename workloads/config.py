"""TrialConfig: one fully resolved point of a sweep grid, validated by pydantic.

A TrialConfig says *what* is trained (workload, width, depth, seed, parametrization, optimizer
and its LR); how it is executed (threads, device, checkpoint cadence) lives in `RunOptions` and
does not change the trial's identity.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Bump when the meaning of a config field changes, so old results get new ids.
CONFIG_FORMAT_VERSION = 1


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScheduleConfig(StrictModel):
    """LR schedule: a multiplier on every group's LR. Linear warmup, then constant/cosine/WSD."""

    kind: Literal["constant", "cosine", "wsd"] = "constant"
    warmup: int = Field(0, ge=0, description="linear warmup steps")
    decay_fraction: float = Field(0.2, gt=0, le=1, description="WSD: fraction of steps spent decaying")
    min_lr_ratio: float = Field(0.0, ge=0, le=1, description="final LR as a fraction of the peak")


class _WorkloadCommon(StrictModel):
    batch_size: int = Field(32, ge=1)
    steps: int = Field(200, ge=1)
    eval_every: int = Field(50, ge=1, description="evaluate on fixed held-out batches every k steps")
    eval_batches: int = Field(4, ge=1)
    log_every: int = Field(10, ge=1, description="record a curve row every k steps")
    diag_every: int = Field(0, ge=0, description="per-layer diagnostics every k steps (0: at eval steps)")
    schedule: ScheduleConfig = ScheduleConfig()


class GPT2Workload(_WorkloadCommon):
    """nanoGPT-style language model on a char corpus or GPT-2-BPE token shards."""

    kind: Literal["gpt2"] = "gpt2"
    dataset: str = Field("shakespeare_char", description="'shakespeare_char' or 'shards'")
    data_path: str | None = Field(None, description="directory of .bin token shards (dataset: shards)")
    seq_len: int = Field(64, ge=2)
    head_dim: int = Field(64, ge=1)
    tied_embeddings: bool = False
    bias: bool = False


class ResNetWorkload(_WorkloadCommon):
    """Pre-activation CIFAR ResNet; width = channel multiplier, depth = residual blocks."""

    kind: Literal["resnet"] = "resnet"
    dataset: Literal["cifar100", "cifar10", "fashion_mnist"] = "cifar100"
    data_root: str | None = None
    label_kind: Literal["fine", "coarse"] = "fine"
    base_channels: int = Field(16, ge=1)
    norm: Literal["batch", "group", "none"] = "batch"
    stem_role: Literal["embedding", "hidden"] = "embedding"
    augment: bool = True
    batch_size: int = Field(128, ge=1)


WorkloadConfig = Annotated[GPT2Workload | ResNetWorkload, Field(discriminator="kind")]


class ParametrizationConfig(StrictModel):
    kind: str = Field("sp", description="a registered recipe: see workloads.parametrization.RECIPES")
    base_width: int | None = Field(None, ge=1, description="width where the recipe equals SP (default: trial width)")
    base_depth: int | None = Field(None, ge=1, description="depth where depth scaling is 1 (default: trial depth)")
    alpha: float = Field(1.0, ge=0.0, le=1.0, description="CompleteP depth exponent")
    options: dict[str, float | int | str | bool] = Field(default_factory=dict)


class OptimizerConfig(StrictModel):
    name: str = Field(..., description="a registered optimizer: see workloads.optim.REGISTRY")
    lr: float = Field(..., gt=0)
    weight_decay: float = Field(0.0, ge=0)
    hparams: dict[str, Any] = Field(default_factory=dict)

    @field_validator("lr")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be a finite positive number")
        return v


class DivergenceConfig(StrictModel):
    """A trial diverges when the train loss is NaN/inf or exceeds `loss_multiple` x its first loss."""

    loss_multiple: float = Field(3.0, gt=1.0)
    grace_steps: int = Field(0, ge=0, description="ignore the multiple rule during the first k steps")


class TrialConfig(StrictModel):
    workload: WorkloadConfig
    width: int = Field(..., ge=1)
    depth: int = Field(..., ge=1)
    seed: int = Field(0, ge=0)
    parametrization: ParametrizationConfig = ParametrizationConfig()
    optimizer: OptimizerConfig
    divergence: DivergenceConfig = DivergenceConfig()

    def canonical_json(self) -> str:
        return canonical_json(self.model_dump(mode="json"))

    @property
    def trial_id(self) -> str:
        payload = f"v{CONFIG_FORMAT_VERSION}:{self.canonical_json()}"
        return hashlib.sha256(payload.encode()).hexdigest()[:16]


class RunOptions(StrictModel):
    """How a trial executes; never part of its identity."""

    device: str = "auto"
    threads: int | None = Field(None, ge=1)
    checkpoint_every: int = Field(0, ge=0, description="0: never checkpoint")


def _normalize(value: Any) -> Any:
    if isinstance(value, float):
        # 1e-3 and 0.001000000000001 are the same grid point: 12 significant digits.
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normalize(v) for v in value]
    return value


def canonical_json(data: Any) -> str:
    return json.dumps(_normalize(data), sort_keys=True, separators=(",", ":"))

