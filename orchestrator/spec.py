"""The sweep spec: a YAML file validated with pydantic (`extra="forbid"` everywhere).

    name: smoke                                  # run dir = <store>/<name>
    workload: {kind: gpt2, seq_len: 32, batch_size: 8, steps: 30, head_dim: 32, ...}
    parametrization: {kind: sp}                  # or a list of recipes, crossed as an axis
    grid: {width: [32, 64], depth: [1], seed: [0], workload.steps: [30, 60]}   # extra axes: dotted fields
    optimizers:
      - {name: adamw, lr: {log2: [-10, -6], step: 2}, weight_decay: 0.0, hparams: {}}
    resources: {cpu: 1, gpu: 0}                  # per trial; fractional GPU allowed
    execution: {max_concurrent: 2, max_failures: 2, checkpoint_every: 10, divergence: {loss_multiple: 3}}
    search: {kind: grid}
    store: runs                                  # local path or pyarrow.fs URI

`load_spec(path)` returns a `SweepSpec` or raises `InputError` whose message names each bad
field by its YAML path and line, the value and what is allowed. Checks that need the registries
or the expanded grid (registered optimizers and recipes, width divisible by head_dim, every
grid point a valid TrialConfig) run here too, so `hpt validate` and `hpt run` reject a spec
before anything is launched or written.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, field_validator

from orchestrator.errors import InputError
from workloads.config import DivergenceConfig, ParametrizationConfig, WorkloadConfig

MAX_TRIALS = 100_000
# grid keys besides width/depth/seed: a dotted path into one of these sections of a TrialConfig
AXIS_SECTIONS = ("workload", "optimizer", "parametrization")
# fields that already have their own axis
RESERVED_AXES = {"workload.kind": "workload.kind is fixed per spec (one workload per sweep)",
                 "optimizer.name": "list optimizers under `optimizers:`",
                 "optimizer.lr": "give each optimizer its LR grid as `optimizers[i].lr`",
                 "parametrization.kind": "list recipes under `parametrization:`"}


class SpecModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


PositiveLR = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class Log2Range(SpecModel):
    """LRs 2**lo, 2**(lo+step), ..., up to 2**hi (inclusive)."""

    log2: tuple[float, float] = Field(..., description="[lo, hi] exponents of 2, lo <= hi")
    step: float = Field(1.0, gt=0, description="exponent step")

    @field_validator("log2")
    @classmethod
    def _ordered(cls, v: tuple[float, float]) -> tuple[float, float]:
        lo, hi = v
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError("exponents must be finite numbers")
        if lo > hi:
            raise ValueError(f"lo={lo} must be <= hi={hi}")
        if not -64 <= lo <= hi <= 16:
            raise ValueError("exponents must lie in [-64, 16] (LRs between 5e-20 and 65536)")
        return v

    def values(self) -> list[float]:
        lo, hi = self.log2
        n = int(math.floor((hi - lo) / self.step + 1e-9)) + 1
        return [2.0 ** (lo + k * self.step) for k in range(n)]


def _lr_kind(v: Any) -> str:
    return "lr-log2" if isinstance(v, dict) else "lr-list"


LRGrid = Annotated[
    Annotated[list[PositiveLR], Tag("lr-list")] | Annotated[Log2Range, Tag("lr-log2")],
    Discriminator(_lr_kind),
]


class OptimizerSpec(SpecModel):
    name: str = Field(..., description="a registered optimizer (workloads.optim.REGISTRY)")
    lr: LRGrid = Field(..., description="a list of LRs, or {log2: [lo, hi], step: s}")
    weight_decay: float = Field(0.0, ge=0, allow_inf_nan=False)
    hparams: dict[str, Any] = Field(default_factory=dict, description="fixed optimizer hyperparameters")

    @field_validator("lr", mode="before")
    @classmethod
    def _scalar(cls, v: Any) -> Any:
        if isinstance(v, int | float | str) and not isinstance(v, bool):
            return [v]
        return v

    @field_validator("lr")
    @classmethod
    def _nonempty(cls, v: Any) -> Any:
        if isinstance(v, list) and not v:
            raise ValueError("the LR grid is empty; give at least one LR")
        return v

    def lrs(self) -> list[float]:
        return self.lr.values() if isinstance(self.lr, Log2Range) else list(self.lr)


class GridSpec(BaseModel):
    """width, depth, seed, plus extra axes named by a dotted TrialConfig field."""

    model_config = ConfigDict(
        extra="allow",
        frozen=True,
        json_schema_extra={
            "patternProperties": {r"^(workload|optimizer|parametrization)\.[A-Za-z_][\w.]*$": {"type": "array"}},
            "additionalProperties": False,
        },
    )
    width: list[Annotated[int, Field(ge=1)]] = Field(..., min_length=1, description="model widths")
    depth: list[Annotated[int, Field(ge=1)]] = Field(..., min_length=1, description="model depths")
    seed: list[Annotated[int, Field(ge=0)]] = Field([0], min_length=1, description="seeds")

    def extra_axes(self) -> dict[str, list[Any]]:
        return dict(self.model_extra or {})


class ResourcesSpec(SpecModel):
    cpu: float = Field(1.0, gt=0, allow_inf_nan=False, description="CPUs per trial (torch threads = ceil)")
    gpu: float = Field(0.0, ge=0, allow_inf_nan=False, description="GPUs per trial; a fraction < 1 shares one")

    @field_validator("gpu")
    @classmethod
    def _whole_above_one(cls, v: float) -> float:
        if v > 1 and v != int(v):
            raise ValueError("a trial may use a fraction of one GPU or a whole number of GPUs")
        return v


class ExecutionSpec(SpecModel):
    max_concurrent: int | None = Field(None, ge=1, description="trials at once (default: what resources allow)")
    max_failures: int = Field(2, ge=0, description="retries of a failing trial, each from its last checkpoint")
    checkpoint_every: int = Field(0, ge=0, description="checkpoint model+optimizer every N steps (0: never)")
    divergence: DivergenceConfig = DivergenceConfig()
    trials_per_tuner: int | None = Field(
        None, ge=1, description="run the pending trials as successive Tuners of at most this many, which bounds "
        "the driver's memory (Ray Tune holds every trial of a Tuner); default: 32 x concurrency^2, at least 128")


class SearchSpec(SpecModel):
    kind: Literal["grid"] = Field("grid", description="`grid` runs every point")


class SweepSpec(SpecModel):
    name: str = Field(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=100,
                      description="run directory name: letters, digits, _ . -")
    description: str | None = None
    workload: WorkloadConfig
    parametrization: list[ParametrizationConfig] = Field(
        default_factory=lambda: [ParametrizationConfig()], min_length=1,
        description="one recipe, or a list of recipes crossed as an axis",
    )
    grid: GridSpec
    optimizers: list[OptimizerSpec] = Field(..., min_length=1)
    resources: ResourcesSpec = ResourcesSpec()
    execution: ExecutionSpec = ExecutionSpec()
    search: SearchSpec = SearchSpec()
    store: str = Field("runs", min_length=1,
                       description="store root (path or pyarrow.fs URI); run dir = <store>/<name>")

    @field_validator("parametrization", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        return [v] if isinstance(v, dict) else v

    def run_dir(self, store: str | None = None) -> str:
        root = store or self.store
        if "://" in root:
            return root.rstrip("/") + "/" + self.name
        return os.path.abspath(os.path.join(root, self.name))

    def threads(self) -> int:
        return max(1, math.ceil(self.resources.cpu))


def spec_json_schema() -> dict[str, Any]:
    schema = SweepSpec.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "hptransfer sweep spec"
    return schema


# -- problems, located in the YAML ---------------------------------------------------------------


@dataclass
class Problem:
    loc: tuple[str | int, ...]
    message: str
    value: Any = None


def _loc_str(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


class YamlLocator:
    """Maps a field path (('optimizers', 0, 'lr')) to its line in the YAML text."""

    def __init__(self, text: str) -> None:
        try:
            self.root = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError:
            self.root = None

    def line(self, loc: tuple[Any, ...]) -> int | None:
        node = self.root
        if node is None:
            return None
        best = node.start_mark.line + 1
        for part in loc:
            nxt = None
            if isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    if getattr(k, "value", None) == part:
                        nxt = v
                        break
                if nxt is None and part == 0:  # a single mapping given where a list is allowed
                    continue
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                nxt = node.value[part]
            if nxt is None:
                break
            node = nxt
            best = node.start_mark.line + 1
        return best


_TAGS = {"lr-list", "lr-log2", "gpt2", "resnet"}


def _clean_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(p for p in loc if p not in _TAGS and not (isinstance(p, str) and p.startswith("function-")))


def format_problems(problems: list[Problem], source: str, locator: YamlLocator) -> str:
    lines = []
    for p in problems:
        line = locator.line(p.loc)
        where = f"{source}:{line}" if line else source
        got = "" if p.value is None else f" (got {_short(p.value)})"
        lines.append(f"{where}: {_loc_str(p.loc)}: {p.message}{got}")
    return "\n".join(dict.fromkeys(lines))


def _short(value: Any) -> str:
    shown = "{...}" if isinstance(value, dict) else repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


def _pydantic_problems(err: ValidationError) -> list[Problem]:
    out = []
    for e in err.errors():
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown field; remove it or check its spelling (`hpt schema` lists the allowed keys)"
        elif e["type"] in ("union_tag_invalid", "union_tag_not_found") and e["loc"][-1:] == ("workload",):
            given = e.get("input")
            kind = given.get("kind") if isinstance(given, dict) else None
            out.append(Problem(("workload", "kind"), f"must be one of {sorted(_workload_kinds())}"
                               + ("" if kind is not None else " (missing)"), kind))
            continue
        elif e["type"] == "literal_error":
            msg = msg.replace("Input should be", "must be")
        value = e.get("input")
        out.append(Problem(_clean_loc(tuple(e["loc"])), msg, None if e["type"] == "missing" else value))
    return out


def _workload_kinds() -> list[str]:
    from workloads.tasks import TASK_MODULES

    return list(TASK_MODULES)


# -- loading -----------------------------------------------------------------------------------


def parse_spec_text(text: str, source: str) -> SweepSpec:
    """Parse + validate a spec's YAML text (fields, registries and the expanded grid)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = getattr(exc, "problem", None) or str(exc)
        raise InputError(f"{where}: not valid YAML: {problem}") from None
    if not isinstance(data, dict):
        raise InputError(f"{source}: expected a mapping with name, workload, grid, optimizers, ... "
                         f"at the top level, got {type(data).__name__}")
    locator = YamlLocator(text)
    try:
        spec = SweepSpec.model_validate(data)
    except ValidationError as exc:
        raise InputError(format_problems(_pydantic_problems(exc), source, locator)) from None
    problems = semantic_problems(spec)
    if problems:
        raise InputError(format_problems(problems, source, locator))
    return spec


def load_spec(path: str) -> tuple[SweepSpec, str]:
    """(spec, its text) from a YAML file, or InputError."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except (IsADirectoryError, UnicodeDecodeError, PermissionError) as exc:
        raise InputError(f"{path}: cannot read the spec: {exc}") from None
    return parse_spec_text(text, path), text


def registered_optimizers() -> list[str]:
    from workloads import optim

    return sorted(getattr(optim, "REGISTRY", {}))


def allowed_hparams(name: str) -> list[str] | None:
    from workloads import optim

    fn = getattr(optim, "allowed_hparams", None)
    return None if fn is None else list(fn(name))


def registered_recipes() -> list[str]:
    from workloads.parametrization import RECIPES

    return sorted(RECIPES)


def semantic_problems(spec: SweepSpec) -> list[Problem]:
    """Checks beyond field types: registries, extra axes, and every grid point a valid trial."""
    problems: list[Problem] = []
    optimizers = registered_optimizers()
    for i, opt in enumerate(spec.optimizers):
        if opt.name not in optimizers:
            problems.append(Problem(("optimizers", i, "name"),
                                    f"not a registered optimizer; choose one of {optimizers}", opt.name))
        else:
            allowed = allowed_hparams(opt.name)
            for key in opt.hparams:
                if allowed is not None and key not in allowed:
                    problems.append(Problem(("optimizers", i, "hparams", key),
                                            f"not a hyperparameter of {opt.name}; allowed: {allowed}"))
    recipes = registered_recipes()
    for i, p in enumerate(spec.parametrization):
        if p.kind not in recipes:
            problems.append(Problem(("parametrization", i, "kind"),
                                    f"not a registered parametrization recipe; choose one of {recipes}", p.kind))
    for key, values in spec.grid.extra_axes().items():
        section = key.split(".", 1)[0]
        if "." not in key or section not in AXIS_SECTIONS:
            allowed = "width, depth, seed, or a dotted field such as workload.steps, optimizer.weight_decay, " \
                      "optimizer.hparams.<name>, parametrization.alpha"
            problems.append(Problem(("grid", key), f"unknown grid axis; allowed: {allowed}"))
        elif key in RESERVED_AXES:
            problems.append(Problem(("grid", key), f"not a grid axis: {RESERVED_AXES[key]}"))
        elif not isinstance(values, list) or not values:
            problems.append(Problem(("grid", key), "an axis must be a non-empty list of values", values))
    if problems:
        return problems
    from orchestrator.grid import grid_problems

    return grid_problems(spec)


def check_local_resources(spec: SweepSpec, source: str = "spec") -> None:
    """Without --address trials run on this machine: it must have the CPUs/GPUs one trial asks for."""
    problems = local_resource_problems(spec)
    if problems:
        raise InputError("\n".join(f"{source}: resources.{p.loc[-1]}: {p.message} (got {p.value:g})"
                                   for p in problems))


def local_resource_problems(spec: SweepSpec) -> list[Problem]:
    problems = []
    cpus = os.cpu_count() or 1
    if spec.resources.cpu > cpus:
        problems.append(Problem(("resources", "cpu"), f"a trial asks for more CPUs than this machine has ({cpus}); "
                                "lower it or run on a cluster with --address", spec.resources.cpu))
    if spec.resources.gpu > 0:
        gpus = local_gpu_count()
        if gpus == 0:
            problems.append(Problem(("resources", "gpu"), "this machine has no GPU; set resources.gpu: 0 or run on "
                                    "a cluster with GPUs (--address)", spec.resources.gpu))
        elif spec.resources.gpu > gpus:
            problems.append(Problem(("resources", "gpu"), f"a trial asks for more GPUs than this machine has "
                                    f"({gpus})", spec.resources.gpu))
    return problems


def local_gpu_count() -> int:
    forced = os.environ.get("HPT_LOCAL_GPUS")  # tests and CPU-only containers that see a stray device
    if forced is not None:
        return int(forced)
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


__all__ = [
    "SweepSpec", "OptimizerSpec", "GridSpec", "Log2Range", "ResourcesSpec", "ExecutionSpec", "SearchSpec",
    "load_spec", "parse_spec_text", "spec_json_schema", "check_local_resources", "Problem",
]
