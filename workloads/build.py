"""Assemble a trial's objects — task, recipe, initialized model, optimizer — from its config.

The one place that turns a TrialConfig into runnable objects: the trial runner, `hpt trial
--explain` and the coordinate check all build through it, so what they show is what a trial runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from workloads.config import TrialConfig
from workloads.optim import REGISTRY, ParamSpec, build_optimizer, family_of, resolved_table
from workloads.parametrization import Recipe, ResolvedParam, apply_init, make_recipe, resolve
from workloads.roles import is_in_out
from workloads.tasks import Task, make_task


@dataclass
class TrialObjects:
    task: Task
    recipe: Recipe
    model: nn.Module
    resolved: list[ResolvedParam]
    optimizer: torch.optim.Optimizer
    family: str


def build_trial_objects(
    config: TrialConfig, device: str = "cpu", generator: torch.Generator | None = None, task: Task | None = None
) -> TrialObjects:
    """Task, recipe, initialized model and optimizer of a trial, exactly as workloads.trial builds them.

    Pass `task` to reuse its data across several builds (coordinate checks build many models)."""
    if config.optimizer.name not in REGISTRY:
        raise ValueError(
            f"optimizer.name={config.optimizer.name!r} is not registered; choose one of {sorted(REGISTRY)}")
    family = family_of(config.optimizer.name)
    task = task if task is not None else make_task(config, device)
    recipe = make_recipe(config.parametrization, config.width, config.depth)
    model = task.build_model(recipe.forward_multipliers())
    resolved = resolve(model, recipe, family, optimizer=config.optimizer.name, hparams=config.optimizer.hparams)
    apply_init(resolved, generator)
    specs = [
        ParamSpec(name=rp.name, param=rp.param, role=rp.role.value, lr_mult=rp.rule.lr_mult,
                  wd_mult=rp.rule.wd_mult, eps_mult=rp.rule.eps_mult, extra=dict(rp.rule.extra),
                  in_out=is_in_out(rp.param))
        for rp in resolved
    ]
    optimizer = build_optimizer(config.optimizer.name, specs, lr=config.optimizer.lr,
                                weight_decay=config.optimizer.weight_decay, **config.optimizer.hparams)
    return TrialObjects(task, recipe, model, resolved, optimizer, family)


def parameter_table(objs: TrialObjects) -> list[dict[str, Any]]:
    """The recipe's rows merged with the optimizer's (algorithm, lr, weight_decay, eps, norm, radius)."""
    by_name = {r["name"]: r for r in resolved_table(objs.optimizer)}
    return [{**rp.row(), **by_name.get(rp.name, {})} for rp in objs.resolved]
