"""Per-layer diagnostics for builder-made optimizers and plain torch AdamW."""

from __future__ import annotations

import pytest
import torch

from workloads.optim import ParamSpec, build_optimizer, layer_diagnostics, snapshot, spectral_norm


def _specs():
    gen = torch.Generator().manual_seed(0)
    return [
        ParamSpec("emb", torch.nn.Parameter(torch.randn(30, 8, generator=gen)), "embedding", in_out=True),
        ParamSpec("h", torch.nn.Parameter(torch.randn(16, 8, generator=gen)), "hidden"),
        ParamSpec("b", torch.nn.Parameter(torch.randn(8, generator=gen)), "vector"),
    ]


def test_spectral_norm_power_iteration():
    w = torch.randn(20, 12, generator=torch.Generator().manual_seed(1))
    assert spectral_norm(w, iters=30) == pytest.approx(float(torch.linalg.matrix_norm(w, 2)), rel=1e-3)
    assert spectral_norm(torch.zeros(3, 3)) == 0.0


@pytest.mark.parametrize("name", ["adamw", "muon", "orscale", "scion"])
def test_rows(name):
    specs = _specs()
    opt = build_optimizer(name, specs, lr=0.01)
    for s in specs:
        s.param.grad = torch.ones_like(s.param)
    before = snapshot(opt)
    opt.step()
    rows = layer_diagnostics(opt, before, power_iters=30)
    assert [r["name"] for r in rows] == ["emb", "h", "b"]
    assert [r["role"] for r in rows] == ["embedding", "hidden", "vector"]
    for r, s, prev in zip(rows, specs, before.values(), strict=True):
        w = s.param.detach()
        assert r["update_rms"] == pytest.approx(float((w - prev).pow(2).mean().sqrt()))
        assert r["update_rms"] > 0
        assert r["weight_rms"] == pytest.approx(float(w.pow(2).mean().sqrt()))
    assert rows[2]["spectral_norm"] is None and rows[2]["max_row_norm"] is None
    h = specs[1].param.detach()
    assert rows[1]["spectral_norm"] == pytest.approx(float(torch.linalg.matrix_norm(h, 2)), rel=1e-3)
    assert rows[1]["max_row_norm"] == pytest.approx(float(h.norm(dim=1).max()))
    # the embedding (vocab, d) is read in (d_out, d_in) layout: rows are the d features
    e = specs[0].param.detach()
    assert rows[0]["max_row_norm"] == pytest.approx(float(e.norm(dim=0).max()))
    if name == "orscale":
        assert rows[1]["trust_ratio"] == pytest.approx(1.0, abs=1e-6) and rows[1]["clipped"] is False
        assert rows[0]["trust_ratio"] is None
    else:
        assert all(r["trust_ratio"] is None and r["clipped"] is None for r in rows)


def test_plain_torch_adamw():
    w = torch.nn.Parameter(torch.randn(4, 6))
    opt = torch.optim.AdamW([w], lr=0.1, weight_decay=0.0)
    w.grad = torch.ones(4, 6)
    before = snapshot(opt)
    opt.step()
    (row,) = layer_diagnostics(opt, before)
    assert row["name"] == "group0.param0" and row["role"] is None
    assert row["update_rms"] == pytest.approx(0.1, rel=1e-3)  # first Adam step moves every entry by ~lr
