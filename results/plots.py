"""Plots of an `Analysis` and of raw store tables (matplotlib, Agg backend, no display needed).

Every figure uses the Okabe-Ito colour-blind-safe palette (plus marker and line-style changes, so
lines stay apart in grey scale) and log2 axes for learning rates and scales. Each function returns a
`matplotlib.figure.Figure`; `save` writes PNG and SVG. docs/analysis.md says how to read them.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import sys
from collections.abc import Sequence
from typing import Any

import matplotlib

if "ipykernel" not in sys.modules:  # headless everywhere except inside a notebook kernel (inline backend)
    matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator  # noqa: E402

from results.analysis import LR, SEED, Analysis, _short  # noqa: E402

# Okabe & Ito (2008), "Color Universal Design": distinguishable under the common colour deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
LINESTYLES = ["-", "--", "-.", ":"]
MAX_PANELS = 12


def style(i: int) -> dict[str, Any]:
    return {"color": PALETTE[i % len(PALETTE)], "marker": MARKERS[i % len(MARKERS)]}


_SUP = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _pow2_label(v: float, _pos: Any = None) -> str:
    # plain-text superscripts, not mathtext: mathtext labels are ~10x slower to draw (SVG: glyph paths)
    if v <= 0 or not float(math.log2(v)).is_integer():
        return ""
    return "2" + str(int(math.log2(v))).translate(_SUP)


def _log2_axis(ax: Any, which: str = "x") -> None:
    fmt = FuncFormatter(_pow2_label)
    axis = ax.xaxis if which == "x" else ax.yaxis
    (ax.set_xscale if which == "x" else ax.set_yscale)("log", base=2)
    axis.set_major_locator(LogLocator(base=2, numticks=12))
    axis.set_major_formatter(fmt)
    axis.set_minor_locator(NullLocator())


def _grid(n: int, panel: tuple[float, float] = (4.2, 3.3)) -> tuple[Figure, np.ndarray]:
    cols = min(n, 3)
    rows = max(1, math.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(panel[0] * cols, panel[1] * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes


def _fixed_layout(fig: Figure, rows: int, panel_h: float = 3.3) -> None:
    """Fixed margins in inches (tight_layout draws the figure once more: too slow for 12 panels)."""
    h = fig.get_figheight()
    fig.subplots_adjust(left=0.08, right=0.97, wspace=0.32, top=1 - 1.0 / h, bottom=0.75 / h,
                        hspace=1.0 / max(1.0, panel_h - 1.0))


def _footer(fig: Figure, an: Analysis) -> None:
    fig.text(0.01, 0.005, f"final metric: {an.estimator.label}; bands: ±1 SE over seeds; "
             f"optimum intervals: {an.config.ci_level:.0%} bootstrap over seeds", fontsize=7, color="#555555")


def save(fig: Figure, out_dir: str, name: str, formats: Sequence[str] = ("png", "svg")) -> list[str]:
    """Write `fig` as OUT_DIR/NAME.png and .svg; closes it; returns the paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for fmt in formats:
        path = os.path.join(out_dir, f"{name}.{fmt}")
        with plt.rc_context({"svg.fonttype": "none"}):  # SVG text stays text (small, fast, searchable)
            fig.savefig(path, dpi=100)
        paths.append(path)
    plt.close(fig)
    return paths


def _panels(an: Analysis, hue: str) -> list[tuple[str, pd.DataFrame]]:
    """Panels for a per-`hue` plot: one per group x value of the other scale axes (at most
    MAX_PANELS; with more, other scale axes keep only their smallest and largest value, then only
    their smallest; beyond MAX_PANELS groups the rest are left out)."""
    opt = an.optima
    others = [a for a in an.scale_axes if a != hue]
    keep = opt
    n_groups = opt["group"].nunique()
    for a in others:
        vals = sorted(opt[a].unique())
        if n_groups * len(vals) > MAX_PANELS:  # smallest and largest value, or only the smallest
            keep = keep[keep[a].isin([vals[0], vals[-1]] if 2 * n_groups <= MAX_PANELS else [vals[0]])]
    out = []
    keys = ["group", *others]
    for k, sub in keep.groupby(keys, sort=True):
        k = k if isinstance(k, tuple) else (k,)
        title = an.group_label(int(k[0]))
        extra = ", ".join(f"{a}={v}" for a, v in zip(others, k[1:], strict=True))
        out.append((f"{title}" + (f"\n{extra}" if extra else ""), sub))
    return out[:MAX_PANELS]


def lr_curves(an: Analysis, hue: str = "width") -> Figure:
    """Final metric vs LR, one line per `hue` value (width or depth), mean ± SE over seeds; the
    optimum as a star with its bootstrap interval; diverged LRs as × at the top of the panel."""
    panels = _panels(an, hue) if hue in an.cell_axes else [("all", an.optima)]
    fig, axes = _grid(len(panels))
    cur = an.lr_curves
    legend: tuple[list[Any], list[str]] = ([], [])
    for ax, (title, opt) in zip(axes.flat, panels, strict=False):
        hues = sorted(opt[hue].unique()) if hue in opt else [None]
        finite_vals = cur.loc[cur["cell"].isin(opt["cell"]), "mean"]
        finite_vals = finite_vals[np.isfinite(finite_vals)]
        top = float(finite_vals.max()) if len(finite_vals) else 1.0
        bottom = float(finite_vals.min()) if len(finite_vals) else 0.0
        pad = 0.08 * (top - bottom or 1.0)
        for i, h in enumerate(hues):
            cells = opt if h is None else opt[opt[hue] == h]
            for _, o in cells.iterrows():
                c = cur[(cur["cell"] == o["cell"]) & (cur["n_seeds"] > 0)]
                fin = c[np.isfinite(c["mean"])]
                st = style(i)
                label = f"{hue}={h}" if h is not None else None
                ax.plot(fin["lr"], fin["mean"], color=st["color"], marker=st["marker"], ms=4, lw=1.4, label=label)
                se = fin["se"].fillna(0.0)
                ax.fill_between(fin["lr"], fin["mean"] - se, fin["mean"] + se, color=st["color"], alpha=0.18, lw=0)
                div = c[~np.isfinite(c["mean"])]
                if len(div):
                    ax.scatter(div["lr"], np.full(len(div), top + pad * (0.6 + 0.25 * i)), marker="x",
                               color=st["color"], s=22, clip_on=False)
                if np.isfinite(o["lr_star"]):
                    ax.plot([o["lr_star"]], [o["best_value"]], marker="*", ms=13, color=st["color"],
                            mec="black", mew=0.6, zorder=5)
                    if np.isfinite(o["log2_lr_star_lo"]):
                        ax.plot(np.exp2([o["log2_lr_star_lo"], o["log2_lr_star_hi"]]), [o["best_value"]] * 2,
                                color=st["color"], lw=3, alpha=0.6, solid_capstyle="butt")
                if o["edge"]:
                    ax.annotate("edge", (o["lr_star"] if np.isfinite(o["lr_star"]) else c["lr"].iloc[0],
                                         o["best_value"] if np.isfinite(o["best_value"]) else top),
                                textcoords="offset points", xytext=(0, -14), fontsize=7, ha="center",
                                color=st["color"])
        _log2_axis(ax)
        ax.set_ylim(bottom - pad, top + pad * 1.8)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("learning rate (log2)")
        ax.set_ylabel(an.estimator.metric)
        ax.grid(alpha=0.3, lw=0.5)
        handles, labels = ax.get_legend_handles_labels()
        if len(labels) > len(legend[1]):
            legend = (handles, labels)
    if legend[1]:  # one legend for the figure (hue values are shared), placed without a search
        fig.legend(*legend, loc="upper right", fontsize=7, ncol=min(len(legend[1]), 6), frameon=False,
                   title="× at the top = diverged" if (cur["n_diverged"] > 0).any() else None, title_fontsize=7)
    fig.suptitle(f"{an.estimator.metric} vs learning rate, by {hue}", fontsize=11)
    _footer(fig, an)
    _fixed_layout(fig, axes.shape[0])
    return fig


def lr_star_vs_scale(an: Analysis, axis: str = "width") -> Figure:
    """Optimal LR (quadratic-fit estimate) vs scale with bootstrap intervals; one line per group
    (line style per value of the other scale axis). A flat line means the LR transfers."""
    fig, ax = plt.subplots(figsize=(6.0, 4.2))
    opt = an.optima[np.isfinite(an.optima["lr_star"].astype(float))]
    others = [a for a in an.scale_axes if a != axis]
    for gi, (g, sub) in enumerate(opt.groupby("group", sort=True)):
        slices = sub.groupby(others, sort=True) if others else [((), sub)]
        for si, (skey, sl) in enumerate(slices):
            if si >= len(LINESTYLES):
                break
            sl = sl.sort_values(axis)
            st = style(gi)
            skey = skey if isinstance(skey, tuple) else (skey,)
            label = an.group_label(int(g)) + ("".join(f", {a}={v}" for a, v in zip(others, skey, strict=True)))
            lo = sl["lr_star"] - np.exp2(sl["log2_lr_star_lo"])
            hi = np.exp2(sl["log2_lr_star_hi"]) - sl["lr_star"]
            yerr = np.vstack([lo.fillna(0).clip(lower=0), hi.fillna(0).clip(lower=0)])
            ax.errorbar(sl[axis].astype(float) * (1 + 0.03 * gi), sl["lr_star"], yerr=yerr, color=st["color"],
                        marker=st["marker"], ls=LINESTYLES[si], capsize=3, ms=5, label=label)
            edge = sl[sl["edge"] != ""]
            if len(edge):
                ax.scatter(edge[axis].astype(float) * (1 + 0.03 * gi), edge["lr_star"], s=120, facecolors="none",
                           edgecolors="black", lw=1.0, zorder=4)
    if axis in opt:
        _log2_axis(ax, "x")
    _log2_axis(ax, "y")
    ax.set_xlabel(f"{axis} (log2)")
    ax.set_ylabel("optimal learning rate lr* (log2)")
    ax.set_title(f"lr* vs {axis} (flat = transfers; circled = optimum on the grid edge)", fontsize=9)
    ax.grid(alpha=0.3, lw=0.5)
    ax.legend(fontsize=7, loc="best" if len(opt) < 50 else "lower left")
    _footer(fig, an)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def heatmap(an: Analysis, axis: str = "width") -> Figure:
    """Scale x LR heatmap of the seed-mean final metric per group; diverged cells grey with ×,
    each row's optimum starred. Only the smallest value of the other scale axes is shown."""
    cur = an.lr_curves[an.lr_curves["n_seeds"] > 0]
    for a in an.scale_axes:
        if a != axis:
            cur = cur[cur[a] == cur[a].min()]
    groups = sorted(cur["group"].unique())[:MAX_PANELS]
    fig, axes = _grid(max(1, len(groups)), panel=(5.0, 3.0))
    for ax, g in zip(axes.flat, groups, strict=False):
        sub = cur[cur["group"] == g]
        rows = sorted(sub[axis].unique()) if axis in sub else [None]
        xs = np.sort(sub["log2_lr"].unique())
        Z = np.full((len(rows), len(xs)), np.nan)
        D = np.zeros_like(Z, dtype=bool)
        for _, r in sub.iterrows():
            i = rows.index(r[axis]) if axis in sub else 0
            j = int(np.searchsorted(xs, r["log2_lr"]))
            Z[i, j] = r["mean"] if np.isfinite(r["mean"]) else np.nan
            D[i, j] = r["n_diverged"] > 0
        finite = Z[np.isfinite(Z)]
        vmin, vmax = (np.percentile(finite, [0, 90]) if len(finite) else (0, 1))
        cmap = plt.get_cmap("viridis" if an.estimator.sign > 0 else "viridis_r").with_extremes(bad="#dddddd")
        im = ax.imshow(np.ma.masked_invalid(Z), aspect="auto", origin="lower", cmap=cmap, vmin=vmin, vmax=vmax)
        for i, j in zip(*np.nonzero(D), strict=True):
            ax.text(j, i, "×", ha="center", va="center", fontsize=9, color="#333333")
        for i in range(len(rows)):
            zrow = Z[i] * an.estimator.sign
            if np.isfinite(zrow).any():
                ax.text(int(np.nanargmin(np.where(np.isfinite(zrow), zrow, np.nan))), i, "★", ha="center",
                        va="center", fontsize=10, color="white")
        ax.set_xticks(range(len(xs)), [f"{x:g}" for x in xs], fontsize=7)
        ax.set_yticks(range(len(rows)), [str(r) for r in rows], fontsize=7)
        ax.set_xlabel("log2(learning rate)")
        ax.set_ylabel(axis)
        ax.set_title(an.group_label(int(g)), fontsize=9)
        fig.colorbar(im, ax=ax, label=an.estimator.metric, shrink=0.9)
    fig.suptitle(f"{axis} × LR: seed-mean {an.estimator.metric} (★ best per row, × diverged)", fontsize=10)
    _footer(fig, an)
    _fixed_layout(fig, axes.shape[0], 3.0)
    return fig


def loss_curves(curves: pd.DataFrame, trials: pd.DataFrame, metric: str = "val_loss",
                label_by: Sequence[str] = ("optimizer.name", "width", LR), max_trials: int = 16) -> Figure:
    """Metric over training steps for chosen trials (`curves` from `load_curves`, `trials` from
    `load_trials` or `Analysis.trials`); running trials are drawn dashed, diverged ones end in ×."""
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    info = trials.set_index("trial_id")
    ids = list(dict.fromkeys(curves["trial_id"]))[:max_trials]
    for i, tid in enumerate(ids):
        c = curves[curves["trial_id"] == tid].sort_values("step")
        c = c[np.isfinite(c[metric].astype(float))] if metric in c else c.iloc[0:0]
        if c.empty:
            continue
        row = info.loc[tid] if tid in info.index else None
        status = row["status"] if row is not None else "?"
        label = ", ".join(f"{_short(k)}={row[k]:.3g}" if isinstance(row[k], float) else f"{_short(k)}={row[k]}"
                          for k in label_by if row is not None and k in row.index)
        st = style(i)
        ax.plot(c["step"], c[metric], color=st["color"], lw=1.3, ls="--" if status == "running" else "-",
                label=f"{label} [{status}]" if status != "completed" else label)
        if status == "diverged":
            ax.plot(c["step"].iloc[-1:], c[metric].iloc[-1:], marker="x", color=st["color"], ms=8)
    ax.set_xlabel("step")
    ax.set_ylabel(metric)
    ax.set_title(f"{metric} over training (dashed: running, ×: diverged)", fontsize=9)
    ax.grid(alpha=0.3, lw=0.5)
    ax.legend(fontsize=6, ncol=1 if len(ids) <= 8 else 2, loc="upper right")
    fig.tight_layout()
    return fig


def coord_check(df: pd.DataFrame, value_label: str = "activation RMS") -> Figure:
    """Coordinate-check panels from a tidy table (module, width, step, value): one panel per
    module, value vs width (log2 both axes), one line per step. Flat lines = width-independent
    activations (the parametrization is right); lines that grow with width blow up at scale."""
    need = {"module", "width", "step", "value"}
    missing = need - set(df.columns)
    if missing:
        raise ValueError(f"coord_check needs columns {sorted(need)}; missing {sorted(missing)}")
    modules = list(dict.fromkeys(df["module"]))[:MAX_PANELS]
    fig, axes = _grid(max(1, len(modules)), panel=(3.6, 3.0))
    steps = sorted(df["step"].unique())
    cmap = plt.get_cmap("viridis")
    for ax, mod in zip(axes.flat, modules, strict=False):
        sub = df[df["module"] == mod]
        for k, s in enumerate(steps):
            pts = sub[sub["step"] == s].groupby("width")["value"].mean()
            ax.plot(pts.index, pts.to_numpy(), marker=MARKERS[k % len(MARKERS)], ms=3, lw=1.2,
                    color=cmap(k / max(1, len(steps) - 1)), label=f"step {s}")
        _log2_axis(ax, "x")
        if (sub["value"] > 0).all():
            ax.set_yscale("log", base=2)
        ax.set_title(str(mod), fontsize=9)
        ax.set_xlabel("width (log2)")
        ax.set_ylabel(value_label)
        ax.grid(alpha=0.3, lw=0.5)
    axes.flat[0].legend(fontsize=7, loc="upper left")
    fig.suptitle("coordinate check (flat across width = stable)", fontsize=10)
    fig.tight_layout()
    return fig


def layer_diagnostics(layers: pd.DataFrame, trial_id: str | None = None, max_layers: int = 8) -> Figure:
    """Per-layer diagnostics over steps for one trial: spectral-norm drift (spectral norm / its
    value at the first logged step) and the trust ratio (OrScale-style optimizers; blank otherwise)."""
    if trial_id is None and len(layers):
        trial_id = str(layers["trial_id"].iloc[0])
    sub = layers[layers["trial_id"] == trial_id] if len(layers) else layers
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    names = list(dict.fromkeys(sub["name"]))[:max_layers] if len(sub) else []
    for i, name in enumerate(names):
        s = sub[sub["name"] == name].sort_values("step")
        st = style(i)
        role = s["role"].iloc[0] if "role" in s else ""
        sn = s["spectral_norm"].astype(float)
        if sn.notna().any() and sn.dropna().iloc[0] > 0:
            a1.plot(s["step"], sn / sn.dropna().iloc[0], color=st["color"], marker=st["marker"], ms=3, lw=1.2,
                    label=f"{name} ({role})")
        if "trust_ratio" in s and s["trust_ratio"].astype(float).notna().any():
            a2.plot(s["step"], s["trust_ratio"].astype(float), color=st["color"], marker=st["marker"], ms=3,
                    lw=1.2, label=name)
    a1.axhline(1.0, color="#888888", lw=0.8, ls=":")
    a1.set_title("weight spectral norm drift (÷ first step)", fontsize=9)
    a2.set_title("trust ratio (OrScale-style optimizers)", fontsize=9)
    for ax in (a1, a2):
        ax.set_xlabel("step")
        ax.grid(alpha=0.3, lw=0.5)
        if ax.lines:
            ax.legend(fontsize=7, loc="upper left")
        else:
            ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", color="#888888")
    fig.suptitle(f"per-layer diagnostics, trial {trial_id}", fontsize=10)
    fig.tight_layout()
    return fig


def chosen_trials(an: Analysis, per_group: int = 6) -> list[str]:
    """A readable set of trials for `loss_curves`: per group, at each scale of the smallest other
    scale, the seed with the lowest id at the cell's best grid LR (finished or running)."""
    t = an.trials
    out: list[str] = []
    for _, o in an.optima.iterrows():
        if not np.isfinite(o["log2_lr_best_grid"]):
            continue
        sel = t[(t["cell"] == o["cell"]) & (np.isclose(t["log2_lr"], o["log2_lr_best_grid"]))]
        if len(sel):
            out.append(str(sel.sort_values(SEED)["trial_id"].iloc[0]))
    by_group: dict[int, list[str]] = {}
    cell_of = t.set_index("trial_id")["group"]
    for tid in out:
        by_group.setdefault(int(cell_of[tid]), []).append(tid)
    return [tid for ids in by_group.values() for tid in ids[:per_group]]


_SCALE_FIGURES = {"lr_curves_by": "lr_curves", "lr_star_vs": "lr_star_vs_scale", "heatmap": "heatmap"}
_FORKED: dict[str, Any] = {}  # what forked figure workers read (inherited, never pickled)


def _draw_scale_figure(job: tuple[str, str]) -> tuple[str, list[str]]:
    prefix, axis = job
    an, out_dir, formats = _FORKED["an"], _FORKED["out_dir"], _FORKED["formats"]
    name = f"{prefix}_{axis}" if axis != "none" else "lr_curves"
    return name, save(globals()[_SCALE_FIGURES[prefix]](an, axis), out_dir, name, formats)


def _plot_workers(n_jobs: int) -> int:
    # Rendering is CPU-bound and single-threaded: spread the figures over the cores (fork keeps
    # the Analysis in the children without pickling it). HPT_PLOT_WORKERS=1 forces serial.
    wanted = int(os.environ.get("HPT_PLOT_WORKERS", "0")) or min(4, os.cpu_count() or 1)
    can_fork = "fork" in multiprocessing.get_all_start_methods()
    return max(1, min(wanted, n_jobs)) if can_fork and "ipykernel" not in sys.modules else 1


def write_all(an: Analysis, out_dir: str, formats: Sequence[str] = ("png", "svg")) -> dict[str, list[str]]:
    """The standard figure set of `hpt analyze` (names are stable: see docs/analysis.md)."""
    from results.store import load_curves, load_layers

    jobs = [(prefix, axis) for axis in an.scale_axes for prefix in _SCALE_FIGURES]
    if not an.scale_axes:
        jobs = [("lr_curves_by", "none")]
    _FORKED.update(an=an, out_dir=out_dir, formats=tuple(formats))
    try:
        workers = _plot_workers(len(jobs))
        if workers > 1:
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                figs = dict(pool.map(_draw_scale_figure, jobs))
        else:
            figs = dict(map(_draw_scale_figure, jobs))
    finally:
        _FORKED.clear()
    ids = chosen_trials(an)
    if ids and an.run_dir:
        metric = an.estimator.metric
        curves = load_curves(an.run_dir, ids, ["trial_id", "step", metric])
        figs["loss_curves"] = save(loss_curves(curves, an.trials, metric), out_dir, "loss_curves", formats)
        layers = load_layers(an.run_dir, ids[-1:])
        if len(layers):
            figs["layer_diagnostics"] = save(layer_diagnostics(layers, ids[-1]), out_dir, "layer_diagnostics",
                                             formats)
    return figs
