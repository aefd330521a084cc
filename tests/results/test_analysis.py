"""Analysis on synthetic runs with a known optimum: loss = floor + a (log2 lr - c(width))^2 + noise."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from synth_runs import make_run

from results.analysis import AnalysisConfig, Estimator, VerdictRule, analyze, fit_optimum, reduce_evals


def _cell(an, **key):
    o = an.optima
    for k, v in key.items():
        o = o[o[k] == v]
    assert len(o) == 1, key
    return o.iloc[0]


def test_fit_optimum_recovers_off_grid_vertex_and_skips_nonfinite():
    xs = np.arange(-12.0, -3.0)
    c = -8.3
    y = (xs - c) ** 2
    y_div = y.copy()
    y_div[-2:] = np.inf  # diverged high LRs
    y_nan = np.full_like(y, np.nan)
    xstar, ib, fitted = fit_optimum(xs, np.vstack([y, y_div, y_nan]), 1)
    assert xstar[0] == pytest.approx(c, abs=1e-9)
    assert xstar[1] == pytest.approx(c, abs=1e-9)
    assert math.isnan(xstar[2]) and not fitted[2]
    assert ib[0] == 4 and fitted[0]
    # an edge argmin is not extrapolated past the grid
    xe, _, _ = fit_optimum(xs, ((xs + 14.0) ** 2)[None, :], 1)
    assert xe[0] >= xs[0]


@pytest.mark.parametrize("drift", [0.0, -1.0])
def test_recovers_c_within_interval_and_verdict(tmp_path, drift):
    widths = (64, 128, 256)
    make_run(str(tmp_path), widths=widths, optimizers={"opt": (drift, 0.0)}, seeds=(0, 1, 2, 3), noise=0.01,
             rng_seed=1)
    an = analyze(str(tmp_path))
    assert an.scale_axes == ["width"]
    for w in widths:
        c = -8.0 + drift * math.log2(w / widths[0])
        o = _cell(an, width=w)
        assert o["log2_lr_star_lo"] <= c <= o["log2_lr_star_hi"], (w, o["log2_lr_star_lo"], o["log2_lr_star_hi"])
        assert abs(o["log2_lr_star"] - c) < 0.15
        assert o["edge"] == ""
    (v,) = an.verdicts.to_dict("records")
    assert v["slope_lo"] <= drift <= v["slope_hi"]
    if drift == 0.0:
        assert v["verdict"] == "transfers", v["reasons"]
        assert v["max_shift_grid_steps"] == 0
    else:
        assert v["verdict"] == "does not transfer", v["reasons"]
        assert v["max_shift_grid_steps"] == 2
        assert v["max_regret"] > 0.1  # 4 * curvature 0.05 at two steps off


def test_edge_optimum_is_flagged_and_blocks_transfers(tmp_path):
    make_run(str(tmp_path), c0=-13.0, log2_lrs=range(-12, -3))  # true optimum below the grid
    an = analyze(str(tmp_path))
    assert (an.optima["edge"] == "low").all()
    assert an.optima["suggestion"].str.contains("extend the grid below").all()
    (v,) = an.verdicts.to_dict("records")
    assert v["verdict"] == "inconclusive"
    assert "edge" in " ".join(v["reasons"])
    high = analyze(str(make_run(str(tmp_path / "hi"), c0=-3.0).uri))
    assert (high.optima["edge"] == "high").all()
    assert high.optima["suggestion"].str.contains("above").all()


def test_diverged_failed_running_are_counted_not_crashing(tmp_path):
    def status_of(cfg):
        if cfg["width"] == 128 and cfg["seed"] == 0 and cfg["optimizer"]["lr"] == 2.0**-10:
            return "failed"
        if cfg["width"] == 256 and cfg["seed"] == 2:
            return "running"
        return None

    make_run(str(tmp_path), diverge_above=1.5, status_of=status_of)
    an = analyze(str(tmp_path))
    t = an.trials
    assert an.counts["diverged"] == int((t["status"] == "diverged").sum()) > 0
    assert an.counts["failed"] == 1 and an.counts["running"] == 9
    assert an.optima["n_diverged"].sum() == an.counts["diverged"]
    assert an.optima["n_failed"].sum() == 1 and an.optima["n_running"].sum() == 9
    div = an.lr_curves[an.lr_curves["n_diverged"] > 0]
    assert np.isposinf(div["mean"]).all()
    # the optimum is still found (diverged LRs are above it); running seeds are not used
    assert (abs(an.optima["log2_lr_star"] + 8.0) < 0.2).all()
    assert _cell(an, width=256)["n_seeds"] == 2
    # the analysis still writes every output
    assert len(an.write_parquet(str(tmp_path / "out"))) == 4


def test_all_diverged_cell_and_transferred_lr_diverging(tmp_path):
    # drift of -2 per width doubling: the LR tuned at width 64 diverges at width 256
    make_run(str(tmp_path), optimizers={"sgd": (-2.0, 0.0)}, diverge_above=1.5, log2_lrs=range(-14, -5))
    an = analyze(str(tmp_path))
    (v,) = an.verdicts.to_dict("records")
    assert v["verdict"] == "does not transfer"
    assert math.isinf(v["max_regret"])
    # a cell where every LR diverges: no optimum, no crash, an edge suggestion
    make_run(str(tmp_path / "all"), diverge_above=-100.0)
    an2 = analyze(str(tmp_path / "all"))
    assert an2.optima["lr_star"].isna().all()
    assert an2.optima["suggestion"].str.contains("every LR diverged").all()
    assert an2.verdicts.empty or (an2.verdicts["verdict"] == "inconclusive").all()


def test_single_seed_is_inconclusive(tmp_path):
    make_run(str(tmp_path), seeds=(0,))
    an = analyze(str(tmp_path))
    (v,) = an.verdicts.to_dict("records")
    assert v["verdict"] == "inconclusive"
    assert "seed" in v["reasons"][0]
    assert an.optima["log2_lr_star_lo"].isna().all()  # no interval from one seed


def test_width_and_depth_axes_get_separate_verdicts(tmp_path):
    make_run(str(tmp_path), widths=(64, 256), depths=(2, 8), optimizers={"adamw": (0.0, -0.5)}, noise=0.005)
    an = analyze(str(tmp_path))
    assert an.scale_axes == ["width", "depth"]
    v = an.verdicts.set_index("axis")
    assert v.loc["width", "verdict"] == "transfers", v.loc["width", "reasons"]
    assert v.loc["depth", "verdict"] == "does not transfer", v.loc["depth", "reasons"]
    assert v.loc["depth", "slope_lo"] <= -0.5 <= v.loc["depth", "slope_hi"]


def test_rule_is_configurable(tmp_path):
    make_run(str(tmp_path), optimizers={"opt": (-0.2, 0.0)}, seeds=(0, 1, 2, 3), noise=0.002)
    loose = analyze(str(tmp_path), AnalysisConfig(rule=VerdictRule(slope_tol=0.5, max_regret=1.0)))
    strict = analyze(str(tmp_path), AnalysisConfig(rule=VerdictRule(slope_tol=0.05, max_regret=1.0)))
    assert loose.verdicts["verdict"].iloc[0] == "transfers"
    assert strict.verdicts["verdict"].iloc[0] == "does not transfer"


def test_estimators_on_known_evals():
    evals = pd.DataFrame({"trial_id": ["a"] * 4 + ["b"] * 2, "step": [0, 1, 2, 3, 0, 1],
                          "val_loss": [4.0, 3.0, 2.0, 1.0, 5.0, 7.0]}).set_index("trial_id")
    last = reduce_evals(evals, Estimator("last"))
    assert last.to_dict() == {"a": 1.0, "b": 7.0}
    mk = reduce_evals(evals, Estimator("mean_last_k", k=3))
    assert mk.to_dict() == {"a": 2.0, "b": 6.0}
    ew = reduce_evals(evals, Estimator("ewm", halflife=1.0))
    expect = pd.Series([4.0, 3.0, 2.0, 1.0]).ewm(halflife=1.0).mean().iloc[-1]
    assert ew["a"] == pytest.approx(expect)
    with pytest.raises(ValueError, match="estimator kind"):
        Estimator("median")


def test_estimator_choice_changes_values_and_is_recorded(tmp_path):
    make_run(str(tmp_path), widths=(64, 128), eval_noise=0.05)
    last = analyze(str(tmp_path))
    mk = analyze(str(tmp_path), AnalysisConfig(estimator=Estimator("mean_last_k", k=3)))
    # curves still fall at the end, so the mean of the last 3 evals is above the last eval
    fin = last.trials["status"] == "completed"
    assert (mk.trials.loc[fin, "value"] > last.trials.loc[fin, "value"] - 0.2).all()
    assert not np.allclose(mk.trials.loc[fin, "value"], last.trials.loc[fin, "value"])
    # `last` from the curves equals `last` from the summary
    via_curves = last.trials.drop(columns=["final_val_loss"])
    an = analyze(str(tmp_path), trials=via_curves.drop(columns=["cell", "group", "value", "objective", "log2_lr"]))
    assert np.allclose(an.trials.loc[fin, "value"], last.trials.loc[fin, "value"])
    out = tmp_path / "out"
    for path in mk.write_parquet(str(out)):
        df = pd.read_parquet(path)
        assert (df["estimator"] == "mean_last_k").all() and (df["estimator_k"] == 3).all()
    assert mk.to_json()["estimator"]["kind"] == "mean_last_k"


def test_accuracy_metric_is_maximized(tmp_path):
    make_run(str(tmp_path), widths=(64, 128))
    an = analyze(str(tmp_path), AnalysisConfig(estimator=Estimator("last", metric="train_loss")))
    assert (abs(an.optima["log2_lr_star"] + 8.0) < 0.3).all()
    acc = Estimator("last", metric="val_accuracy")
    assert acc.sign == -1
