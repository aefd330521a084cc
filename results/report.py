"""One self-contained HTML page for a run: spec, counts, verdicts, optima, plots (base64 PNG).

No scripts, no external stylesheets or images: the file opens from disk without a server.
"""

from __future__ import annotations

import base64
import html
import io
import math
import time
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from results import plots
from results.analysis import Analysis, _short

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em auto;max-width:1200px;color:#222;padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}th{background:#f3f3f3}
td.l,th.l{text-align:left}
.transfers{background:#d8f0e6}.does-not-transfer{background:#f8ddd0}.inconclusive{background:#f4efc8}
pre{background:#f7f7f7;padding:.8em;overflow:auto;font-size:.85em}
figure{margin:1em 0}figcaption{font-size:.85em;color:#555}img{max-width:100%}
.muted{color:#666;font-size:.85em}
"""


def figure_png_base64(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _fmt(v: Any) -> str:
    if isinstance(v, float | np.floating):
        if math.isnan(v):
            return "–"
        if math.isinf(v):
            return "∞" if v > 0 else "−∞"
        return f"{v:.4g}"
    if isinstance(v, list | tuple):
        return ", ".join(_fmt(x) for x in v)
    return html.escape(str(v))


def _table(df: pd.DataFrame, left: tuple[str, ...] = (), row_class: str | None = None) -> str:
    head = "".join(f'<th class="{"l" if c in left else ""}">{html.escape(_short(c))}</th>' for c in df.columns)
    body = []
    for _, r in df.iterrows():
        cls = f' class="{str(r[row_class]).replace(" ", "-")}"' if row_class else ""
        cells = "".join(f'<td class="{"l" if c in left else ""}">{_fmt(r[c])}</td>' for c in df.columns)
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def verdict_table(an: Analysis) -> pd.DataFrame:
    v = an.verdicts
    if v.empty:
        return pd.DataFrame(columns=["verdict"])
    out = v[[*an.group_axes, "axis", "verdict"]].copy()
    out["slope [CI]"] = [f"{_fmt(s)} [{_fmt(lo)}, {_fmt(hi)}]" for s, lo, hi in
                         zip(v["slope"], v["slope_lo"], v["slope_hi"], strict=True)]
    out["max shift (steps)"] = v["max_shift_steps"]
    out["max regret [CI]"] = [f"{_fmt(s)} [{_fmt(lo)}, {_fmt(hi)}]" for s, lo, hi in
                              zip(v["max_regret"], v["max_regret_lo"], v["max_regret_hi"], strict=True)]
    out["min seeds"] = v["min_seeds"]
    out["edge cells"] = v["n_edge"]
    out["reasons"] = ["; ".join(r) for r in v["reasons"]]
    return out


def optima_table(an: Analysis) -> pd.DataFrame:
    o = an.optima
    out = o[an.cell_axes].copy()
    out["lr* (fit)"] = o["lr_star"]
    out["log2 lr* [CI]"] = [f"{_fmt(s)} [{_fmt(lo)}, {_fmt(hi)}]" for s, lo, hi in
                            zip(o["log2_lr_star"], o["log2_lr_star_lo"], o["log2_lr_star_hi"], strict=True)]
    out["grid best lr"] = o["lr_best_grid"]
    out[f"best {an.estimator.metric}"] = o["best_value"]
    out["± SE"] = o["best_se"]
    out["seeds"] = o["n_seeds"]
    out["diverged"] = o["n_diverged"]
    out["failed"] = o["n_failed"]
    out["running"] = o["n_running"]
    out["edge"] = [s or "" for s in o["suggestion"]]
    return out


def render(an: Analysis, title: str | None = None) -> str:
    """The report as one HTML string."""
    title = title or f"hptransfer report — {an.run_dir}"
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{CSS}</style></head><body>", f"<h1>{html.escape(title)}</h1>",
             f"<p class='muted'>generated {time.strftime('%Y-%m-%d %H:%M:%S')}; final metric: "
             f"<b>{html.escape(an.estimator.label)}</b>; intervals: {an.config.ci_level:.0%} bootstrap over seeds "
             f"({an.config.n_boot} replicates); rule: {html.escape(str(an.config.rule))}</p>"]
    c = an.counts
    parts.append("<h2>Trials</h2>" + _table(pd.DataFrame([c])))
    if c.get("running") or c.get("pending"):
        parts.append("<p class='muted'>The run is still in progress: running trials are counted but not "
                     "used for optima.</p>")
    parts.append("<h2>Transfer verdicts</h2>")
    vt = verdict_table(an)
    parts.append(_table(vt, left=(*an.group_axes, "axis", "verdict", "reasons"), row_class="verdict")
                 if len(vt) else "<p>No scale axis (width/depth) varies: no verdict.</p>")
    if len(an.regret):
        reg = an.regret.drop(columns=["group", "cell"]).copy()
        reg["slice"] = [", ".join(f"{k}={v}" for k, v in s.items()) for s in reg["slice"]]
        parts.append("<h3>Regret of the LR tuned at the smallest scale</h3>" + _table(reg, left=("axis", "slice")))
    parts.append("<h2>Figures</h2>")
    figs: list[tuple[str, Figure]] = []
    for axis in an.scale_axes:
        figs.append((f"{an.estimator.metric} vs LR by {axis}", plots.lr_curves(an, axis)))
        figs.append((f"lr* vs {axis}", plots.lr_star_vs_scale(an, axis)))
        figs.append((f"{axis} × LR heatmap", plots.heatmap(an, axis)))
    if not an.scale_axes:
        figs.append((f"{an.estimator.metric} vs LR", plots.lr_curves(an, "none")))
    ids = plots.chosen_trials(an)
    if ids and an.run_dir:
        from results.store import load_curves, load_layers

        curves = load_curves(an.run_dir, ids, ["trial_id", "step", an.estimator.metric])
        figs.append(("loss curves at each cell's best LR", plots.loss_curves(curves, an.trials, an.estimator.metric)))
        layers = load_layers(an.run_dir, ids[-1:])
        if len(layers):
            figs.append(("per-layer diagnostics", plots.layer_diagnostics(layers, ids[-1])))
    for cap, fig in figs:
        parts.append(f"<figure><img alt='{html.escape(cap)}' src='data:image/png;base64,{figure_png_base64(fig)}'>"
                     f"<figcaption>{html.escape(cap)}</figcaption></figure>")
    parts.append("<h2>Optimum per cell</h2>" + _table(optima_table(an), left=(*an.cell_axes, "edge")))
    failed = an.trials[an.trials["status"] == "failed"]
    if len(failed):
        errs = failed[["trial_id", "error"]].copy()
        errs["error"] = [str(e).strip().splitlines()[-1] if str(e).strip() else "" for e in errs["error"]]
        parts.append("<h2>Failed trials</h2>" + _table(errs, left=("trial_id", "error")))
    parts.append("<h2>Spec</h2><pre>" + html.escape(an.spec or "(no spec.yaml in the run dir)") + "</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(an: Analysis, path: str) -> str:
    import os

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(render(an))
    return path
