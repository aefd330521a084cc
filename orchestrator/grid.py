"""Grid expansion: a SweepSpec -> resolved TrialConfigs with stable ids, cheapest first.

The axes are parametrization x optimizer (each with its own LR list) x width x depth x seed x
every extra axis (`grid: {workload.steps: [...], optimizer.hparams.beta2: [...]}`). Each point
is a full `TrialConfig`; its `trial_id` (hash of canonical JSON + CONFIG_FORMAT_VERSION) is the
identity the store knows it by, so adding a width or an LR to a spec adds exactly those points.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from orchestrator.spec import Problem, SweepSpec
from workloads.config import GPT2Workload, TrialConfig


@dataclass(frozen=True)
class GridPoint:
    """One point before validation: the raw TrialConfig dict and where its values came from."""

    data: dict[str, Any]
    optimizer_index: int
    parametrization_index: int
    axis_values: dict[str, int]  # extra axis -> index of its value


def _set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = data
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value


def iter_points(spec: SweepSpec) -> Iterator[GridPoint]:
    workload = spec.workload.model_dump(mode="json")
    divergence = spec.execution.divergence.model_dump(mode="json")
    extra = spec.grid.extra_axes()
    axis_names = list(extra)
    axis_index_lists = [range(len(extra[name])) for name in axis_names]
    for (pi, param), (oi, opt) in itertools.product(enumerate(spec.parametrization), enumerate(spec.optimizers)):
        param_data = param.model_dump(mode="json")
        for lr, width, depth, seed, *axis_idx in itertools.product(
            opt.lrs(), spec.grid.width, spec.grid.depth, spec.grid.seed, *axis_index_lists
        ):
            data: dict[str, Any] = {
                "workload": copy.deepcopy(workload),
                "width": width,
                "depth": depth,
                "seed": seed,
                "parametrization": copy.deepcopy(param_data),
                "optimizer": {"name": opt.name, "lr": lr, "weight_decay": opt.weight_decay,
                              "hparams": copy.deepcopy(opt.hparams)},
                "divergence": divergence,
            }
            for name, idx in zip(axis_names, axis_idx, strict=True):
                _set_dotted(data, name, copy.deepcopy(extra[name][idx]))
            yield GridPoint(data, oi, pi, dict(zip(axis_names, axis_idx, strict=True)))


def estimated_cost(config: TrialConfig) -> float:
    """Relative compute of a trial (width^2 x depth x items x steps): small, cheap trials go first."""
    wl = config.workload
    items = wl.batch_size * (wl.seq_len if isinstance(wl, GPT2Workload) else 1)
    return float(config.width) ** 2 * config.depth * items * wl.steps


def sort_key(config: TrialConfig) -> tuple[Any, ...]:
    return (estimated_cost(config), config.optimizer.name, config.parametrization.kind, config.optimizer.lr,
            config.seed, config.trial_id)


def expand(spec: SweepSpec) -> list[TrialConfig]:
    """Every grid point as a TrialConfig, deduplicated by trial_id, cheapest first.

    The spec must have passed `grid_problems` (load_spec does that); an invalid point raises.
    """
    seen: dict[str, TrialConfig] = {}
    for point in iter_points(spec):
        config = TrialConfig.model_validate(point.data)
        seen.setdefault(config.trial_id, config)
    return sorted(seen.values(), key=sort_key)


def _map_loc(loc: tuple[Any, ...], point: GridPoint) -> tuple[Any, ...]:
    """A TrialConfig error location -> the spec field that produced it."""
    dotted = ".".join(str(p) for p in loc)
    for axis in point.axis_values:
        if dotted == axis or dotted.startswith(axis + ".") or axis.startswith(dotted + "."):
            return ("grid", axis, point.axis_values[axis])
    head, rest = (loc[0], loc[1:]) if loc else ("", ())
    if head == "optimizer":
        return ("optimizers", point.optimizer_index, *rest)
    if head == "parametrization":
        return ("parametrization", point.parametrization_index, *rest)
    if head == "divergence":
        return ("execution", "divergence", *rest)
    if head in ("width", "depth", "seed"):
        return ("grid", head)
    return loc


def grid_problems(spec: SweepSpec, limit: int = 20) -> list[Problem]:
    """Validate every grid point as a TrialConfig and check GPT-2 widths against head_dim."""
    from orchestrator.spec import MAX_TRIALS, _clean_loc

    n_points = sum(len(o.lrs()) for o in spec.optimizers) * len(spec.parametrization) * len(spec.grid.width) \
        * len(spec.grid.depth) * len(spec.grid.seed)
    for values in spec.grid.extra_axes().values():
        n_points *= len(values)
    if n_points > MAX_TRIALS:
        return [Problem(("grid",), f"the grid has {n_points:,} points, more than {MAX_TRIALS:,}; "
                        "shrink an axis or split the sweep")]
    problems: dict[tuple[Any, str], Problem] = {}
    for point in iter_points(spec):
        try:
            config = TrialConfig.model_validate(point.data)
        except ValidationError as exc:
            for e in exc.errors():
                loc = _map_loc(_clean_loc(tuple(e["loc"])), point)
                msg = e["msg"].removeprefix("Value error, ")
                if e["type"] == "extra_forbidden":
                    msg = "not a field of the trial config; `hpt schema` lists the fields"
                problems.setdefault((loc, msg), Problem(loc, msg, e.get("input")))
        else:
            wl = config.workload
            if isinstance(wl, GPT2Workload) and config.width % wl.head_dim:
                loc = ("grid", "width", spec.grid.width.index(config.width))
                if "workload.head_dim" in point.axis_values:
                    loc = ("grid", "workload.head_dim", point.axis_values["workload.head_dim"])
                msg = (f"width {config.width} is not a multiple of workload.head_dim={wl.head_dim} "
                       f"(heads = width / head_dim); allowed widths: multiples of {wl.head_dim}, "
                       f"e.g. {[wl.head_dim * k for k in (1, 2, 4, 8)]}")
                problems.setdefault((loc, msg), Problem(loc, msg, config.width))
        if len(problems) >= limit:
            break
    return list(problems.values())
