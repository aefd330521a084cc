"""Geometry shared by the matrix optimizers: orthogonalization (Newton–Schulz, Polar Express, SVD),
shape factors, linear minimization oracles (LMOs) of the norms used by Muon, MOGA and SCION, the
norms themselves (to check an LMO is unit-norm in its own geometry) and projections onto their balls.

Layout convention: a weight W is (d_out, d_in) as in ``nn.Linear``; conv kernels (C_out, C_in, k, k)
are flattened to (C_out, C_in·k·k) with :func:`as_matrix` and restored with :func:`from_matrix`;
weights stored (fan_in, fan_out) such as ``nn.Embedding`` tables pass ``in_out=True`` and are
transposed so that every LMO sees (d_out, d_in).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = [
    "NS_COEFFICIENTS",
    "POLAR_EXPRESS_COEFFICIENTS",
    "SHAPE_FACTORS",
    "LMO_NAMES",
    "resolve_dtype",
    "as_matrix",
    "dense",
    "from_matrix",
    "newton_schulz",
    "polar_express",
    "polar_svd",
    "orthogonalize",
    "shape_factor",
    "lmo_spectral",
    "lmo_spectral_conv",
    "lmo_sign",
    "lmo_row_norm",
    "lmo_col_norm",
    "lmo_bias_rms",
    "lmo",
    "l2_norm",
    "norm_spectral",
    "norm_sign",
    "norm_row",
    "norm_col",
    "norm_bias_rms",
    "spectral_clip",
    "project",
]

# Keller Jordan's quintic Newton–Schulz coefficients (Muon; also torch.optim.Muon and SCION).
NS_COEFFICIENTS: tuple[float, float, float] = (3.4445, -4.7750, 2.0315)

# Polar Express per-step coefficients (arXiv 2505.16932), as used by OrScale (arXiv 2605.07815).
POLAR_EXPRESS_COEFFICIENTS: tuple[tuple[float, float, float], ...] = (
    (8.15655, -22.48329, 15.87877),
    (4.04293, -2.80892, 0.50002),
    (3.89167, -2.77248, 0.50606),
    (3.28575, -2.36813, 0.46449),
    (2.34654, -1.70978, 0.42324),
)

SHAPE_FACTORS = ("original", "match_rms_adamw", "spectral", "none", "sqrt_d_out")

_DTYPES: dict[str, torch.dtype] = {
    "bf16": torch.bfloat16,
    "bfloat16": torch.bfloat16,
    "fp16": torch.float16,
    "float16": torch.float16,
    "half": torch.float16,
    "fp32": torch.float32,
    "float32": torch.float32,
    "float": torch.float32,
    "fp64": torch.float64,
    "float64": torch.float64,
}


def resolve_dtype(device: torch.device, dtype: torch.dtype | str | None = None) -> torch.dtype:
    """Working dtype of an orthogonalization: bf16 on CUDA, fp32 elsewhere (a CPU has no fast bf16
    matmul), unless ``dtype`` (a ``torch.dtype`` or a name such as ``"bf16"``/``"fp32"``) says otherwise."""
    if dtype is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return _DTYPES[str(dtype).lower()]
    except KeyError:
        raise ValueError(f"ns_dtype={dtype!r} is not a dtype; use one of {sorted(_DTYPES)} or None") from None


def dense(x: Tensor, dtype: torch.dtype) -> Tensor:
    """``x`` as a contiguous tensor of ``dtype`` (one copy at most). On CPU an elementwise op with a
    transposed or mixed-dtype operand is several times slower than this copy plus a dense op."""
    if x.dtype == dtype and x.is_contiguous():
        return x
    return torch.empty(x.shape, dtype=dtype, device=x.device).copy_(x)


def as_matrix(t: Tensor, in_out: bool = False) -> Tensor:
    """(d_out, d_in) view of a weight: conv kernels flattened to (C_out, C_in·k·k); an (in, out)
    table (``in_out=True``) transposed. 1-D tensors become a (1, n) row."""
    if t.ndim == 1:
        m = t.unsqueeze(0)
    elif t.ndim > 2:
        m = t.reshape(t.shape[0], -1)
    else:
        m = t
    return m.T if in_out else m


def from_matrix(m: Tensor, like: Tensor, in_out: bool = False) -> Tensor:
    """Inverse of :func:`as_matrix`: back to the shape of ``like``."""
    if in_out:
        m = m.T
    return m.reshape(like.shape) if m.shape != like.shape else m


def _polynomial_iteration(
    x: Tensor, coefficients: Sequence[tuple[float, float, float]], steps: int
) -> Tensor:
    # X <- aX + (bA + cA^2)X with A = X X^T, on the short side (x is wide: rows <= cols).
    for k in range(steps):
        a, b, c = coefficients[min(k, len(coefficients) - 1)]
        gram = x @ x.T
        poly = torch.addmm(gram, gram, gram, beta=b, alpha=c)
        x = torch.addmm(x, poly, x, beta=a)
    return x


def newton_schulz(
    g: Tensor,
    coefficients: tuple[float, float, float] = NS_COEFFICIENTS,
    steps: int = 5,
    eps: float = 1e-7,
    dtype: torch.dtype | str | None = None,
) -> Tensor:
    """Quintic Newton–Schulz approximation of U Vᵀ for g = U Σ Vᵀ (2-D), returned in the working dtype.

    Singular values land in roughly [0.7, 1.2], not exactly 1 (that is the design of the coefficients).
    """
    # Muon NS quintic, X <- X/||X||_F then X <- aX + (bXX^T + c(XX^T)^2)X (Keller Jordan; arXiv 2502.16982)
    if g.ndim != 2:
        raise ValueError(f"newton_schulz expects a 2-D matrix, got shape {tuple(g.shape)}; use as_matrix()")
    if steps < 0:
        raise ValueError(f"ns_steps={steps} must be >= 0")
    x = g.to(resolve_dtype(g.device, dtype))
    tall = g.size(0) > g.size(1)
    if tall:
        x = x.T
    # clamp(min=eps) as torch.optim.Muon does (equal to + eps for any non-negligible norm)
    norm = x.norm().clamp(min=eps)
    x = x.div_(norm) if x.data_ptr() != g.data_ptr() else x / norm  # in place only on our own copy
    x = _polynomial_iteration(x, (tuple(coefficients),), steps)
    return x.T if tall else x


def polar_express(
    g: Tensor,
    steps: int = 5,
    eps: float = 1e-6,
    dtype: torch.dtype | str | None = None,
    coefficients: Sequence[tuple[float, float, float]] = POLAR_EXPRESS_COEFFICIENTS,
) -> Tensor:
    """Polar Express approximation of U Vᵀ: one (a, b, c) per step, the last one repeated past the list."""
    # Polar Express, X <- X/(1.02||X||_F + 1e-6), then per-step (a_k, b_k, c_k) quintics (arXiv 2505.16932)
    if g.ndim != 2:
        raise ValueError(f"polar_express expects a 2-D matrix, got shape {tuple(g.shape)}")
    x = g.to(resolve_dtype(g.device, dtype))
    tall = g.size(0) > g.size(1)
    if tall:
        x = x.T
    x = x / (x.norm() * 1.02 + eps)
    x = _polynomial_iteration(x, coefficients, steps)
    return x.T if tall else x


def polar_svd(g: Tensor) -> Tensor:
    """Exact polar factor U Vᵀ via a thin SVD (fp32 or wider); slow, for tests and projections."""
    u, _, vh = torch.linalg.svd(g.float() if g.dtype in (torch.bfloat16, torch.float16) else g,
                                full_matrices=False)
    return u @ vh


def orthogonalize(
    g: Tensor, method: str = "ns", steps: int = 5, dtype: torch.dtype | str | None = None
) -> Tensor:
    """U Vᵀ of a 2-D matrix by ``method`` in {"ns", "polar_express", "svd"}."""
    if method == "ns":
        return newton_schulz(g, steps=steps, dtype=dtype)
    if method == "polar_express":
        return polar_express(g, steps=steps, dtype=dtype)
    if method == "svd":
        return polar_svd(g)
    raise ValueError(f"orthogonalization method={method!r}; use one of ['ns', 'polar_express', 'svd']")


def shape_factor(d_out: int, d_in: int, kind: str = "original") -> float:
    """Factor s multiplying an orthogonalized update of a (d_out, d_in) matrix.

    original: sqrt(max(1, d_out/d_in)) (Keller Jordan); match_rms_adamw: 0.2*sqrt(max(d_out, d_in))
    (Moonlight); spectral: sqrt(d_out/d_in) (SCION, μP-spectral); none: 1; sqrt_d_out: sqrt(d_out)
    (SCION Spectral with normalized=False).
    """
    # shape factors: Moonlight 0.2*sqrt(max) (arXiv 2502.16982); spectral sqrt(d_out/d_in) (arXiv 2502.07529)
    if kind == "original":
        return math.sqrt(max(1.0, d_out / d_in))
    if kind == "match_rms_adamw":
        return 0.2 * math.sqrt(max(d_out, d_in))
    if kind == "spectral":
        return math.sqrt(d_out / d_in)
    if kind == "none":
        return 1.0
    if kind == "sqrt_d_out":
        return math.sqrt(d_out)
    raise ValueError(f"shape factor {kind!r} is unknown; use one of {list(SHAPE_FACTORS)}")


# ---------------------------------------------------------------------------------------------
# LMOs. Each returns argmax_{||D|| <= 1} <G, D> in its norm (up to the NS approximation for the
# spectral ones); inputs and outputs are (d_out, d_in) matrices (1-D for bias_rms).
# ---------------------------------------------------------------------------------------------


def lmo_spectral(
    g: Tensor,
    scale: str = "spectral",
    steps: int = 5,
    dtype: torch.dtype | str | None = None,
    method: str = "ns",
) -> Tensor:
    """Spectral-norm LMO: orthogonalize(g) · shape_factor(scale), in g's dtype."""
    # spectral LMO  D = sqrt(d_out/d_in) U V^T  for the RMS->RMS operator norm (arXiv 2502.07529)
    d_out, d_in = g.shape
    o = orthogonalize(g, method=method, steps=steps, dtype=dtype)
    return dense(o, g.dtype).mul_(shape_factor(d_out, d_in, scale))


def lmo_spectral_conv(
    g: Tensor, steps: int = 5, dtype: torch.dtype | str | None = None, method: str = "ns"
) -> Tensor:
    """SCION SpectralConv LMO for a (C_out, C_in, k, k) kernel: NS of the flattened kernel times
    sqrt(C_out/C_in)/k², returned in the kernel's shape."""
    # SpectralConv: NS(flatten(G)) * sqrt(C_out/C_in) / k^2 (arXiv 2502.07529)
    if g.ndim != 4:
        raise ValueError(f"spectral_conv expects a 4-D conv kernel, got shape {tuple(g.shape)}")
    c_out, c_in, kh, kw = g.shape
    o = orthogonalize(g.reshape(c_out, -1), method=method, steps=steps, dtype=dtype).to(g.dtype)
    return o.mul_(math.sqrt(c_out / c_in) / (kh * kw)).reshape(g.shape)


def lmo_sign(g: Tensor, normalized: bool = True) -> Tensor:
    """Sign LMO of the (1,mean)->(inf,mean) norm: sign(g)/d_in (normalized) or sign(g)."""
    # sign geometry  D = sign(G)/d_in  (arXiv 2603.09952; SCION Sign, arXiv 2502.07529)
    s = torch.sign(g)
    return s.div_(g.shape[-1]) if normalized and g.ndim >= 2 else s


def l2_norm(m: Tensor, dim: int) -> Tensor:
    """Euclidean norms along ``dim`` (keepdim). Sum of squares: on CPU, ``vector_norm`` over a strided
    dimension (the columns of a row-major matrix) is ~10x slower than this."""
    return torch.mul(m, m).sum(dim=dim, keepdim=True).sqrt_()


def _dual_power_direction(m: Tensor, r: float, dim: int, eps: float) -> Tensor:
    # argmax_{||d||_{r*} <= 1} <m, d> = sign(m)|m|^{r-1}/||m||_r^{r-1}, along `dim` (Hölder equality case)
    if r == 2.0:
        return m / (l2_norm(m, dim) + eps)
    if r == 1.0:
        return torch.sign(m)
    nrm = torch.linalg.vector_norm(m, r, dim=dim, keepdim=True)
    return torch.sign(m) * m.abs().pow(r - 1) / (nrm.pow(r - 1) + eps)


def lmo_row_norm(g: Tensor, p: float = 2.0, normalized: bool = True, eps: float = 1e-7) -> Tensor:
    """Row-norm LMO of the (p,mean)->(inf,mean) operator norm d_in^{1/p}·max_i ||w_i||_{p*}.

    p = 2: D_i = g_i / (sqrt(d_in)·||g_i|| + eps) (normalized) or g_i/(||g_i|| + eps); p = 1: sign(g)/d_in.
    """
    # MOGA row LMO  D_i = d_in^{-1/p} sign(m_i)|m_i|^{p-1}/||m_i||_p^{p-1}  (arXiv 2603.09952)
    if not 1.0 <= p < math.inf:
        raise ValueError(f"row norm p={p} must be in [1, inf)")
    d_in = g.shape[-1]
    if p == 2.0 and normalized:
        return g / (torch.linalg.vector_norm(g, 2, dim=-1, keepdim=True) * math.sqrt(d_in) + eps)
    d = _dual_power_direction(g, p, dim=-1, eps=eps)
    return d.mul_(d_in ** (-1.0 / p)) if normalized else d


def lmo_col_norm(g: Tensor, q: float = 2.0, normalized: bool = True, eps: float = 1e-7) -> Tensor:
    """Column-norm LMO of the (1,mean)->(q,mean) operator norm d_in·d_out^{-1/q}·max_j ||w_j||_q.

    q = 2: D_j = (sqrt(d_out)/d_in)·g_j/(||g_j|| + eps) (normalized; SCION ColNorm divides each column by
    its RMS and, normalized, by d_in) or sqrt(d_out)·g_j/||g_j||; q = inf: sign(g)/d_in.
    """
    # MOGA column LMO  D_j = (d_out^{1/q}/d_in) sign(m_j)|m_j|^{q*-1}/||m_j||_{q*}^{q*-1}  (arXiv 2603.09952)
    if not 1.0 < q <= math.inf:
        raise ValueError(f"column norm q={q} must be in (1, inf]")
    d_out, d_in = g.shape[-2], g.shape[-1]
    q_dual = 1.0 if q == math.inf else q / (q - 1.0)
    factor = d_out ** (0.0 if q == math.inf else 1.0 / q)
    if normalized:
        factor /= d_in
    d = _dual_power_direction(g, q_dual, dim=-2, eps=eps)
    return d.mul_(factor)


def lmo_bias_rms(g: Tensor, eps: float = 1e-8) -> Tensor:
    """BiasRMS LMO: g / RMS(g) (unit RMS)."""
    # BiasRMS  D = g / RMS(g)  (arXiv 2502.07529)
    rms = torch.linalg.vector_norm(g) / math.sqrt(g.numel())
    return g / (rms + eps)


LMO_NAMES = ("spectral", "spectral_conv", "sign", "rownorm", "colnorm", "bias_rms")


def lmo(
    name: str,
    g: Tensor,
    *,
    in_out: bool = False,
    normalized: bool = True,
    p: float = 2.0,
    q: float = 2.0,
    spectral_scale: str | None = None,
    ns_steps: int = 5,
    ns_dtype: torch.dtype | str | None = None,
    eps: float = 1e-8,
) -> Tensor:
    """Apply LMO ``name`` to a parameter-shaped tensor (flattening convs, transposing in_out tables)
    and return a tensor of g's shape."""
    if name == "bias_rms":
        return lmo_bias_rms(g, eps=eps)
    if name == "spectral_conv":
        return lmo_spectral_conv(g, steps=ns_steps, dtype=ns_dtype)
    if g.ndim < 2:
        raise ValueError(f"norm {name!r} needs a matrix; got shape {tuple(g.shape)} (use 'bias_rms')")
    m = as_matrix(g, in_out)
    if name == "spectral":
        scale = spectral_scale or ("spectral" if normalized else "sqrt_d_out")
        d = lmo_spectral(m, scale=scale, steps=ns_steps, dtype=ns_dtype)
    elif name == "sign":
        d = lmo_sign(m, normalized=normalized)
    elif name == "rownorm":
        d = lmo_row_norm(m, p=p, normalized=normalized, eps=eps)
    elif name == "colnorm":
        d = lmo_col_norm(m, q=q, normalized=normalized, eps=eps)
    else:
        raise ValueError(f"norm {name!r} is unknown; use one of {list(LMO_NAMES)}")
    return from_matrix(d, g, in_out)


# ---------------------------------------------------------------------------------------------
# Norms (each LMO above has norm 1 in the matching one) and projections onto their balls.
# ---------------------------------------------------------------------------------------------


def norm_spectral(w: Tensor, scale: str = "spectral") -> float:
    """Spectral norm divided by the LMO's shape factor (RMS->RMS operator norm for scale='spectral')."""
    d_out, d_in = w.shape
    return float(torch.linalg.matrix_norm(w.double(), ord=2)) / shape_factor(d_out, d_in, scale)


def norm_sign(w: Tensor, normalized: bool = True) -> float:
    """(1,mean)->(inf,mean) operator norm d_in·max|w_ij| (normalized) or max|w_ij|."""
    m = float(w.abs().max())
    return m * w.shape[-1] if normalized else m


def norm_row(w: Tensor, p: float = 2.0, normalized: bool = True) -> float:
    """(p,mean)->(inf,mean) operator norm d_in^{1/p}·max_i ||w_i||_{p*} (normalized)."""
    p_dual = math.inf if p == 1.0 else p / (p - 1.0)
    m = float(torch.linalg.vector_norm(w.double(), p_dual, dim=-1).max())
    return m * w.shape[-1] ** (1.0 / p) if normalized else m


def norm_col(w: Tensor, q: float = 2.0, normalized: bool = True) -> float:
    """(1,mean)->(q,mean) operator norm d_in·d_out^{-1/q}·max_j ||w_j||_q (normalized)."""
    d_out, d_in = w.shape
    m = float(torch.linalg.vector_norm(w.double(), q, dim=-2).max())
    m *= d_out ** (-(0.0 if q == math.inf else 1.0 / q))
    return m * d_in if normalized else m


def norm_bias_rms(w: Tensor) -> float:
    return float(torch.linalg.vector_norm(w.double()) / math.sqrt(w.numel()))


def spectral_clip(x: Tensor, lo: float, hi: float, method: str = "svd", ns_steps: int = 30) -> Tensor:
    """Clip every singular value of a 2-D ``x`` to [lo, hi].

    method="svd": exact. method="ns": ½[(lo+hi)O + sign(lo·I − OXᵀ)(lo·O − X) − sign(hi·I − OXᵀ)(hi·O − X)]
    with O = polar(X) and the matrix signs by Newton–Schulz (cubic, ``ns_steps`` steps) — approximate.
    """
    # spectral clipping via matrix sign (Projected SCION summary of arXiv 2502.07529; [open] in ALGORITHMS.md)
    if method == "svd":
        u, s, vh = torch.linalg.svd(x, full_matrices=False)
        return (u * s.clamp(lo, hi)) @ vh
    if method != "ns":
        raise ValueError(f"spectral_clip method={method!r}; use 'svd' or 'ns'")
    cubic = (1.5, -0.5, 0.0)
    o = newton_schulz(x, coefficients=cubic, steps=ns_steps, dtype=torch.float32).to(x.dtype)
    p = o @ x.T  # U Σ Uᵀ
    eye = torch.eye(p.shape[0], dtype=x.dtype, device=x.device)

    def msign(s: Tensor) -> Tensor:
        return newton_schulz(s, coefficients=cubic, steps=ns_steps, dtype=torch.float32).to(x.dtype)

    return 0.5 * ((lo + hi) * o + msign(lo * eye - p) @ (lo * o - x) - msign(hi * eye - p) @ (hi * o - x))


def project(
    name: str,
    w: Tensor,
    radius: float,
    *,
    in_out: bool = False,
    normalized: bool = True,
    p: float = 2.0,
    q: float = 2.0,
) -> Tensor:
    """Return w mapped into the radius-ball of norm ``name`` (a new tensor of w's shape).

    spectral: singular values clipped at radius·sqrt(d_out/d_in) (SVD; the Euclidean projection);
    spectral_conv: the same on the flattened kernel with SCION's conv factor; sign: entries clamped to
    ±radius/d_in; rownorm / colnorm: offending rows / columns rescaled onto the ball (the Euclidean
    projection for p = q = 2); bias_rms: rescaled to RMS <= radius.
    """
    if name == "bias_rms":
        rms = norm_bias_rms(w)
        return w * (radius / rms) if rms > radius else w.clone()
    if name == "spectral_conv":
        c_out, c_in, kh, kw = w.shape
        bound = radius * math.sqrt(c_out / c_in) / (kh * kw)
        return spectral_clip(w.reshape(c_out, -1).float(), 0.0, bound).to(w.dtype).reshape(w.shape)
    m = as_matrix(w, in_out)
    d_out, d_in = m.shape
    if name == "spectral":
        bound = radius * shape_factor(d_out, d_in, "spectral" if normalized else "sqrt_d_out")
        out = spectral_clip(m.float(), 0.0, bound).to(w.dtype)
    elif name == "sign":
        bound = radius / d_in if normalized else radius
        out = m.clamp(-bound, bound)
    elif name == "rownorm":
        p_dual = math.inf if p == 1.0 else p / (p - 1.0)
        bound = radius * (d_in ** (-1.0 / p) if normalized else 1.0)
        n = torch.linalg.vector_norm(m, p_dual, dim=-1, keepdim=True)
        out = m * torch.clamp(bound / n.clamp_min(1e-30), max=1.0)
    elif name == "colnorm":
        bound = radius * d_out ** (0.0 if q == math.inf else 1.0 / q) / (d_in if normalized else 1.0)
        n = torch.linalg.vector_norm(m, q, dim=-2, keepdim=True)
        out = m * torch.clamp(bound / n.clamp_min(1e-30), max=1.0)
    else:
        raise ValueError(f"norm {name!r} is unknown; use one of {list(LMO_NAMES)}")
    return from_matrix(out, w, in_out)
