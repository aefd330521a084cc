"""`analyze` / `report` commands, the --json shape, the HTML report, and the plot functions."""

from __future__ import annotations

import base64
import json
import math
from html.parser import HTMLParser

import matplotlib.figure
import numpy as np
import pandas as pd
import pytest
from synth_runs import make_run

from results import plots
from results.analysis import analyze
from results.cli import main
from results.store import load_layers

VOID = {"meta", "img", "br", "hr", "link", "input"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("run")
    make_run(str(path), widths=(64, 128, 256), optimizers={"adamw": (0.0, 0.0), "sgd": (-1.0, 0.0)},
             diverge_above=2.5, with_layers=True,
             status_of=lambda c: "failed" if (c["width"], c["seed"], c["optimizer"]["lr"]) == (64, 0, 2.0**-12)
             else None)
    return str(path)


def test_missing_or_empty_run_dir_exits_2(tmp_path, capsys):
    assert main(["analyze", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty")]) == 2
    assert "no trials" in capsys.readouterr().err
    assert main(["analyze", str(tmp_path / "empty"), "--k", "0"]) == 2


def test_analyze_text_writes_tables_and_figures(run_dir, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["analyze", run_dir, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "OPTIMUM PER CELL" in text and "TRANSFER VERDICTS" in text
    assert "TRANSFERS" in text and "DOES NOT TRANSFER" in text
    for name in ("lr_curves_by_width", "lr_star_vs_width", "heatmap_width", "loss_curves", "layer_diagnostics"):
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert b"<svg" in (out / f"{name}.svg").read_bytes()[:2000]
    df = pd.read_parquet(out / "analysis.parquet")
    assert len(df) == 6 and {"lr_star", "log2_lr_star_lo", "edge", "estimator", "metric"} <= set(df.columns)


CELL_KEYS = {"cell", "key", "group", "n_lr", "n_seeds", "n_seeds_at_best", "lr_best_grid", "lr_star",
             "log2_lr_star", "log2_lr_star_ci", "best_value", "best_se", "fit", "edge", "suggestion", "n_trials",
             "n_diverged", "n_failed", "n_running"}
VERDICT_KEYS = {"group", "key", "axis", "verdict", "reasons", "n_scales", "scales", "slope", "slope_ci",
                "max_shift_steps", "max_shift_grid_steps", "max_regret", "max_regret_ci", "min_seeds", "n_edge",
                "regret"}
REGRET_KEYS = {"slice", "scale", "lr_tuned", "lr_used", "value", "best_value", "regret", "regret_se"}


def _number(v):
    return v is None or v in ("inf", "-inf") or isinstance(v, int | float)


def test_json_shape_is_stable(run_dir, tmp_path, capsys):
    assert main(["analyze", run_dir, "--out", str(tmp_path / "o"), "--json", "--no-plots",
                 "--estimator", "ewm", "--halflife", "3"]) == 0
    doc = json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert set(doc) == {"schema", "run_dir", "estimator", "rule", "ci_level", "n_boot", "axes", "counts",
                        "cells", "verdicts", "files"}
    assert doc["schema"] == "hptransfer.analysis/1"
    assert doc["estimator"] == {"kind": "ewm", "metric": "val_loss", "k": 3, "halflife": 3.0,
                                "label": "val_loss: EWM (half-life 3 evals), final value"}
    assert doc["axes"] == {"cell": ["optimizer.name", "width"], "group": ["optimizer.name"], "scale": ["width"]}
    assert set(doc["counts"]) == {"trials", "cells", "completed", "diverged", "failed", "running", "pending"}
    assert doc["counts"]["failed"] == 2 and doc["counts"]["diverged"] > 0
    assert len(doc["cells"]) == 6
    for cell in doc["cells"]:
        assert set(cell) == CELL_KEYS
        assert set(cell["key"]) == {"optimizer.name", "width"}
        assert all(_number(cell[k]) for k in ("lr_star", "log2_lr_star", "best_value", "best_se"))
        assert len(cell["log2_lr_star_ci"]) == 2 and cell["edge"] in (None, "low", "high", "both")
    assert {v["key"]["optimizer.name"]: v["verdict"] for v in doc["verdicts"]} == {
        "adamw": "transfers", "sgd": "does not transfer"}
    for v in doc["verdicts"]:
        assert set(v) == VERDICT_KEYS and v["axis"] == "width" and v["scales"] == [64, 128, 256]
        assert all(set(r) == REGRET_KEYS for r in v["regret"]) and len(v["regret"]) == 2
    assert doc["files"]["figures"] == {}
    assert any(p.endswith("analysis.parquet") for p in doc["files"]["tables"])


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.imgs: list[str] = []
        self.external: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "img":
            self.imgs.append(a.get("src", ""))
        for key in ("src", "href"):
            if a.get(key) and not a[key].startswith(("data:", "#")):
                self.external.append(a[key])
        if tag in ("script", "link", "iframe"):
            self.external.append(tag)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unbalanced </{tag}> (open: {self.stack[-3:]})")
        else:
            self.stack.pop()


def test_report_is_valid_self_contained_html_with_figures(run_dir, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["report", run_dir, "--out", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    checker = _Checker()
    checker.feed(text)
    checker.close()
    assert not checker.errors and not checker.stack, (checker.errors, checker.stack)
    assert not checker.external
    assert len(checker.imgs) >= 5
    for src in checker.imgs:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:4] == b"\x89PNG"
    for needle in ("Transfer verdicts", "does not transfer", "transfers", "Optimum per cell", "Failed trials",
                   "RuntimeError: boom", "name: synthetic", "val_loss: last eval", "diverged"):
        assert needle in text, needle


def test_coord_check_and_layer_panels(run_dir):
    rows = [{"module": m, "width": w, "step": s, "value": (1.0 if m == "attn" else w / 64) * (1 + s / 10)}
            for m in ("attn", "mlp", "logits") for w in (64, 128, 256, 512) for s in (0, 5, 10)]
    fig = plots.coord_check(pd.DataFrame(rows))
    assert isinstance(fig, matplotlib.figure.Figure) and len([a for a in fig.axes if a.get_visible()]) == 3
    assert all(len(a.lines) == 3 for a in fig.axes if a.get_visible())
    with pytest.raises(ValueError, match="missing"):
        plots.coord_check(pd.DataFrame({"module": ["a"], "width": [1]}))
    layers = load_layers(run_dir)
    fig2 = plots.layer_diagnostics(layers)
    drift, trust = fig2.axes
    assert len(drift.lines) == 4 and len(trust.lines) == 3  # 3 layers + the y=1 guide
    ys = drift.lines[0].get_ydata()
    assert math.isclose(ys[0], 1.0)


def test_lr_curves_panel_per_group_marks_optima_and_divergence(run_dir):
    an = analyze(run_dir)
    fig = plots.lr_curves(an, "width")
    axes = [a for a in fig.axes if a.get_visible()]
    assert len(axes) == 2
    for ax in axes:
        stars = [ln for ln in ax.lines if ln.get_marker() == "*"]
        assert len(stars) == 3  # one optimum per width
        assert ax.get_xscale() == "log"
        assert any(len(c.get_offsets()) for c in ax.collections if hasattr(c, "get_offsets"))  # diverged ×
    assert np.isfinite(an.optima["lr_star"]).all()
