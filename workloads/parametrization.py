"""Width/depth parametrizations as named recipes.

A recipe maps (role, fan_in, fan_out, width multiplier m_N, depth multiplier m_L, optimizer
family) to an init std, an LR multiplier, a weight-decay multiplier and an Adam-epsilon
multiplier, and sets the model's forward multipliers (residual branches, output logits,
attention scale). Formulas: ../shared/ALGORITHMS.md §5, §7; docs/parametrizations.md.

Registered recipes (``RECIPES``): ``sp``, ``mup``, ``completep``, ``depth_1overK``, ``moga``,
``scion``. Every exponent is an option (``ParametrizationConfig.options``), so a variant rule is a
config change, not a code change; unknown option names are rejected with the list of valid ones.

How an optimizer moves a weight decides its LR rule, so rules look at the *update kind* of each
parameter (see :func:`update_kind`): ``elementwise`` (Adam, Lion, and the AdamW part of the hybrid
optimizers: entries of size ~1), ``orthogonal`` (Muon/Muown/OrScale: NS(M) times a shape factor s),
``geometry`` (MOGA and SCION LMOs, which already carry their per-layer mean-normalized factors).
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import torch
from torch import nn

from workloads.config import ParametrizationConfig
from workloads.roles import Role, fans, is_in_out, named_roles

OptionValue = float | int | str | bool

FAMILIES = ("adam", "muon", "normalized", "sign", "scion")
UPDATE_KINDS = ("elementwise", "orthogonal", "geometry")
INIT_KINDS = ("normal", "orthogonal", "sign", "zero", "module")
# Parameters inside a residual branch (their branch output is scaled by the residual multiplier):
# GPT-2 `blocks.<i>.…`, ResNet `stages.<s>.<b>.…` except the block's shortcut projection.
DEFAULT_BRANCH_PATTERN = r"^(blocks\.\d+|stages\.\d+\.\d+)\.(?!shortcut\.)"
# SCION's shallow nanoGPT width-transfer radii (embedding / hidden / output / vector).
SCION_RADII = {"embedding": 1.0, "hidden": 3.0, "output": 10.0, "vector": 1.0}


@dataclass(frozen=True)
class ForwardMultipliers:
    residual: float = 1.0  # x + residual * F(x) on every residual branch
    output: float = 1.0  # logits multiplier
    attn_scale_power: float = 0.5  # q.k / head_dim**power (0.5 standard, 1.0 muP)


@dataclass(frozen=True)
class ParamRule:
    init_std: float | None  # None: keep the module's own init (norm gains 1, biases 0)
    lr_mult: float = 1.0
    wd_mult: float = 1.0
    eps_mult: float = 1.0
    extra: dict[str, Any] = field(default_factory=dict)  # optimizer-specific (e.g. SCION norm/radius)
    # how `init_std` is used: normal N(0, std²); orthogonal: (semi-)orthogonal with singular values
    # `init_std`; sign: ±init_std; zero: zeros (init_std is 0.0); module: the module's own (init_std None)
    init_kind: str = "normal"


@dataclass(frozen=True)
class Scale:
    width: int
    depth: int
    base_width: int
    base_depth: int

    @property
    def m_width(self) -> float:
        return self.width / self.base_width

    @property
    def m_depth(self) -> float:
        return self.depth / self.base_depth


@dataclass(frozen=True)
class OptimizerInfo:
    """What a recipe needs to know about the optimizer beyond its family: the shape factor s of an
    orthogonalized update (Muon ``adjust_lr``, Muown's Moonlight factor, OrScale's variant) and the
    SCION radii that the builder would use."""

    family: str
    name: str | None = None
    hparams: Mapping[str, Any] = field(default_factory=dict)

    @property
    def shape_factor(self) -> str:
        if self.name == "muown":
            return "match_rms_adamw"
        if self.name == "orscale":
            return "match_rms_adamw" if self.hparams.get("variant", "lm") == "lm" else "none"
        return str(self.hparams.get("adjust_lr") or "original")

    def scion_radius(self, role: Role) -> float:
        return float(self.hparams.get(f"{role.value}_radius", SCION_RADII[role.value]))


def shape_factor(d_out: float, d_in: float, kind: str) -> float:
    """s multiplying NS(M) (same formulas as workloads.optim.geometry.shape_factor, float fans)."""
    # shape factors: Moonlight 0.2*sqrt(max) (arXiv 2502.16982); spectral sqrt(d_out/d_in) (arXiv 2502.07529)
    table = {
        "original": math.sqrt(max(1.0, d_out / d_in)),
        "match_rms_adamw": 0.2 * math.sqrt(max(d_out, d_in)),
        "spectral": math.sqrt(d_out / d_in),
        "none": 1.0,
        "sqrt_d_out": math.sqrt(d_out),
    }
    try:
        return table[kind]
    except KeyError:
        raise ValueError(f"shape factor {kind!r} is unknown; use one of {sorted(table)}") from None


def update_kind(role: Role, family: str, ndim: int = 2) -> str:
    """How the optimizer of `family` moves a parameter of `role` (routing of workloads.optim.builder)."""
    if family not in FAMILIES:
        raise ValueError(f"optimizer family {family!r} is unknown; use one of {list(FAMILIES)}")
    matrix = ndim >= 2
    if family in ("adam", "sign"):
        return "elementwise"
    if family == "muon":
        return "orthogonal" if role is Role.HIDDEN and matrix else "elementwise"
    if family == "normalized":
        return "geometry" if role is Role.HIDDEN and matrix else "elementwise"
    # scion: every layer through an LMO; hidden Spectral and head Sign/d_in carry the mean geometry
    return "geometry" if role in (Role.HIDDEN, Role.OUTPUT) and matrix else "elementwise"


def base_fans(role: Role, fan_in: int, fan_out: int, m_width: float) -> tuple[float, float]:
    """(fan_in, fan_out) of the same layer at base width: width-sized dimensions divided by m_N."""
    if role is Role.HIDDEN:
        return fan_in / m_width, fan_out / m_width
    if role is Role.EMBEDDING:
        return float(fan_in), fan_out / m_width
    if role is Role.OUTPUT:
        return fan_in / m_width, float(fan_out)
    return float(fan_in), fan_out / m_width


@dataclass(frozen=True)
class ParamContext:
    """Everything a rule may look at for one parameter."""

    role: Role
    fan_in: int
    fan_out: int
    family: str
    ndim: int = 2
    branch: bool = False  # lives inside a residual branch (scaled by the residual multiplier)
    optimizer: OptimizerInfo | None = None
    name: str = ""

    @property
    def kind(self) -> str:
        return update_kind(self.role, self.family, self.ndim)

    @property
    def opt(self) -> OptimizerInfo:
        return self.optimizer or OptimizerInfo(self.family)


class Recipe(ABC):
    """A named parametrization. Subclasses register themselves in RECIPES by `name`.

    `OPTIONS` holds the recipe's tunable exponents/switches with their defaults (merged along the
    class hierarchy); `ParametrizationConfig.options` overrides them by name.
    """

    name: ClassVar[str]
    summary: ClassVar[str] = ""
    OPTIONS: ClassVar[dict[str, OptionValue]] = {
        "embedding_std": 1.0,  # init std of embeddings (constant in width)
        # "independent": wd_mult = 1/lr_mult so lr*wd is scale-free; "coupled": wd_mult = 1
        "wd_rule": "independent",
        "branch_pattern": DEFAULT_BRANCH_PATTERN,
    }

    def __init__(self, config: ParametrizationConfig, width: int, depth: int) -> None:
        self.config = config
        self.scale = Scale(width, depth, config.base_width or width, config.base_depth or depth)
        defaults = self.default_options()
        unknown = sorted(set(config.options) - set(defaults))
        if unknown:
            raise ValueError(
                f"parametrization.options {unknown} are not options of recipe {self.name!r}; "
                f"valid options (with defaults): {defaults}"
            )
        self.options: dict[str, OptionValue] = {**defaults, **config.options}
        self._branch_re = re.compile(str(self.options["branch_pattern"]))
        if self.options["wd_rule"] not in ("independent", "coupled"):
            raise ValueError(f"parametrization.options.wd_rule={self.options['wd_rule']!r}: use 'independent' "
                             f"or 'coupled'")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__:
            RECIPES[cls.name] = cls

    @classmethod
    def default_options(cls) -> dict[str, OptionValue]:
        out: dict[str, OptionValue] = {}
        for klass in reversed(cls.__mro__):
            out.update(getattr(klass, "__dict__", {}).get("OPTIONS", {}))
        return out

    def number(self, key: str, auto: float) -> float:
        """Option `key` as a float; the string "auto" gives the recipe's formula value `auto`."""
        value = self.options[key]
        if value == "auto":
            return auto
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"parametrization.options.{key}={value!r}: use a number or 'auto'")
        return float(value)

    def is_branch(self, name: str) -> bool:
        return bool(self._branch_re.search(name))

    @abstractmethod
    def forward_multipliers(self) -> ForwardMultipliers: ...

    @abstractmethod
    def param_rule(self, ctx: ParamContext) -> ParamRule: ...

    def rule(
        self,
        role: Role,
        fan_in: int,
        fan_out: int,
        family: str,
        *,
        ndim: int = 2,
        branch: bool | None = None,
        optimizer: OptimizerInfo | None = None,
        name: str = "",
    ) -> ParamRule:
        """The rule of one parameter. `branch` defaults to True for hidden weights and False otherwise."""
        if branch is None:
            branch = role is Role.HIDDEN
        if role is Role.VECTOR:
            ndim = 1
        ctx = ParamContext(Role(role), fan_in, fan_out, family, ndim, branch, optimizer, name)
        update_kind(ctx.role, family, ndim)  # validates the family
        return self.param_rule(ctx)

    def _wd(self, lr_mult: float) -> float:
        # independent weight decay: keep lr*wd fixed across scale (arXiv 2309.14322)
        return 1.0 / lr_mult if self.options["wd_rule"] == "independent" and lr_mult > 0 else 1.0

    def _finish(self, init_std: float | None, lr_mult: float, eps_mult: float = 1.0,
                extra: dict[str, Any] | None = None, init_kind: str = "normal") -> ParamRule:
        if init_std is None:
            init_kind = "module"
        return ParamRule(init_std, lr_mult, self._wd(lr_mult), eps_mult, dict(extra or {}), init_kind)


RECIPES: dict[str, type[Recipe]] = {}


class StandardParametrization(Recipe):
    """SP: init std 1/sqrt(fan_in) for matrices (embeddings std 1), one global LR, no multipliers."""

    name = "sp"
    summary = "standard: init 1/sqrt(fan_in), one LR for every layer, attention 1/sqrt(d_head)"
    OPTIONS: ClassVar[dict[str, OptionValue]] = {"attn_scale_power": 0.5}

    def forward_multipliers(self) -> ForwardMultipliers:
        return ForwardMultipliers(attn_scale_power=float(self.options["attn_scale_power"]))

    def param_rule(self, ctx: ParamContext) -> ParamRule:
        if ctx.role is Role.VECTOR:
            return self._finish(None, 1.0)
        if ctx.role is Role.EMBEDDING:
            return self._finish(float(self.options["embedding_std"]), 1.0)
        return self._finish(1.0 / math.sqrt(ctx.fan_in), 1.0)


class MuP(Recipe):
    """μP in width, with the per-family LR rule that keeps every layer's update μP-sized.

    elementwise (Adam-like) updates: hidden LR m_N^-1, embedding/vector/output LR 1 with the output
    forward multiplier m_N^-1; orthogonal updates (Muon): hidden LR = [sqrt(d_out/d_in)/s] relative to
    base width (1 for s = spectral/original/none, m_N^-1/2 for match_rms_adamw); geometry updates (MOGA,
    SCION): LR 1 (the LMO already carries the factors), and SCION's head radius x m_N against the
    output multiplier.
    """

    name = "mup"
    summary = "muP (width): hidden Adam LR 1/m_N, output multiplier 1/m_N, attention 1/d_head"
    OPTIONS: ClassVar[dict[str, OptionValue]] = {
        "attn_scale_power": 1.0,  # q.k / d_head
        "output_multiplier_exp": -1.0,  # logits multiplier m_N^exp
        "hidden_lr_exp": "auto",  # hidden LR m_N^exp; auto: by update kind (see class doc)
        "output_lr_exp": "auto",  # output LR m_N^exp; auto: 0 (elementwise), -output_multiplier_exp (geometry)
        "hidden_eps_exp": -1.0,  # Adam eps of hidden weights m_N^exp
        "hidden_init_exp": -0.5,  # hidden init std = (1/sqrt(base_fan_in)) * m_N^exp
        "readout_init": "base",  # base: std 1/sqrt(base fan_in) (stored); zero; fan_in: 1/sqrt(fan_in)
    }

    # -- width part -------------------------------------------------------------------------------
    def _m(self) -> float:
        return self.scale.m_width

    def output_multiplier(self) -> float:
        return self._m() ** float(self.options["output_multiplier_exp"])

    def forward_multipliers(self) -> ForwardMultipliers:
        return ForwardMultipliers(
            residual=self.residual_multiplier(),
            output=self.output_multiplier(),
            attn_scale_power=float(self.options["attn_scale_power"]),
        )

    def residual_multiplier(self) -> float:
        return 1.0

    def hidden_lr(self, ctx: ParamContext) -> float:
        m = self._m()
        if ctx.kind == "elementwise":
            # muP Adam: hidden LR eta/m_N (arXiv 2203.03466, Table 3)
            auto = -1.0
        elif ctx.kind == "orthogonal":
            # spectral condition ||dW|| ~ sqrt(d_out/d_in): LR x [sqrt(d_out/d_in)/s] vs base (arXiv 2310.17813)
            bi, bo = base_fans(ctx.role, ctx.fan_in, ctx.fan_out, m)
            s_kind = ctx.opt.shape_factor
            ratio = (math.sqrt(ctx.fan_out / ctx.fan_in) / shape_factor(ctx.fan_out, ctx.fan_in, s_kind)) / (
                math.sqrt(bo / bi) / shape_factor(bo, bi, s_kind))
            auto = math.log(ratio) / math.log(m) if m != 1.0 else 0.0
        else:
            auto = 0.0  # MOGA/SCION LMOs are already mean-normalized (arXiv 2603.09952)
        return m ** self.number("hidden_lr_exp", auto)

    def output_lr(self, ctx: ParamContext) -> float:
        auto = 0.0 if ctx.kind == "elementwise" else -float(self.options["output_multiplier_exp"])
        return self._m() ** self.number("output_lr_exp", auto)

    def output_init(self, ctx: ParamContext) -> tuple[float, str]:
        mode = self.options["readout_init"]
        if mode == "zero":
            return 0.0, "zero"
        if mode == "fan_in":
            return 1.0 / math.sqrt(ctx.fan_in), "normal"
        if mode == "base":
            # muP readout: stored std 1/sqrt(base fan_in) x multiplier 1/m_N = init var ~1/fan_in^2 (arXiv 2203.03466)
            return 1.0 / math.sqrt(ctx.fan_in / self._m()), "normal"
        raise ValueError(f"parametrization.options.readout_init={mode!r}: use 'base', 'zero' or 'fan_in'")

    # -- depth part (CompleteP / 1/K override these) -----------------------------------------------
    def depth_lr(self, ctx: ParamContext) -> float:
        return 1.0

    def depth_eps(self, ctx: ParamContext) -> float:
        return 1.0

    def param_rule(self, ctx: ParamContext) -> ParamRule:
        m = self._m()
        extra: dict[str, Any] = {}
        if ctx.role is Role.VECTOR:
            lr, eps = 1.0, 1.0
            if ctx.branch:
                lr, eps = lr * self.depth_lr(ctx), eps * self.depth_eps(ctx)
            return self._finish(None, lr, eps)
        if ctx.role is Role.EMBEDDING:
            return self._finish(float(self.options["embedding_std"]), 1.0)
        if ctx.role is Role.OUTPUT:
            std, init_kind = self.output_init(ctx)
            lr = self.output_lr(ctx)
            if ctx.family == "scion":
                # SCION constrained steps shrink W by (1-lr): compensate the multiplier in the radius instead
                extra["radius"] = ctx.opt.scion_radius(ctx.role) * lr
                lr = 1.0
            return self._finish(std, lr, extra=extra, init_kind=init_kind)
        # hidden
        bi, _ = base_fans(ctx.role, ctx.fan_in, ctx.fan_out, m)
        std = m ** float(self.options["hidden_init_exp"]) / math.sqrt(bi)
        lr = self.hidden_lr(ctx)
        eps = m ** float(self.options["hidden_eps_exp"]) if ctx.kind == "elementwise" else 1.0
        if ctx.branch:
            lr, eps = lr * self.depth_lr(ctx), eps * self.depth_eps(ctx)
        return self._finish(std, lr, eps)


class CompleteP(MuP):
    """CompleteP: μP in width plus residual branches x + m_L^-α F(x), branch LR m_L^(α-1),
    branch Adam eps m_L^-α (hidden weights additionally m_N^-1). α = 1 is CompleteP, ½ depth-μP."""

    name = "completep"
    summary = "muP width + depth: residual m_L^-alpha, branch LR m_L^(alpha-1), Adam eps m_N^-1 m_L^-alpha"
    OPTIONS: ClassVar[dict[str, OptionValue]] = {
        "branch_lr_exp": "auto",  # branch LR m_L^exp; auto: alpha - 1
        "branch_eps_exp": "auto",  # branch Adam eps m_L^exp; auto: -alpha
    }

    def __init__(self, config: ParametrizationConfig, width: int, depth: int) -> None:
        super().__init__(config, width, depth)
        if not 0.5 <= config.alpha <= 1.0:
            raise ValueError(
                f"parametrization.alpha={config.alpha}: CompleteP needs alpha in [0.5, 1] "
                f"(1: CompleteP, 0.5: depth-muP); use kind 'mup' for no residual scaling"
            )
        self.alpha = config.alpha

    def residual_multiplier(self) -> float:
        # CompleteP residual x + m_L^-alpha F(LN x) (arXiv 2505.01618)
        return self.scale.m_depth ** -self.alpha

    def depth_lr(self, ctx: ParamContext) -> float:
        # CompleteP branch weights/biases/LN: LR eta * m_L^(alpha-1) (arXiv 2505.01618)
        return self.scale.m_depth ** self.number("branch_lr_exp", self.alpha - 1.0)

    def depth_eps(self, ctx: ParamContext) -> float:
        if ctx.kind != "elementwise":
            return 1.0
        # CompleteP AdamW eps * m_N^-1 * m_L^-alpha (hidden), eps * m_L^-alpha (branch vectors) (arXiv 2505.01618)
        return self.scale.m_depth ** self.number("branch_eps_exp", -self.alpha)


class DepthOneOverK(MuP):
    """Residual branch multiplier 1/K (K residual blocks = depth), LR constant in K; μP in width."""

    name = "depth_1overK"
    summary = "residual branch x (1/K)^-exp with K = depth, LR constant in depth; muP in width"
    OPTIONS: ClassVar[dict[str, OptionValue]] = {
        "branch_multiplier_exp": -1.0,  # residual multiplier K^exp
        "relative_depth": False,  # True: (K/base_depth)^exp, so the base depth has multiplier 1
    }

    def residual_multiplier(self) -> float:
        k = self.scale.m_depth if self.options["relative_depth"] else float(self.scale.depth)
        # residual branch multiplier 1/K, LR constant in K (arXiv 2610.14344)
        return k ** float(self.options["branch_multiplier_exp"])


class MOGAGeometry(Recipe):
    """Each layer steps in its mean-normalized geometry with one base η: the LR multiplier of a matrix
    is the geometry factor g(fan_in, fan_out) of its update kind relative to a (ref, ref) hidden layer
    (ref = base width): elementwise (sign geometry) g = 1/d_in; orthogonal g = sqrt(d_out/d_in)/s;
    geometry (MOGA/SCION LMOs) g = 1. Embeddings and vectors (AdamW in MOGA) keep LR 1. No forward
    multipliers; readout init std sqrt(ref)/fan_in (unit size in the (1,mean)→(∞,mean) geometry)."""

    name = "moga"
    summary = "per-layer mean-normalized geometry factors (1/d_in sign, sqrt(d_out/d_in)/s spectral), one eta"
    OPTIONS: ClassVar[dict[str, OptionValue]] = {
        "attn_scale_power": 0.5,
        "reference_fan": "auto",  # auto: base width
        "readout_init": "mean",  # mean: std sqrt(ref)/fan_in; fan_in: 1/sqrt(fan_in); zero
    }

    def forward_multipliers(self) -> ForwardMultipliers:
        return ForwardMultipliers(attn_scale_power=float(self.options["attn_scale_power"]))

    def _ref(self) -> float:
        return self.number("reference_fan", float(self.scale.base_width))

    def geometry_factor(self, ctx: ParamContext, fan_in: float, fan_out: float) -> float:
        if ctx.kind == "elementwise":
            # (1,mean)->(inf,mean) sign geometry: D = sign(M)/d_in (arXiv 2603.09952)
            return 1.0 / fan_in
        if ctx.kind == "orthogonal":
            # (2,mean)->(2,mean) spectral geometry: sqrt(d_out/d_in) UV^T, optimizer applies s (arXiv 2603.09952)
            return math.sqrt(fan_out / fan_in) / shape_factor(fan_out, fan_in, ctx.opt.shape_factor)
        return 1.0

    def param_rule(self, ctx: ParamContext) -> ParamRule:
        ref = self._ref()
        if ctx.role is Role.VECTOR:
            return self._finish(None, 1.0)
        if ctx.role is Role.EMBEDDING:
            return self._finish(float(self.options["embedding_std"]), 1.0)
        lr = self.geometry_factor(ctx, ctx.fan_in, ctx.fan_out) / self.geometry_factor(ctx, ref, ref)
        if ctx.role is Role.OUTPUT:
            mode = self.options["readout_init"]
            if mode == "zero":
                return self._finish(0.0, lr, init_kind="zero")
            if mode == "fan_in":
                return self._finish(1.0 / math.sqrt(ctx.fan_in), lr)
            if mode != "mean":
                raise ValueError(f"parametrization.options.readout_init={mode!r}: use 'mean', 'fan_in' or 'zero'")
            return self._finish(math.sqrt(ref) / ctx.fan_in, lr)
        return self._finish(1.0 / math.sqrt(ctx.fan_in), lr)


class ScionRecipe(Recipe):
    """SCION Sign → Spectral → Sign: per-role norms and radii (constant in width: the LMOs are
    mean-normalized), norm-consistent init, one γ. Optional CompleteP-style depth scaling
    (residual m_L^-α, hidden γ m_L^(α-1)). Needs a SCION-family optimizer."""

    name = "scion"
    summary = "SCION: embedding Sign (rho_e), hidden Spectral (rho_h), head Sign/d_in (rho_u); norm-consistent init"
    OPTIONS: ClassVar[dict[str, OptionValue]] = {
        "attn_scale_power": 0.5,
        # radii: "auto" takes the optimizer's `{role}_radius` hparam, else SCION_RADII (1 / 3 / 10 / 1)
        "radius_embedding": "auto",
        "radius_hidden": "auto",
        "radius_output": "auto",
        "radius_vector": "auto",
        # embedding step -rho_e*sign (False) or -(rho_e/d_in)*sign (True); "auto": the optimizer's hparam
        "embedding_normalized": "auto",
        "init": "norm",  # norm: unit point of each layer's norm ball (times init_radius_scale); normal: SP
        "init_radius_scale": 0.0,  # init scale = rho**x: 0 unit ball point, 1 on the radius
        "depth_scaling": False,  # residual m_L^-alpha and hidden LR m_L^(alpha-1) (alpha from the config)
    }

    def __init__(self, config: ParametrizationConfig, width: int, depth: int) -> None:
        super().__init__(config, width, depth)
        self.alpha = config.alpha

    def forward_multipliers(self) -> ForwardMultipliers:
        residual = self.scale.m_depth ** -self.alpha if self.options["depth_scaling"] else 1.0
        return ForwardMultipliers(residual=residual, attn_scale_power=float(self.options["attn_scale_power"]))

    def param_rule(self, ctx: ParamContext) -> ParamRule:
        if ctx.family != "scion":
            raise ValueError(
                f"parametrization 'scion' sets SCION norms and radii, so it needs a SCION optimizer "
                f"(scion, scion_unconstrained, projected_scion); got family {ctx.family!r}. "
                f"Use 'mup' or 'moga' for other optimizers"
            )
        role = ctx.role
        radius = self.number(f"radius_{role.value}", ctx.opt.scion_radius(role))
        g = float(self.options["init_radius_scale"])
        norm_init = self.options["init"] == "norm"
        lr = 1.0
        if role is Role.VECTOR:
            extra = {"norm": "bias_rms", "radius": radius}
            return self._finish(None, lr, extra=extra)
        if role is Role.EMBEDDING:
            option = self.options["embedding_normalized"]
            normalized = bool(ctx.opt.hparams.get("embedding_normalized", False) if option == "auto" else option)
            extra = {"norm": "sign", "radius": radius, "normalized": normalized}
            # Sign ball point: +-1 (or +-1/d_in) (arXiv 2502.07529)
            mag = (1.0 / ctx.fan_in if normalized else 1.0) * radius**g
            if norm_init:
                return self._finish(mag, lr, extra=extra, init_kind="sign")
            return self._finish(float(self.options["embedding_std"]), lr, extra=extra)
        if role is Role.OUTPUT:
            extra = {"norm": "sign", "radius": radius, "normalized": True}
            if norm_init:
                return self._finish(radius**g / ctx.fan_in, lr, extra=extra, init_kind="sign")
            return self._finish(1.0 / math.sqrt(ctx.fan_in), lr, extra=extra)
        extra = {"norm": "auto", "radius": radius}
        if self.options["depth_scaling"] and ctx.branch:
            # depth for spectral optimizers: hidden lr ~ L^(alpha-1) (arXiv 2505.01618)
            lr = self.scale.m_depth ** (self.alpha - 1.0)
        if norm_init:
            # Spectral ball point: orthogonal x sqrt(d_out/d_in) (arXiv 2502.07529)
            return self._finish(math.sqrt(ctx.fan_out / ctx.fan_in) * radius**g, lr, extra=extra,
                                init_kind="orthogonal")
        return self._finish(1.0 / math.sqrt(ctx.fan_in), lr, extra=extra)


def make_recipe(config: ParametrizationConfig, width: int, depth: int) -> Recipe:
    try:
        cls = RECIPES[config.kind]
    except KeyError:
        raise ValueError(
            f"parametrization.kind={config.kind!r} is not a registered recipe; choose one of {sorted(RECIPES)}"
        ) from None
    return cls(config, width, depth)


@dataclass
class ResolvedParam:
    name: str
    param: nn.Parameter
    role: Role
    fan_in: int
    fan_out: int
    rule: ParamRule
    forward_multiplier: float
    branch: bool = False

    def row(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "role": self.role.value,
            "shape": "x".join(map(str, self.param.shape)),
            "fan_in": self.fan_in,
            "fan_out": self.fan_out,
            "init_std": self.rule.init_std,
            "forward_multiplier": self.forward_multiplier,
            **{k: v for k, v in asdict(self.rule).items() if k not in ("init_std", "extra")},
            **{f"extra.{k}": v for k, v in self.rule.extra.items()},
        }


def resolve(
    model: nn.Module,
    recipe: Recipe,
    family: str,
    *,
    optimizer: str | None = None,
    hparams: Mapping[str, Any] | None = None,
) -> list[ResolvedParam]:
    """Per-parameter rules for a built model (whose forward multipliers came from `recipe`).

    `optimizer` (registry name) and `hparams` refine the family: the shape factor of Muon-like
    updates (``adjust_lr``, Muown, OrScale variant) and SCION's radii. `forward_multiplier` is the
    output multiplier for the head, the residual multiplier for parameters inside a residual branch.
    """
    mults = recipe.forward_multipliers()
    info = OptimizerInfo(family, optimizer, dict(hparams or {}))
    out = []
    for name, param, role in named_roles(model):
        fan_in, fan_out = fans(param)
        branch = recipe.is_branch(name)
        forward = mults.output if role is Role.OUTPUT else (mults.residual if branch else 1.0)
        rule = recipe.rule(role, fan_in, fan_out, family, ndim=param.ndim, branch=branch, optimizer=info,
                           name=name)
        out.append(ResolvedParam(name, param, role, fan_in, fan_out, rule, forward, branch))
    return out


@torch.no_grad()
def apply_init(resolved: list[ResolvedParam], generator: torch.Generator | None = None) -> None:
    for rp in resolved:
        std, kind, p = rp.rule.init_std, rp.rule.init_kind, rp.param
        if std is None:
            continue
        if kind == "normal":
            p.normal_(0.0, std, generator=generator)
        elif kind == "zero":
            p.zero_()
        elif kind == "sign":
            p.copy_(torch.randint(0, 2, p.shape, generator=generator).to(p) * 2 - 1).mul_(std)
        elif kind == "orthogonal":
            p.copy_(_orthogonal(p, std, generator, is_in_out(p)))
        else:
            raise ValueError(f"{rp.name}: init_kind={kind!r}; use one of {list(INIT_KINDS)}")


def _orthogonal(p: torch.Tensor, gain: float, generator: torch.Generator | None, in_out: bool) -> torch.Tensor:
    """(Semi-)orthogonal matrix of p's (d_out, d_in) view with singular values `gain`."""
    shape = p.shape
    rows = shape[1] if in_out else shape[0]
    cols = p.numel() // rows
    a = torch.randn(max(rows, cols), min(rows, cols), generator=generator, dtype=torch.float32)
    q, r = torch.linalg.qr(a)
    q = q * torch.sign(torch.diagonal(r)).unsqueeze(0)
    m = q if rows >= cols else q.T
    m = m * gain
    if in_out:
        m = m.T
    return m.reshape(shape).to(p)
