"""Newton–Schulz, Polar Express, shape factors, LMOs (unit norm in their own geometry), projections."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from workloads.optim import geometry as geo


def _rand(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).float()


@pytest.mark.parametrize("shape", [(8, 20), (20, 8), (12, 12)])
def test_newton_schulz_singular_values_in_band_and_polar_direction(shape):
    g = _rand(shape, 0)
    o = geo.newton_schulz(g)
    assert o.dtype == torch.float32 and o.shape == g.shape
    s = torch.linalg.svdvals(o)
    assert s.min() > 0.6 and s.max() < 1.25
    # same singular vectors as the exact polar factor: high cosine with U V^T
    polar = geo.polar_svd(g)
    cos = (o * polar).sum() / (o.norm() * polar.norm())
    assert cos > 0.95


def test_newton_schulz_dtype_choice_and_override():
    g = _rand((6, 10), 1)
    assert geo.resolve_dtype(torch.device("cpu")) == torch.float32
    assert geo.resolve_dtype(torch.device("cuda")) == torch.bfloat16
    assert geo.newton_schulz(g, dtype="bf16").dtype == torch.bfloat16
    assert geo.newton_schulz(g, dtype=torch.float64).dtype == torch.float64
    with pytest.raises(ValueError, match="ns_dtype"):
        geo.resolve_dtype(torch.device("cpu"), "int8")


def test_newton_schulz_zero_steps_is_frobenius_normalization_and_coefficients_are_used():
    g = _rand((5, 7), 2)
    assert torch.allclose(geo.newton_schulz(g, steps=0), g / g.norm())
    # one step with (a, b, c) = (1, 0, 0) is the identity on the normalized matrix
    assert torch.allclose(geo.newton_schulz(g, coefficients=(1.0, 0.0, 0.0), steps=1), g / g.norm(), atol=1e-7)
    x = g / g.norm()
    a, b, c = geo.NS_COEFFICIENTS
    gram = x @ x.T
    expect = a * x + (b * gram + c * gram @ gram) @ x
    assert torch.allclose(geo.newton_schulz(g, steps=1), expect, atol=1e-6)


def test_polar_express_converges_closer_than_ns():
    g = _rand((16, 40), 3)
    polar = geo.polar_svd(g)
    pe = geo.polar_express(g, steps=8)
    assert (pe - polar).norm() / polar.norm() < 0.05
    x = g.T / (1.02 * g.norm() + 1e-6)  # first step by hand, on the wide orientation
    a, b, c = geo.POLAR_EXPRESS_COEFFICIENTS[0]
    gram = x.T @ x
    one = a * x.T + (b * gram + c * gram @ gram) @ x.T
    assert torch.allclose(geo.polar_express(g.T.contiguous().T, steps=1), one, atol=1e-5)


def test_shape_factors():
    assert geo.shape_factor(3072, 768, "original") == pytest.approx(2.0)
    assert geo.shape_factor(768, 3072, "original") == 1.0
    assert geo.shape_factor(768, 3072, "match_rms_adamw") == pytest.approx(0.2 * math.sqrt(3072))
    assert geo.shape_factor(768, 3072, "spectral") == pytest.approx(0.5)
    assert geo.shape_factor(768, 3072, "none") == 1.0
    with pytest.raises(ValueError, match="original"):
        geo.shape_factor(2, 2, "bogus")


def test_conv_flatten_round_trip_and_in_out_transpose():
    k = _rand((6, 3, 3, 3), 4)
    m = geo.as_matrix(k)
    assert m.shape == (6, 27)
    assert torch.equal(geo.from_matrix(m, k), k)
    e = _rand((50, 8), 5)  # an embedding table (vocab, d): d_out = 8, d_in = 50
    assert geo.as_matrix(e, in_out=True).shape == (8, 50)
    assert torch.equal(geo.from_matrix(geo.as_matrix(e, True), e, True), e)
    d = geo.lmo("sign", e, in_out=True)
    assert torch.equal(d, torch.sign(e) / 50)


dims = st.integers(min_value=1, max_value=12)


@st.composite
def matrices(draw):
    d_out, d_in, seed = draw(dims), draw(dims), draw(st.integers(0, 10_000))
    scale = draw(st.sampled_from([1e-3, 1.0, 1e3]))
    return _rand((d_out, d_in), seed) * scale


@settings(max_examples=40, deadline=None)
@given(matrices(), st.sampled_from([1.0, 1.5, 2.0, 3.0]))
def test_row_norm_lmo_is_unit_and_aligned(g, p):
    d = geo.lmo_row_norm(g, p=p, eps=0.0)
    assert geo.norm_row(d, p=p) == pytest.approx(1.0, rel=1e-5)
    # it is the maximizer: its inner product with g equals the dual norm sum_i d_in^{-1/p}||g_i||_p
    dual = (torch.linalg.vector_norm(g.double(), p, dim=1) * g.shape[1] ** (-1.0 / p)).sum()
    assert float((g.double() * d.double()).sum()) == pytest.approx(float(dual), rel=1e-4)


@settings(max_examples=40, deadline=None)
@given(matrices(), st.sampled_from([1.5, 2.0, 4.0, math.inf]))
def test_col_norm_lmo_is_unit(g, q):
    d = geo.lmo_col_norm(g, q=q, eps=0.0)
    assert geo.norm_col(d, q=q) == pytest.approx(1.0, rel=1e-5)
    d_un = geo.lmo_col_norm(g, q=q, normalized=False, eps=0.0)
    assert geo.norm_col(d_un, q=q, normalized=False) == pytest.approx(1.0, rel=1e-5)


@settings(max_examples=40, deadline=None)
@given(matrices(), st.booleans())
def test_sign_lmo_is_unit(g, normalized):
    d = geo.lmo_sign(g, normalized=normalized)
    assert geo.norm_sign(d, normalized=normalized) == pytest.approx(1.0)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 40), st.integers(0, 1000), st.sampled_from([1e-3, 1.0, 1e3]))
def test_bias_rms_lmo_is_unit(n, seed, scale):
    g = _rand((n,), seed) * scale
    assert geo.norm_bias_rms(geo.lmo_bias_rms(g, eps=0.0)) == pytest.approx(1.0, rel=1e-5)
    assert geo.norm_bias_rms(geo.lmo_bias_rms(g)) == pytest.approx(1.0, rel=1e-3)


@settings(max_examples=25, deadline=None)
@given(matrices(), st.sampled_from(["spectral", "original", "match_rms_adamw", "none"]))
def test_spectral_lmo_is_unit_exactly_with_svd_and_approximately_with_ns(g, scale):
    exact = geo.lmo_spectral(g, scale=scale, method="svd")
    assert geo.norm_spectral(exact, scale=scale) == pytest.approx(1.0, rel=1e-4)
    approx = geo.lmo_spectral(g, scale=scale)
    assert 0.6 < geo.norm_spectral(approx, scale=scale) < 1.25


def test_spectral_conv_lmo_factor():
    k = _rand((8, 4, 3, 3), 6)
    d = geo.lmo_spectral_conv(k, method="svd")
    s = torch.linalg.svdvals(d.reshape(8, -1))
    assert torch.allclose(s, torch.full_like(s, math.sqrt(8 / 4) / 9), rtol=1e-4)


@pytest.mark.parametrize("method", ["svd", "ns"])
def test_spectral_clip(method):
    u, _ = torch.linalg.qr(_rand((10, 10), 7).double())
    v, _ = torch.linalg.qr(_rand((6, 6), 8).double())
    s = torch.tensor([3.0, 2.0, 1.0, 0.5, 0.2, 0.1], dtype=torch.float64)
    x = (u[:, :6] * s) @ v.T
    out = geo.spectral_clip(x, 0.3, 1.5, method=method, ns_steps=40)
    got = torch.linalg.svdvals(out)
    want = s.clamp(0.3, 1.5)
    tol = 1e-8 if method == "svd" else 2e-2
    assert torch.allclose(got, want, atol=tol)


@pytest.mark.parametrize("norm", ["spectral", "sign", "rownorm", "colnorm", "bias_rms", "spectral_conv"])
def test_projection_lands_in_ball_and_keeps_inside_points(norm):
    shape = (1, 9) if norm == "bias_rms" else ((4, 2, 3, 3) if norm == "spectral_conv" else (7, 5))
    w = _rand(shape, 9).reshape(-1) if norm == "bias_rms" else _rand(shape, 9)
    measure = {
        "spectral": lambda t: geo.norm_spectral(t),
        "sign": lambda t: geo.norm_sign(t),
        "rownorm": lambda t: geo.norm_row(t),
        "colnorm": lambda t: geo.norm_col(t),
        "bias_rms": lambda t: geo.norm_bias_rms(t),
        "spectral_conv": lambda t: float(torch.linalg.matrix_norm(t.reshape(4, -1), 2)) / (math.sqrt(2) / 9),
    }[norm]
    radius = 0.5 * measure(w)
    out = geo.project(norm, w, radius)
    assert measure(out) == pytest.approx(radius, rel=1e-4)
    inside = geo.project(norm, out * 0.5, radius)
    assert torch.allclose(inside, out * 0.5, atol=1e-6)
