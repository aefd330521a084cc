"""Tasks: what a trial trains on and how it is scored. One class per workload kind.

A task owns its data, builds its model with the recipe's forward multipliers, and defines the
loss and the evaluation; the trial runner (workloads.trial) owns everything else.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import torch
from torch import nn

from workloads.config import TrialConfig
from workloads.parametrization import ForwardMultipliers

Batch = tuple[torch.Tensor, torch.Tensor]


class Task(ABC):
    kind: ClassVar[str]
    item_unit: ClassVar[str]  # what `items` counts in the curve: "tokens" or "samples"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            TASKS[cls.kind] = cls

    def __init__(self, config: TrialConfig, device: str) -> None:
        self.config = config
        self.device = device

    @abstractmethod
    def build_model(self, multipliers: ForwardMultipliers) -> nn.Module: ...

    @abstractmethod
    def train_batch(self, step: int) -> Batch:
        """The batch of optimizer step `step`; a function of (seed, step) so resumes replay it."""

    @abstractmethod
    def items_per_step(self) -> int: ...

    def loss(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        x, y = batch
        logits = model(x)
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    @abstractmethod
    def evaluate(self, model: nn.Module) -> dict[str, float]:
        """Held-out metrics on fixed batches: at least `val_loss`."""

    def state_dict(self) -> dict[str, Any]:
        """Data-stream state a resumed trial needs (none when batches are a function of step)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Restore what `state_dict` returned."""


TASKS: dict[str, type[Task]] = {}
# Modules that define the tasks, imported on first use so an LM trial never loads image code.
TASK_MODULES = {
    "gpt2": "workloads.tasks.language_model",
    "resnet": "workloads.tasks.image_classification",
}


def make_task(config: TrialConfig, device: str) -> Task:
    kind = config.workload.kind
    if kind not in TASKS:
        importlib.import_module(TASK_MODULES[kind])
    return TASKS[kind](config, device)
