"""Recipes: the registry, each recipe's table against its formulas on hand-picked layers, resolve/apply_init
on a real GPT-2, and the resolved table that `hpt trial --explain` prints."""

from __future__ import annotations

import math

import pytest
import torch

from workloads.build import build_trial_objects, parameter_table
from workloads.config import ParametrizationConfig, TrialConfig
from workloads.explain import explain
from workloads.models.gpt2 import GPT2, GPT2Config
from workloads.parametrization import (
    RECIPES,
    OptimizerInfo,
    apply_init,
    make_recipe,
    resolve,
)
from workloads.roles import Role

torch.set_num_threads(1)

BASE_W, W = 64, 256  # m_N = 4
BASE_D, D = 2, 8  # m_L = 4


def recipe(kind: str, width: int = W, depth: int = BASE_D, alpha: float = 1.0, **options):
    cfg = ParametrizationConfig(kind=kind, base_width=BASE_W, base_depth=BASE_D, alpha=alpha, options=options)
    return make_recipe(cfg, width, depth)


def muon(adjust_lr: str) -> OptimizerInfo:
    return OptimizerInfo("muon", "muon", {"adjust_lr": adjust_lr})


def test_registry_has_every_recipe_of_the_issue():
    assert {"sp", "mup", "completep", "depth_1overK", "moga", "scion"} <= set(RECIPES)
    with pytest.raises(ValueError, match="not a registered recipe"):
        make_recipe(ParametrizationConfig(kind="nope"), 64, 2)


@pytest.mark.parametrize("kind", ["sp", "mup", "completep", "depth_1overK", "moga"])
@pytest.mark.parametrize("family", ["adam", "muon", "normalized", "sign", "scion"])
def test_every_recipe_equals_its_base_at_base_scale(kind, family):
    # at width = base width and depth = base depth every LR / wd / eps multiplier is 1
    r = recipe(kind, width=BASE_W, depth=BASE_D)
    for role, fi, fo in [(Role.EMBEDDING, 65, 64), (Role.HIDDEN, 64, 256), (Role.HIDDEN, 256, 64),
                         (Role.OUTPUT, 64, 65), (Role.VECTOR, 1, 64)]:
        rule = r.rule(role, fi, fo, family, branch=True)
        if kind == "moga" and role in (Role.HIDDEN, Role.OUTPUT):
            continue  # moga: per-layer factors relative to a square (base, base) layer, checked below
        assert rule.lr_mult == pytest.approx(1.0), (role, rule)
        assert rule.wd_mult == pytest.approx(1.0)
        assert rule.eps_mult == pytest.approx(1.0)
    # 1/K is absolute (K = number of residual blocks), so it is not 1 at the base depth
    assert r.forward_multipliers().residual == pytest.approx(1 / BASE_D if kind == "depth_1overK" else 1.0)
    assert r.forward_multipliers().output == pytest.approx(1.0)


def test_sp_table():
    r = recipe("sp")
    assert r.rule(Role.HIDDEN, W, 4 * W, "adam").init_std == pytest.approx(1 / math.sqrt(W))
    assert r.rule(Role.HIDDEN, W, 4 * W, "adam").lr_mult == 1.0
    assert r.rule(Role.OUTPUT, W, 65, "adam").lr_mult == 1.0
    assert r.rule(Role.EMBEDDING, 65, W, "adam").init_std == 1.0
    assert r.rule(Role.VECTOR, 1, W, "adam").init_std is None
    assert r.forward_multipliers().attn_scale_power == 0.5


def test_mup_adamw_table():
    r = recipe("mup")
    m = W / BASE_W
    hidden = r.rule(Role.HIDDEN, W, W, "adam")
    # muP hidden AdamW LR = eta * base_width / width, wd x m_N (lr*wd fixed), eps x 1/m_N, init var 1/fan_in
    assert hidden.lr_mult == pytest.approx(BASE_W / W)
    assert hidden.wd_mult == pytest.approx(m)
    assert hidden.eps_mult == pytest.approx(1 / m)
    assert hidden.init_std == pytest.approx(1 / math.sqrt(W))
    proj = r.rule(Role.HIDDEN, 4 * W, W, "adam")  # MLP c_proj: fan_in 4w
    assert proj.lr_mult == pytest.approx(BASE_W / W)
    assert proj.init_std == pytest.approx(1 / math.sqrt(4 * W))
    out = r.rule(Role.OUTPUT, W, 65, "adam")
    assert out.lr_mult == 1.0
    assert out.init_std == pytest.approx(1 / math.sqrt(BASE_W))  # x output multiplier 1/m_N: var ~ 1/fan_in^2
    emb = r.rule(Role.EMBEDDING, 65, W, "adam")
    assert (emb.lr_mult, emb.init_std) == (1.0, 1.0)
    assert r.rule(Role.VECTOR, 1, W, "adam").lr_mult == 1.0
    mults = r.forward_multipliers()
    assert mults.output == pytest.approx(BASE_W / W)
    assert mults.attn_scale_power == 1.0  # q.k / d_head
    assert mults.residual == 1.0
    assert recipe("mup", readout_init="zero").rule(Role.OUTPUT, W, 65, "adam").init_kind == "zero"


def test_mup_lr_follows_the_optimizer_update_kind():
    r = recipe("mup")
    m = W / BASE_W
    # Muon: spectral / original shape factors already give ||dW|| ~ sqrt(d_out/d_in): LR constant
    for s in ("spectral", "original", "none"):
        for fi, fo in ((W, W), (W, 4 * W), (4 * W, W), (W, 3 * W)):
            assert r.rule(Role.HIDDEN, fi, fo, "muon", optimizer=muon(s)).lr_mult == pytest.approx(1.0), (s, fi, fo)
    # Moonlight's 0.2 sqrt(max(d_out, d_in)) grows like sqrt(width): LR m_N^-1/2
    assert r.rule(Role.HIDDEN, W, 4 * W, "muon", optimizer=muon("match_rms_adamw")).lr_mult == pytest.approx(m**-0.5)
    assert r.rule(Role.HIDDEN, W, W, "muon", optimizer=OptimizerInfo("muon", "muown")).lr_mult == pytest.approx(
        m**-0.5)
    # Muon's AdamW parts keep the Adam rules
    assert r.rule(Role.OUTPUT, W, 65, "muon", optimizer=muon("spectral")).lr_mult == 1.0
    # MOGA's LMOs already carry 1/sqrt(d_in)-type factors; Lion is sign-like like Adam
    assert r.rule(Role.HIDDEN, W, W, "normalized").lr_mult == pytest.approx(1.0)
    assert r.rule(Role.HIDDEN, W, W, "sign").lr_mult == pytest.approx(1 / m)
    # SCION head Sign/d_in under the 1/m_N output multiplier: radius x m_N, not the LR
    head = r.rule(Role.OUTPUT, W, 65, "scion", optimizer=OptimizerInfo("scion", "scion"))
    assert head.lr_mult == 1.0 and head.extra["radius"] == pytest.approx(10.0 * m)


def test_exponents_are_options():
    r = recipe("mup", hidden_lr_exp=-0.5, output_multiplier_exp=-0.5, attn_scale_power=0.5)
    m = W / BASE_W
    assert r.rule(Role.HIDDEN, W, W, "adam").lr_mult == pytest.approx(m**-0.5)
    assert r.forward_multipliers().output == pytest.approx(m**-0.5)
    assert r.forward_multipliers().attn_scale_power == 0.5
    assert recipe("mup", wd_rule="coupled").rule(Role.HIDDEN, W, W, "adam").wd_mult == 1.0
    with pytest.raises(ValueError, match="hidden_lr_exps.*valid options"):
        recipe("mup", hidden_lr_exps=-1.0)


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_completep_table(alpha):
    m_n, m_l = W / BASE_W, D / BASE_D
    r = recipe("completep", width=W, depth=D, alpha=alpha)
    assert r.forward_multipliers().residual == pytest.approx(m_l**-alpha)
    assert r.forward_multipliers().output == pytest.approx(1 / m_n)
    hidden = r.rule(Role.HIDDEN, W, 4 * W, "adam", branch=True)
    # CompleteP: hidden LR eta m_N^-1 m_L^(alpha-1); AdamW eps m_N^-1 m_L^-alpha; init var 1/fan_in
    assert hidden.lr_mult == pytest.approx(m_n**-1 * m_l ** (alpha - 1))
    assert hidden.eps_mult == pytest.approx(m_n**-1 * m_l**-alpha)
    assert hidden.init_std == pytest.approx(1 / math.sqrt(W))
    ln = r.rule(Role.VECTOR, 1, W, "adam", branch=True)  # LN inside a block
    assert ln.lr_mult == pytest.approx(m_l ** (alpha - 1))
    assert ln.eps_mult == pytest.approx(m_l**-alpha)
    ln_f = r.rule(Role.VECTOR, 1, W, "adam", branch=False)  # final LN: unchanged
    assert (ln_f.lr_mult, ln_f.eps_mult) == (1.0, 1.0)
    emb, out = r.rule(Role.EMBEDDING, 65, W, "adam"), r.rule(Role.OUTPUT, W, 65, "adam")
    assert (emb.lr_mult, emb.eps_mult, out.lr_mult, out.eps_mult) == (1.0, 1.0, 1.0, 1.0)
    # spectral optimizers: hidden LR ~ L^(alpha-1) on top of the width rule
    assert r.rule(Role.HIDDEN, W, W, "muon", optimizer=muon("spectral")).lr_mult == pytest.approx(
        m_l ** (alpha - 1))


def test_completep_rejects_alpha_outside_its_range():
    with pytest.raises(ValueError, match=r"alpha in \[0.5, 1\]"):
        recipe("completep", alpha=0.25)


def test_depth_1overk_table():
    r = recipe("depth_1overK", width=W, depth=D)
    assert r.forward_multipliers().residual == pytest.approx(1 / D)  # 1/K, K residual blocks
    shallow = recipe("depth_1overK", width=W, depth=BASE_D)
    for role, fi, fo in [(Role.HIDDEN, W, W), (Role.VECTOR, 1, W)]:
        deep_rule, shallow_rule = r.rule(role, fi, fo, "adam", branch=True), shallow.rule(role, fi, fo, "adam",
                                                                                          branch=True)
        assert deep_rule.lr_mult == pytest.approx(shallow_rule.lr_mult)  # LR constant in K
    assert recipe("depth_1overK", width=W, depth=D, relative_depth=True).forward_multipliers().residual == \
        pytest.approx(BASE_D / D)


def test_moga_per_layer_geometry_factors():
    r = recipe("moga")
    # sign geometry (Adam, Lion): LR x 1/d_in relative to a (base, base) layer
    assert r.rule(Role.HIDDEN, W, 4 * W, "adam").lr_mult == pytest.approx(BASE_W / W)
    assert r.rule(Role.HIDDEN, 4 * W, W, "adam").lr_mult == pytest.approx(BASE_W / (4 * W))
    assert r.rule(Role.OUTPUT, W, 65, "adam").lr_mult == pytest.approx(BASE_W / W)
    assert r.rule(Role.OUTPUT, W, 65, "adam").init_std == pytest.approx(math.sqrt(BASE_W) / W)
    assert r.rule(Role.EMBEDDING, 65, W, "adam").lr_mult == 1.0
    # spectral geometry for Muon: sqrt(d_out/d_in)/s
    assert r.rule(Role.HIDDEN, 4 * W, W, "muon", optimizer=muon("original")).lr_mult == pytest.approx(0.5)
    assert r.rule(Role.HIDDEN, 4 * W, W, "muon", optimizer=muon("spectral")).lr_mult == pytest.approx(1.0)
    # MOGA's own LMOs carry the factors: LR 1
    assert r.rule(Role.HIDDEN, 4 * W, W, "normalized").lr_mult == pytest.approx(1.0)
    assert r.forward_multipliers().output == 1.0


def test_scion_recipe_radii_and_init():
    r = recipe("scion", embedding_normalized=True, radius_hidden=50.0)
    info = OptimizerInfo("scion", "scion")
    emb = r.rule(Role.EMBEDDING, 65, W, "scion", optimizer=info)
    assert emb.extra == {"norm": "sign", "radius": 1.0, "normalized": True}
    assert (emb.init_kind, emb.init_std) == ("sign", pytest.approx(1 / 65))
    hidden = r.rule(Role.HIDDEN, W, 4 * W, "scion", optimizer=info)
    assert hidden.extra == {"norm": "auto", "radius": 50.0}
    assert (hidden.init_kind, hidden.init_std) == ("orthogonal", pytest.approx(2.0))  # sqrt(d_out/d_in)
    head = r.rule(Role.OUTPUT, W, 65, "scion", optimizer=info)
    assert head.extra == {"norm": "sign", "radius": 10.0, "normalized": True}
    assert r.rule(Role.HIDDEN, W, W, "scion").lr_mult == 1.0  # radii and LR constant in width
    # radii default to the optimizer's per-role hparams, so a spec's `hidden_radius` is not overridden
    from_hparams = recipe("scion").rule(Role.HIDDEN, W, W, "scion",
                                        optimizer=OptimizerInfo("scion", "scion", {"hidden_radius": 50.0}))
    assert from_hparams.extra["radius"] == 50.0
    assert recipe("scion").rule(Role.OUTPUT, W, 65, "scion").extra["radius"] == 10.0
    with pytest.raises(ValueError, match="needs a SCION optimizer"):
        r.rule(Role.HIDDEN, W, W, "adam")


def _gpt(width: int = 128, depth: int = 2, **mults) -> GPT2:
    return GPT2(GPT2Config(vocab_size=65, seq_len=16, width=width, depth=depth, head_dim=32, **mults))


def test_resolve_marks_branches_and_apply_init_draws_the_stds():
    r = recipe("completep", width=512, depth=D)
    model = _gpt(512, D, residual_multiplier=r.forward_multipliers().residual)
    resolved = {rp.name: rp for rp in resolve(model, r, "adam")}
    assert resolved["blocks.3.ln_1.weight"].branch and resolved["blocks.0.mlp.c_proj.weight"].branch
    assert not resolved["ln_f.weight"].branch and not resolved["wte.weight"].branch
    assert resolved["blocks.0.mlp.c_proj.weight"].forward_multiplier == pytest.approx(BASE_D / D)
    assert resolved["lm_head.weight"].forward_multiplier == pytest.approx(BASE_W / 512)
    assert resolved["ln_f.weight"].rule.eps_mult == 1.0
    assert resolved["blocks.3.ln_1.weight"].rule.eps_mult == pytest.approx(BASE_D / D)
    apply_init(list(resolved.values()), torch.Generator().manual_seed(0))
    assert resolved["blocks.0.mlp.c_proj.weight"].param.std().item() == pytest.approx(1 / math.sqrt(4 * 512),
                                                                                        rel=0.02)
    assert resolved["lm_head.weight"].param.std().item() == pytest.approx(1 / math.sqrt(BASE_W), rel=0.05)
    assert torch.all(resolved["ln_f.weight"].param == 1.0)  # vectors keep the module's init


def test_orthogonal_and_sign_init():
    r = recipe("scion", width=128)
    model = _gpt(128)
    resolved = {rp.name: rp for rp in resolve(model, r, "scion")}
    apply_init(list(resolved.values()), torch.Generator().manual_seed(0))
    w = resolved["blocks.0.mlp.c_fc.weight"].param  # (512, 128): singular values sqrt(512/128) = 2
    assert torch.linalg.svdvals(w.detach()) == pytest.approx(torch.full((128,), 2.0), abs=1e-4)
    assert resolved["lm_head.weight"].param.abs().unique().tolist() == pytest.approx([1 / 128])


def _trial(kind: str, optimizer: str, width: int = W, **hparams) -> TrialConfig:
    return TrialConfig.model_validate({
        "workload": {"kind": "gpt2", "seq_len": 16, "head_dim": 32, "batch_size": 4},
        "width": width, "depth": 2,
        "parametrization": {"kind": kind, "base_width": BASE_W},
        "optimizer": {"name": optimizer, "lr": 0.01, "weight_decay": 0.1, "hparams": hparams},
    })


def test_the_optimizer_receives_the_recipe_multipliers():
    objs = build_trial_objects(_trial("mup", "adamw"))
    rows = {r["name"]: r for r in parameter_table(objs)}
    m = W / BASE_W
    assert rows["blocks.0.attn.c_attn.weight"]["lr"] == pytest.approx(0.01 / m)
    assert rows["blocks.0.attn.c_attn.weight"]["weight_decay"] == pytest.approx(0.1 * m)
    assert rows["blocks.0.attn.c_attn.weight"]["eps"] == pytest.approx(1e-8 / m)
    assert rows["lm_head.weight"]["lr"] == pytest.approx(0.01)
    assert objs.model.output_multiplier == pytest.approx(1 / m)
    assert objs.model.blocks[0].attn.scale == pytest.approx(1 / 32)  # 1/d_head
    muon_rows = {r["name"]: r for r in parameter_table(build_trial_objects(
        _trial("mup", "muon", adjust_lr="match_rms_adamw")))}
    assert muon_rows["blocks.0.mlp.c_fc.weight"]["algorithm"] == "muon"
    assert muon_rows["blocks.0.mlp.c_fc.weight"]["lr"] == pytest.approx(0.01 * m**-0.5)


def test_explain_prints_the_table_without_training():
    text = explain(_trial("mup", "adamw"))
    assert "parametrization 'mup'" in text and "m_N=4" in text
    assert "output=0.25" in text and "attention=1/d_head^1" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("blocks.0.attn.c_attn.weight"))
    assert "hidden" in line and "768x256" in line and "0.0025" in line  # lr = 0.01 / 4
