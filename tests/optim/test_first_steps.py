"""Each optimizer against a hand-computed first (and second) step on small random matrices."""

from __future__ import annotations

import math

import pytest
import torch

from workloads.optim import MOGA, Lion, Muon, Muown, OrScale, ProjectedScion, Scion, ScionUnconstrained
from workloads.optim import geometry as geo


def _rand(shape, seed):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def _param(shape, seed=0):
    return torch.nn.Parameter(_rand(shape, seed))


# ----------------------------------------------------------------------------------------- Muon


@pytest.mark.parametrize("shape", [(12, 20), (20, 12)])
@pytest.mark.parametrize("adjust", ["original", "match_rms_adamw", "spectral", "none"])
def test_muon_first_step(shape, adjust):
    w = _param(shape)
    w0 = w.detach().clone()
    g = _rand(shape, 1)
    opt = Muon([w], lr=0.1, weight_decay=0.2, adjust_lr=adjust)
    w.grad = g.clone()
    opt.step()
    # EMA buffer (1-b)G, Nesterov lerp(G, M, b) = (1 - b + b(1-b)) G; NS is scale invariant
    o = geo.newton_schulz(g * (1 - 0.95 + 0.95 * 0.05))
    s = geo.shape_factor(shape[0], shape[1], adjust)
    expect = w0 * (1 - 0.1 * 0.2) - 0.1 * s * o
    assert torch.allclose(w.detach(), expect, atol=1e-6)


def test_muon_rejects_vectors_in_its_rule_and_runs_adamw_groups():
    with pytest.raises(ValueError, match="algorithm='adamw'"):
        Muon([torch.nn.Parameter(torch.zeros(3))], lr=0.1)
    a = torch.nn.Parameter(_rand((5,), 2))
    b = torch.nn.Parameter(a.detach().clone())
    ours = Muon([{"params": [a], "algorithm": "adamw", "weight_decay": 0.1}], lr=0.01)
    ref = torch.optim.AdamW([b], lr=0.01, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    for t in range(4):
        gr = _rand((5,), 10 + t)
        a.grad, b.grad = gr.clone(), gr.clone()
        ours.step()
        ref.step()
    assert torch.allclose(a, b, atol=1e-7, rtol=0)


# ----------------------------------------------------------------------------------------- MOGA


def test_moga_row_first_step_is_exact():
    w = _param((6, 9))
    w0 = w.detach().clone()
    g = _rand((6, 9), 3)
    opt = MOGA([w], lr=0.05, norm="row", weight_decay=0.0)
    w.grad = g.clone()
    opt.step()
    m = g + 0.95 * g  # sum-form Nesterov: M = G, U = G + bM
    expect = torch.stack([w0[i] - 0.05 * m[i] / (math.sqrt(9) * m[i].norm() + 1e-7) for i in range(6)])
    assert torch.allclose(w.detach(), expect, atol=1e-7, rtol=1e-6)


def test_moga_col_and_sign_first_steps_and_weight_decay():
    g = _rand((6, 9), 4)
    for norm in ("col", "sign"):
        w = _param((6, 9))
        w0 = w.detach().clone()
        opt = MOGA([w], lr=0.05, norm=norm, weight_decay=0.1)
        w.grad = g.clone()
        opt.step()
        m = 1.95 * g
        if norm == "col":
            d = torch.stack([math.sqrt(6) / 9 * m[:, j] / (m[:, j].norm() + 1e-7) for j in range(9)], dim=1)
        else:
            d = torch.sign(m) / 9
        assert torch.allclose(w.detach(), w0 * (1 - 0.005) - 0.05 * d, atol=1e-7, rtol=1e-6)


def test_moga_second_step_uses_sum_momentum():
    w = _param((4, 5))
    g1, g2 = _rand((4, 5), 5), _rand((4, 5), 6)
    opt = MOGA([w], lr=0.01, norm="sign")
    w.grad = g1.clone()
    opt.step()
    w1 = w.detach().clone()
    w.grad = g2.clone()
    opt.step()
    m = 0.95 * g1 + g2
    assert torch.allclose(w.detach(), w1 - 0.01 * torch.sign(g2 + 0.95 * m) / 5)


# ---------------------------------------------------------------------------------------- Muown


@pytest.mark.parametrize("mode", ["adam", "signum"])
def test_muown_first_step(mode):
    shape = (8, 6)
    w = _param(shape)
    w0 = w.detach().clone()
    g = _rand(shape, 7)
    opt = Muown([w], lr=0.01, magnitude_update=mode)
    w.grad = g.clone()
    opt.step()
    mag = w0.norm(dim=1)
    u = w0 / mag[:, None]
    grad_g = (g * u).sum(1)
    grad_v = mag[:, None] * (g - grad_g[:, None] * u)  # ||v_i|| = 1 at the start
    v1 = u - 0.01 * 0.2 * math.sqrt(8) * geo.newton_schulz(grad_v)
    if mode == "adam":  # first bias-corrected Adam step: m_hat/ (sqrt(v_hat) + eps) = g/(|g| + eps)
        mag1 = mag - 0.01 * grad_g / (grad_g.abs() + 1e-8)
    else:
        mag1 = mag - 0.01 * torch.sign(grad_g)
    expect = mag1[:, None] * v1 / v1.norm(dim=1, keepdim=True)
    assert torch.allclose(w.detach(), expect, atol=1e-6)


def test_muown_weight_decay_shrinks_rows_and_qkv_chunks():
    w = _param((12, 4))
    opt = Muown([{"params": [w], "qkv_chunks": 3}], lr=0.0, weight_decay=0.0)
    w.grad = _rand((12, 4), 8)
    before = w.detach().clone()
    opt.step()  # lr = 0: nothing moves
    assert torch.allclose(w.detach(), before, atol=1e-6)
    w2 = _param((6, 6), 1)
    opt2 = Muown([w2], lr=1e-3, weight_decay=10.0)
    w2.grad = torch.zeros(6, 6)
    n0 = w2.detach().norm(dim=1)
    opt2.step()  # zero gradient: only the decay acts on the magnitudes
    assert torch.allclose(w2.detach().norm(dim=1), n0 * (1 - 1e-2), rtol=1e-5)
    with pytest.raises(ValueError, match="qkv_chunks"):
        o = Muown([{"params": [_param((10, 4))], "qkv_chunks": 3}], lr=0.1)
        o.param_groups[0]["params"][0].grad = torch.ones(10, 4)
        o.step()


# -------------------------------------------------------------------------------------- OrScale


def test_orscale_first_trust_ratio_is_one_and_step_matches():
    shape = (10, 14)
    w = _param(shape)
    w0 = w.detach().clone()
    g = _rand(shape, 9)
    opt = OrScale([w], lr=0.02, weight_decay=0.1)
    w.grad = g.clone()
    opt.step()
    st = opt.state[w]
    assert float(st["trust_ratio"]) == pytest.approx(1.0, abs=1e-6)
    assert float(st["clipped"]) == 0.0
    q = geo.polar_express(g + 0.95 * g)
    d = 0.1 * w0 + 0.2 * math.sqrt(14) * q
    assert torch.allclose(w.detach(), w0 - 0.02 * float(st["trust_ratio"]) * d, atol=1e-6)
    assert float(st["c"]) == pytest.approx(float(w0.norm() / d.norm()), rel=1e-5)


def test_orscale_clips_and_counts():
    w = _param((8, 8))
    opt = OrScale([w], lr=0.5, weight_decay=0.0, variant="general", ratio_clip=(0.9, 1.1))
    for t in range(6):
        w.grad = _rand((8, 8), 20 + t)
        opt.step()
    st = opt.state[w]
    r = float(st["raw_ratio"])
    assert float(st["trust_ratio"]) == pytest.approx(min(max(r, 0.9), 1.1))
    assert float(st["n_steps"]) == 6
    assert 0 < float(st["n_clipped"]) <= 5  # big steps grow ||W||, the first step is never clipped
    assert opt.param_groups[0]["variant"] == "general"
    with pytest.raises(ValueError, match="variant"):
        OrScale([w], lr=0.1, variant="vision")


def test_orscale_zero_weight_uses_fallback_c():
    w = torch.nn.Parameter(torch.zeros(4, 9))
    opt = OrScale([w], lr=0.1)
    w.grad = _rand((4, 9), 11)
    opt.step()
    assert float(opt.state[w]["c"]) == pytest.approx(0.2 * 3.0)


# ---------------------------------------------------------------------------------------- SCION


@pytest.mark.parametrize("norm", ["sign", "rownorm", "colnorm", "spectral"])
def test_constrained_scion_stays_in_ball(norm):
    radius = 2.0
    w = _param((9, 6))
    opt = Scion([{"params": [w], "norm": norm, "radius": radius}], lr=0.3, momentum=0.5)
    opt.init(generator=torch.Generator().manual_seed(0))
    measure = {"sign": geo.norm_sign, "rownorm": geo.norm_row, "colnorm": geo.norm_col,
               "spectral": geo.norm_spectral}[norm]
    assert measure(w.detach()) == pytest.approx(radius, rel=1e-4)  # init is on the sphere
    slack = 1.25 if norm == "spectral" else 1.0 + 1e-5  # NS singular values go up to ~1.2
    for t in range(8):
        w.grad = _rand((9, 6), 30 + t) * 10
        opt.step()
        assert measure(w.detach()) <= radius * slack


def test_scion_first_step_constrained_and_unconstrained():
    g = _rand((5, 7), 12)
    for cls, constrained in ((Scion, True), (ScionUnconstrained, False)):
        w = _param((5, 7))
        w0 = w.detach().clone()
        opt = cls([{"params": [w], "norm": "sign", "radius": 3.0}], lr=0.1, momentum=0.1)
        w.grad = g.clone()
        opt.step()
        decay = 0.9 if constrained else 1.0
        assert torch.allclose(w.detach(), decay * w0 - 0.1 * 3.0 * torch.sign(g) / 7)


def test_scion_vectors_and_conv_and_embedding_transpose():
    b = torch.nn.Parameter(_rand((6,), 13))
    k = torch.nn.Parameter(_rand((4, 2, 3, 3), 14))
    e = torch.nn.Parameter(_rand((30, 4), 15))
    opt = Scion([{"params": [b, k]}, {"params": [e], "norm": "colnorm", "in_out": True}], lr=0.1, momentum=1.0,
                constrained=False)
    gb, gk, ge = _rand((6,), 16), _rand((4, 2, 3, 3), 17), _rand((30, 4), 18)
    b0, k0, e0 = b.detach().clone(), k.detach().clone(), e.detach().clone()
    b.grad, k.grad, e.grad = gb, gk, ge
    opt.step()
    assert torch.allclose(b.detach(), b0 - 0.1 * gb / gb.pow(2).mean().sqrt(), atol=1e-6)
    dk = geo.newton_schulz(gk.reshape(4, -1)).reshape(k.shape) * math.sqrt(4 / 2) / 9
    assert torch.allclose(k.detach(), k0 - 0.1 * dk, atol=1e-6)
    # embedding (vocab=30, d=4) seen as (d_out=4, d_in=30): one column per token, scaled sqrt(4)/30
    de = ge / ge.norm(dim=1, keepdim=True) * 2.0 / 30
    assert torch.allclose(e.detach(), e0 - 0.1 * de, atol=1e-6)


def test_projected_scion_projects_onto_ball():
    w = _param((8, 5))
    opt = ProjectedScion([{"params": [w], "norm": "spectral", "radius": 0.5}], lr=1.0, momentum=1.0)
    w.grad = _rand((8, 5), 19)
    opt.step()
    assert geo.norm_spectral(w.detach()) <= 0.5 * (1 + 1e-5)
    v = _param((8, 5), 3)
    opt2 = ProjectedScion([{"params": [v], "norm": "sign", "radius": 1.0}], lr=0.01, momentum=1.0)
    v.grad = _rand((8, 5), 21)
    v0 = v.detach().clone()
    opt2.step()
    assert torch.allclose(v.detach(), (v0 - 0.01 * torch.sign(v.grad) / 5).clamp(-0.2, 0.2))


# ----------------------------------------------------------------------------------------- Lion


def test_lion_two_steps():
    w = _param((4, 3))
    w0 = w.detach().clone()
    g1, g2 = _rand((4, 3), 22), _rand((4, 3), 23)
    opt = Lion([w], lr=0.01, weight_decay=0.5)
    w.grad = g1.clone()
    opt.step()
    w1 = w0 * (1 - 0.005) - 0.01 * torch.sign(0.1 * g1)
    assert torch.allclose(w.detach(), w1)
    w.grad = g2.clone()
    opt.step()
    m = 0.01 * g1
    assert torch.allclose(w.detach(), w1 * (1 - 0.005) - 0.01 * torch.sign(0.9 * m + 0.1 * g2))


# ---------------------------------------------------------------------------------- conv weights


@pytest.mark.parametrize("cls", [Muon, MOGA, Muown, OrScale, Scion])
def test_conv_kernel_steps_like_its_flattened_matrix(cls):
    kernel = _param((6, 3, 3, 3), 40)
    flat = torch.nn.Parameter(kernel.detach().reshape(6, 27).clone())
    norm = {"norm": "spectral"} if cls is Scion else {}  # SCION's conv default is SpectralConv (its own factor)
    opt_k = cls([{"params": [kernel], **norm}], lr=0.01)
    opt_f = cls([{"params": [flat], **norm}], lr=0.01)
    for t in range(3):
        g = _rand((6, 3, 3, 3), 41 + t)
        kernel.grad, flat.grad = g.clone(), g.reshape(6, 27).clone()
        opt_k.step()
        opt_f.step()
    assert not torch.equal(kernel.detach().reshape(6, 27), _param((6, 3, 3, 3), 40).detach().reshape(6, 27))
    assert torch.allclose(kernel.detach().reshape(6, 27), flat.detach(), atol=1e-6)
