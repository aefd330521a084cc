"""Registry, builder routing, resolved table, hparam validation, state_dict round trips."""

from __future__ import annotations

import copy

import pytest
import torch

from workloads.optim import (
    FAMILIES,
    REGISTRY,
    ParamSpec,
    allowed_hparams,
    build_optimizer,
    family_of,
    resolved_table,
)

HYBRIDS = ("muon", "moga", "moga_col", "moga_sign", "muown", "orscale")
SCIONS = ("scion", "scion_unconstrained", "projected_scion")


def _specs(seed: int = 0) -> list[ParamSpec]:
    gen = torch.Generator().manual_seed(seed)

    def p(*shape):
        return torch.nn.Parameter(torch.randn(shape, generator=gen) * 0.2)

    return [
        ParamSpec("wte.weight", p(40, 8), "embedding", in_out=True),
        ParamSpec("blocks.0.attn.c_attn.weight", p(24, 8), "hidden", lr_mult=0.5, wd_mult=2.0, eps_mult=0.1),
        ParamSpec("blocks.0.mlp.c_proj.weight", p(8, 32), "hidden"),
        ParamSpec("stem.weight", p(8, 3, 3, 3), "hidden"),
        ParamSpec("blocks.0.ln_1.weight", p(8), "vector"),
        ParamSpec("lm_head.weight", p(40, 8), "output"),
    ]


def test_registry_names_and_families():
    for key in ("adamw", "muon", "moga", "moga_col", "moga_sign", "muown", "orscale", "scion",
                "scion_unconstrained", "projected_scion", "lion"):
        assert key in REGISTRY
    for name, cls in REGISTRY.items():
        assert issubclass(cls, torch.optim.Optimizer)
        assert cls.family in FAMILIES and family_of(name) == cls.family
    assert issubclass(REGISTRY["adamw"], torch.optim.AdamW)
    assert family_of(torch.optim.AdamW) == "adam"


def test_unknown_name_and_hparam_are_value_errors_listing_the_allowed():
    with pytest.raises(ValueError, match=r"'sgdx'.*adamw"):
        build_optimizer("sgdx", _specs(), lr=0.1)
    with pytest.raises(ValueError, match=r"\['bogus'\].*ns_steps"):
        build_optimizer("muon", _specs(), lr=0.1, bogus=1)
    with pytest.raises(ValueError, match="adjust_lr"):
        build_optimizer("muon", _specs(), lr=0.1, adjust_lr="weird")
    specs = _specs()
    specs[0].extra = {"radius": 3.0}
    with pytest.raises(ValueError, match="radius"):
        build_optimizer("muon", specs, lr=0.1)
    specs[0].role = "weights"
    with pytest.raises(ValueError, match="role"):
        build_optimizer("adamw", specs, lr=0.1)
    assert "embedding_radius" in allowed_hparams("scion") and "adam_betas" in allowed_hparams("muon")
    with pytest.raises(ValueError, match="hidden_radius"):  # SCION radii are per role
        build_optimizer("scion", _specs(), lr=0.1, radius=3.0)


@pytest.mark.parametrize("name", HYBRIDS)
def test_hybrid_routing(name):
    opt = build_optimizer(name, _specs(), lr=0.02, weight_decay=0.1, adam_eps=1e-10)
    rows = {r["name"]: r for r in resolved_table(opt)}
    rule = opt.rule
    assert [rows[n]["algorithm"] for n in rows] == ["adamw", rule, rule, rule, "adamw", "adamw"]
    attn = rows["blocks.0.attn.c_attn.weight"]
    assert attn["lr"] == pytest.approx(0.01) and attn["weight_decay"] == pytest.approx(0.2)
    assert attn["shape"] == "24x8" and attn["role"] == "hidden"
    emb = rows["wte.weight"]
    assert emb["eps"] == pytest.approx(1e-10) and emb["lr"] == pytest.approx(0.02)
    adam_group = opt.param_groups[0]
    assert adam_group["betas"] == (0.9, 0.95) and adam_group["in_out"] is True
    if name == "muown":
        assert opt.param_groups[1]["qkv_chunks"] == 3 and attn["eps"] == pytest.approx(1e-9)
    else:
        assert attn["eps"] is None
    if name.startswith("moga"):
        assert attn["norm"] == {"moga": "row", "moga_col": "col", "moga_sign": "sign"}[name]


def test_extra_overrides_algorithm_and_adam_lr():
    specs = _specs()
    specs[2].extra = {"algorithm": "adamw"}
    specs[5].extra = {"algorithm": "muon"}
    opt = build_optimizer("muon", specs, lr=0.02, adam_lr=3e-4, adam_betas=(0.8, 0.9))
    rows = {r["name"]: r for r in resolved_table(opt)}
    assert rows["blocks.0.mlp.c_proj.weight"]["algorithm"] == "adamw"
    assert rows["blocks.0.mlp.c_proj.weight"]["lr"] == pytest.approx(3e-4)
    assert rows["lm_head.weight"]["algorithm"] == "muon" and rows["lm_head.weight"]["lr"] == pytest.approx(0.02)
    assert opt.param_groups[2]["betas"] == (0.8, 0.9)


@pytest.mark.parametrize("name", SCIONS)
def test_scion_routing(name):
    specs = _specs()
    specs[2].extra = {"norm": "rownorm", "radius": 7.0}
    opt = build_optimizer(name, specs, lr=1e-3, hidden_radius=5.0, output_norm="colnorm")
    rows = {r["name"]: r for r in resolved_table(opt)}
    assert {n: (r["norm"], r["radius"]) for n, r in rows.items()} == {
        "wte.weight": ("sign", 1.0),
        "blocks.0.attn.c_attn.weight": ("spectral", 5.0),
        "blocks.0.mlp.c_proj.weight": ("rownorm", 7.0),
        "stem.weight": ("spectral_conv", 5.0),
        "blocks.0.ln_1.weight": ("bias_rms", 1.0),
        "lm_head.weight": ("colnorm", 10.0),
    }
    assert opt.param_groups[0]["normalized"] is False and opt.param_groups[0]["in_out"] is True
    assert all(r["algorithm"] == "scion" for r in rows.values())
    assert opt.param_groups[0]["constrained"] is (name == "scion")


@pytest.mark.parametrize("name", ["adamw", "lion"])
def test_uniform_optimizers(name):
    opt = build_optimizer(name, _specs(), lr=1e-3, weight_decay=0.1, betas=(0.9, 0.98))
    rows = resolved_table(opt)
    assert {r["algorithm"] for r in rows} == {name}
    assert rows[1]["lr"] == pytest.approx(5e-4) and rows[1]["weight_decay"] == pytest.approx(0.2)
    if name == "adamw":
        assert rows[1]["eps"] == pytest.approx(1e-9) and rows[0]["eps"] == pytest.approx(1e-8)
    else:
        assert rows[1]["eps"] is None


def _grads(specs, step):
    gen = torch.Generator().manual_seed(1000 + step)
    for s in specs:
        s.param.grad = torch.randn(s.param.shape, generator=gen)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_state_dict_round_trip_resumes_bit_identically(name):
    lr = {"adamw": 1e-2, "lion": 1e-3}.get(name, 1e-2)
    specs = _specs()
    opt = build_optimizer(name, specs, lr=lr, weight_decay=0.01)
    for t in range(3):
        _grads(specs, t)
        opt.step()
    saved_params = [s.param.detach().clone() for s in specs]
    saved_state = copy.deepcopy(opt.state_dict())
    for t in range(3, 6):
        _grads(specs, t)
        opt.step()
    final = [s.param.detach().clone() for s in specs]

    specs2 = _specs(seed=99)  # different values, overwritten below
    with torch.no_grad():
        for s2, p in zip(specs2, saved_params, strict=True):
            s2.param.copy_(p)
    opt2 = build_optimizer(name, specs2, lr=123.0, weight_decay=0.5)  # groups restored from the state dict
    opt2.load_state_dict(saved_state)
    for t in range(3, 6):
        _grads(specs2, t)
        opt2.step()
    for a, b in zip(final, (s.param.detach() for s in specs2), strict=True):
        assert torch.equal(a, b)
