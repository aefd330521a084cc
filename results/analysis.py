"""From a run directory to optimal-LR tables and transfer verdicts.

Pipeline (docs/analysis.md explains every step and the output shapes):

1. per trial, one final metric (an `Estimator`: last eval, mean of the last k evals, or an
   EWM-smoothed final value); diverged trials count as the worst value (+inf loss);
2. per cell (every varying config axis except `optimizer.lr` and `seed`) and LR, the mean and
   standard error over seeds (`Analysis.lr_curves`);
3. per cell the optimum (`Analysis.optima`): the grid argmin of the seed-mean curve plus a
   quadratic fit in log2(lr) around it, a bootstrap-over-seeds interval for log2(lr*), and an
   edge flag when the argmin is the smallest or largest LR of the grid;
4. per group (optimizer, parametrization and any other non-scale axis) and scale axis (width,
   depth) the verdict (`Analysis.verdicts`): slope of log2(lr*) against log2(scale) with a
   bootstrap interval, the largest shift of lr* in grid steps, the regret of the LR tuned at the
   smallest scale, and a `VerdictRule` that turns them into transfers / does not transfer /
   inconclusive.

Trials that are still `running` (or `pending`) and `failed` trials are counted per cell but never
enter an optimum: their final metric is not final (running) or says nothing about the LR (failed).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from results.store import RunStore, load_trials

SCHEMA = "hptransfer.analysis/1"
LR = "optimizer.lr"
SEED = "seed"
SCALE_AXES = ("width", "depth")
# Metrics the analysis knows, with their direction (+1: lower is better, -1: higher is better).
METRICS: dict[str, int] = {"val_loss": 1, "train_loss": 1, "val_accuracy": -1}
# Columns of the trials table that are not config: status, summary metrics.
NON_CONFIG = {
    "trial_id", "status", "error", "final_train_loss", "final_val_loss", "best_val_loss",
    "final_val_accuracy", "steps_done", "items_seen", "wall_time_s", "diverged_at_step", "item_unit",
}
FINISHED = ("completed", "diverged")
ESTIMATORS = ("last", "mean_last_k", "ewm")
VERDICTS = ("transfers", "does not transfer", "inconclusive")


# -- configuration -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Estimator:
    """How one trial's curve becomes one number.

    kind: `last` (the last logged value of `metric`), `mean_last_k` (mean of its last `k` values),
    `ewm` (exponentially weighted mean of all its values, half-life `halflife` evaluations, read
    at the end). Diverged trials are the worst value whatever the kind.
    """

    kind: str = "last"
    metric: str = "val_loss"
    k: int = 3
    halflife: float = 2.0

    def __post_init__(self) -> None:
        if self.kind not in ESTIMATORS:
            raise ValueError(f"estimator kind {self.kind!r} is unknown; use one of {', '.join(ESTIMATORS)}")
        if self.metric not in METRICS:
            raise ValueError(f"metric {self.metric!r} is unknown; use one of {', '.join(METRICS)}")
        if self.k < 1:
            raise ValueError(f"estimator k={self.k} must be >= 1")
        if not self.halflife > 0:
            raise ValueError(f"estimator halflife={self.halflife} must be > 0")

    @property
    def sign(self) -> int:
        return METRICS[self.metric]

    @property
    def label(self) -> str:
        if self.kind == "mean_last_k":
            return f"{self.metric}: mean of last {self.k} evals"
        if self.kind == "ewm":
            return f"{self.metric}: EWM (half-life {self.halflife:g} evals), final value"
        return f"{self.metric}: last eval"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "label": self.label}


@dataclass(frozen=True)
class VerdictRule:
    """Turns slope, regret, edges and seed counts into a verdict (docs/analysis.md, "Verdict rule").

    - `inconclusive` when fewer than `min_scales` scale values have an optimum, when the fewest
      seeds at any cell's optimum is below `min_seeds`, or when neither rule below decides;
    - `does not transfer` when the slope interval lies entirely outside [-slope_tol, slope_tol]
      or, at some scale, the regret interval lies entirely above `max_regret`;
    - `transfers` when the slope interval lies inside [-slope_tol, slope_tol], every regret
      interval lies below `max_regret`, and no cell of the group has an edge optimum
      (an edge optimum only blocks `transfers`: the true optimum lies further out, so regret is
      underestimated, not overestimated).
    """

    slope_tol: float = 0.25  # |d log2(lr*) / d log2(scale)|: 0.25 = lr* moves 1 step per 16x scale
    max_regret: float = 0.02  # in metric units (nats for losses)
    min_seeds: int = 2
    min_scales: int = 2


@dataclass(frozen=True)
class AnalysisConfig:
    estimator: Estimator = field(default_factory=Estimator)
    rule: VerdictRule = field(default_factory=VerdictRule)
    ci_level: float = 0.95
    n_boot: int = 200
    fit_halfwidth: int = 1  # the quadratic uses the argmin and this many grid points on each side
    random_seed: int = 0

    @property
    def z(self) -> float:
        return NormalDist().inv_cdf(0.5 + self.ci_level / 2)


# -- the result ----------------------------------------------------------------------------------


@dataclass
class Analysis:
    """Everything `analyze` computes. Tables are plain DataFrames (see docs/analysis.md)."""

    run_dir: str
    config: AnalysisConfig
    trials: pd.DataFrame  # one row per trial + `cell`, `group`, `value` (the final metric)
    lr_curves: pd.DataFrame  # one row per cell x LR
    optima: pd.DataFrame  # one row per cell
    verdicts: pd.DataFrame  # one row per group x scale axis
    regret: pd.DataFrame  # one row per group x scale axis x slice x scale
    cell_axes: list[str]
    group_axes: list[str]
    scale_axes: list[str]
    counts: dict[str, int]
    spec: str | None = None
    boot: dict[int, np.ndarray] = field(default_factory=dict, repr=False)  # cell -> log2 lr* replicates

    @property
    def estimator(self) -> Estimator:
        return self.config.estimator

    def to_json(self) -> dict[str, Any]:
        """The `--json` document (shape documented in docs/analysis.md; `schema` names its version)."""
        est = self.config.estimator
        cells = []
        for _, row in self.optima.iterrows():
            cells.append(
                {
                    "cell": int(row["cell"]),
                    "key": {a: _jsonable(row[a]) for a in self.cell_axes},
                    "group": int(row["group"]),
                    "n_lr": int(row["n_lr"]),
                    "n_seeds": int(row["n_seeds"]),
                    "n_seeds_at_best": int(row["n_seeds_at_best"]),
                    "lr_best_grid": _num(row["lr_best_grid"]),
                    "lr_star": _num(row["lr_star"]),
                    "log2_lr_star": _num(row["log2_lr_star"]),
                    "log2_lr_star_ci": [_num(row["log2_lr_star_lo"]), _num(row["log2_lr_star_hi"])],
                    "best_value": _num(row["best_value"]),
                    "best_se": _num(row["best_se"]),
                    "fit": row["fit"],
                    "edge": row["edge"] or None,
                    "suggestion": row["suggestion"] or None,
                    "n_trials": int(row["n_trials"]),
                    "n_diverged": int(row["n_diverged"]),
                    "n_failed": int(row["n_failed"]),
                    "n_running": int(row["n_running"]),
                }
            )
        verdicts = []
        for _, row in self.verdicts.iterrows():
            reg = self.regret[(self.regret["group"] == row["group"]) & (self.regret["axis"] == row["axis"])]
            verdicts.append(
                {
                    "group": int(row["group"]),
                    "key": {a: _jsonable(row[a]) for a in self.group_axes},
                    "axis": row["axis"],
                    "verdict": row["verdict"],
                    "reasons": list(row["reasons"]),
                    "n_scales": int(row["n_scales"]),
                    "scales": [_jsonable(s) for s in row["scales"]],
                    "slope": _num(row["slope"]),
                    "slope_ci": [_num(row["slope_lo"]), _num(row["slope_hi"])],
                    "max_shift_steps": _num(row["max_shift_steps"]),
                    "max_shift_grid_steps": _num(row["max_shift_grid_steps"]),
                    "max_regret": _num(row["max_regret"]),
                    "max_regret_ci": [_num(row["max_regret_lo"]), _num(row["max_regret_hi"])],
                    "min_seeds": int(row["min_seeds"]),
                    "n_edge": int(row["n_edge"]),
                    "regret": [
                        {
                            "slice": {k: _jsonable(v) for k, v in r["slice"].items()},
                            "scale": _jsonable(r["scale"]),
                            "lr_tuned": _num(r["lr_tuned"]),
                            "lr_used": _num(r["lr_used"]),
                            "value": _num(r["value"]),
                            "best_value": _num(r["best_value"]),
                            "regret": _num(r["regret"]),
                            "regret_se": _num(r["regret_se"]),
                        }
                        for _, r in reg.iterrows()
                    ],
                }
            )
        return {
            "schema": SCHEMA,
            "run_dir": self.run_dir,
            "estimator": est.to_dict(),
            "rule": asdict(self.config.rule),
            "ci_level": self.config.ci_level,
            "n_boot": self.config.n_boot,
            "axes": {"cell": self.cell_axes, "group": self.group_axes, "scale": self.scale_axes},
            "counts": self.counts,
            "cells": cells,
            "verdicts": verdicts,
        }

    def write_parquet(self, out_dir: str) -> list[str]:
        """`analysis.parquet` (one row per cell: optimum + verdict columns of its group),
        `lr_curves.parquet` and `verdicts.parquet`; every table carries the estimator columns."""
        import os

        os.makedirs(out_dir, exist_ok=True)
        est = self.config.estimator
        tag = {"estimator": est.kind, "estimator_label": est.label, "metric": est.metric,
               "estimator_k": est.k, "estimator_halflife": est.halflife}
        paths = []
        for name, df in (("analysis", self.optima), ("lr_curves", self.lr_curves),
                         ("verdicts", self.verdicts), ("regret", self.regret)):
            table = _stringify_objects(df).assign(**tag)
            path = os.path.join(out_dir, f"{name}.parquet")
            table.to_parquet(path, index=False)
            paths.append(path)
        return paths

    def cell_label(self, cell: int, axes: Iterable[str] | None = None) -> str:
        row = self.optima.loc[self.optima["cell"] == cell].iloc[0]
        return ", ".join(f"{_short(a)}={row[a]}" for a in (axes if axes is not None else self.cell_axes))

    def group_label(self, group: int) -> str:
        rows = self.optima.loc[self.optima["group"] == group]
        if rows.empty or not self.group_axes:
            return "all"
        row = rows.iloc[0]
        return ", ".join(f"{_short(a)}={row[a]}" for a in self.group_axes)


# -- step 1: final metric per trial ---------------------------------------------------------------


def final_values(run_dir: str, trials: pd.DataFrame, estimator: Estimator) -> pd.Series:
    """trial_id -> final metric (natural units) for finished trials; diverged trials get the worst
    value (+inf for losses, -inf for accuracy); running/failed trials get NaN.

    `last` uses the trial summary (`final_<metric>` in status.json) when present and reads curves
    only for the rest; the other estimators read the metric column of the curves (from the
    compacted `RUN_DIR/curves/` dataset where `results.store.compact` wrote one)."""
    est = estimator
    out = pd.Series(np.nan, index=trials["trial_id"].to_numpy(), dtype="float64")
    status = trials["status"].to_numpy()
    finished = np.isin(status, FINISHED)
    diverged = status == "diverged"
    need = finished & ~diverged
    if est.kind == "last":
        col = f"final_{est.metric}"
        if col in trials.columns:
            vals = pd.to_numeric(trials[col], errors="coerce").to_numpy(dtype="float64")
            have = need & np.isfinite(vals)
            out.iloc[np.flatnonzero(have)] = vals[have]
            need = need & ~have
    if need.any():
        ids = trials["trial_id"].to_numpy()[need]
        evals = read_metric(run_dir, ids, est.metric)
        reduced = reduce_evals(evals, est)
        out.loc[reduced.index] = reduced.to_numpy()
    out.iloc[np.flatnonzero(diverged)] = math.inf * est.sign
    return out


def read_metric(run_dir: str, trial_ids: Iterable[str], metric: str) -> pd.DataFrame:
    """Rows (trial_id, step, <metric>) where the metric is logged (non-null, non-NaN), sorted."""
    store = RunStore(run_dir)
    ids = list(trial_ids)
    schema = pa.schema([("trial_id", pa.string()), ("step", pa.int64()), (metric, pa.float64())])
    cols = ["trial_id", "step", metric]
    expr = pads.field(metric).is_valid() & ~pads.field(metric).is_nan()
    tables = []
    compacted = compacted_trials(store)
    from_compact = [t for t in ids if t in compacted]
    rest = [t for t in ids if t not in compacted]
    if from_compact:
        ds = pads.dataset(store.path("curves"), format="parquet", filesystem=store.fs,
                          schema=schema, exclude_invalid_files=False)
        filt = expr & pads.field("trial_id").isin(pa.array(from_compact, pa.string()))
        tables.append(ds.to_table(columns=cols, filter=filt))
    if rest:
        paths = [store.trial_path(t, "curve.parquet") for t in rest]
        infos = store.fs.get_file_info(paths)
        present = [i.path for i in infos if i.type == pafs.FileType.File]
        if present:
            ds = pads.dataset(present, format="parquet", filesystem=store.fs, schema=schema)
            tables.append(ds.to_table(columns=cols, filter=expr))
    if not tables:
        return pd.DataFrame({"trial_id": pd.Series([], dtype=object), "step": pd.Series([], dtype="int64"),
                             metric: pd.Series([], dtype="float64")}).set_index("trial_id")
    table = pa.concat_tables(tables)
    table = table.sort_by([("trial_id", "ascending"), ("step", "ascending")])
    df = table.to_pandas()
    return df.set_index("trial_id")


def compacted_trials(store: RunStore) -> set[str]:
    """Trial ids whose curves `compact` wrote into RUN_DIR/curves/ (and which have not changed since)."""
    manifest = store.read_json(store.path("curves", "_manifest.json"))
    if not manifest:
        return set()
    return set(manifest.get("trials", {}))


def reduce_evals(evals: pd.DataFrame, est: Estimator) -> pd.Series:
    """One value per trial from its logged metric rows (index trial_id, sorted by step)."""
    y = evals[est.metric]
    if y.empty:
        return pd.Series(dtype="float64")
    keys = evals.index
    g = y.groupby(keys, sort=False)
    if est.kind == "last":
        return g.last()
    if est.kind == "mean_last_k":
        return y.groupby(keys, sort=False).tail(est.k).groupby(level=0, sort=False).mean()
    # EWM with adjust=True read at the last point: weights (1 - alpha)^(rows from the end).
    alpha = 1.0 - math.exp(-math.log(2.0) / est.halflife)
    from_end = g.cumcount(ascending=False).to_numpy()
    w = np.power(1.0 - alpha, from_end)
    num = pd.Series(w * y.to_numpy(), index=keys).groupby(level=0, sort=False).sum()
    den = pd.Series(w, index=keys).groupby(level=0, sort=False).sum()
    return num / den


# -- steps 2-4 ----------------------------------------------------------------------------------


def config_columns(trials: pd.DataFrame) -> list[str]:
    cols = trials.attrs.get("config_columns")
    if cols:
        return [c for c in cols if c in trials.columns and c != "trial_id"]
    return [c for c in trials.columns if c not in NON_CONFIG]


def varying_axes(trials: pd.DataFrame) -> list[str]:
    """Config columns that vary across trials, except the LR and the seed (cell axes)."""
    out = []
    for col in config_columns(trials):
        if col in (LR, SEED):
            continue
        if _hashable(trials[col]).nunique(dropna=False) > 1:
            out.append(col)
    # width, depth first, then the optimizer, then the rest in table order
    order = {"optimizer.name": 0, "parametrization.kind": 1, "width": 3, "depth": 4}
    return sorted(out, key=lambda c: (order.get(c, 2), out.index(c)))


def analyze(
    run_dir: str, config: AnalysisConfig | None = None, trials: pd.DataFrame | None = None
) -> Analysis:
    """Analyze a run directory (or a trials table already loaded from it)."""
    cfg = config or AnalysisConfig()
    est = cfg.estimator
    if trials is None:
        trials = load_trials(run_dir)
    if trials.empty:
        raise ValueError(f"run dir {run_dir!r} has no trials (no trials/<id>/config.json)")
    for col in (LR, SEED):
        if col not in trials.columns:
            raise ValueError(f"trials table has no {col!r} column; is {run_dir!r} an hptransfer run?")
    trials = trials.copy()
    cell_axes = varying_axes(trials)
    scale_axes = [a for a in SCALE_AXES if a in cell_axes]
    group_axes = [a for a in cell_axes if a not in scale_axes]
    for a in cell_axes:
        trials[a] = _hashable(trials[a])
    trials["cell"] = _codes(trials, cell_axes)
    trials["group"] = _codes(trials, group_axes)
    trials["value"] = final_values(run_dir, trials, est).to_numpy()
    trials["objective"] = trials["value"] * est.sign
    trials["log2_lr"] = np.log2(trials[LR].astype(float))

    counts = {s: int((trials["status"] == s).sum()) for s in ("completed", "diverged", "failed", "running", "pending")}
    counts["trials"] = len(trials)
    counts["cells"] = int(trials["cell"].nunique())

    lr_curves = _lr_curves(trials, cell_axes, cfg)
    optima, boot = _optima(trials, lr_curves, cell_axes, cfg)
    verdicts, regret = _verdicts(optima, lr_curves, boot, group_axes, scale_axes, cfg)
    spec = RunStore(run_dir).read_spec() if run_dir else None
    return Analysis(run_dir, cfg, trials, lr_curves, optima, verdicts, regret, cell_axes, group_axes,
                    scale_axes, counts, spec, boot)


def _lr_curves(trials: pd.DataFrame, cell_axes: list[str], cfg: AnalysisConfig) -> pd.DataFrame:
    """Per cell x LR: seeds, diverged/failed/running counts, mean and SE of the final metric."""
    t = trials
    fin = t["status"].isin(FINISHED)
    obj = t["objective"].where(fin)
    finite = obj.where(np.isfinite(obj))
    key = [t["cell"], t["log2_lr"]]
    g = pd.DataFrame({
        "n_trials": 1,
        "n_seeds": fin.astype(int),
        "n_diverged": (t["status"] == "diverged").astype(int),
        "n_failed": (t["status"] == "failed").astype(int),
        "n_running": t["status"].isin(("running", "pending")).astype(int),
        "fin_sum": finite.fillna(0.0),
        "fin_sq": (finite**2).fillna(0.0),
        "n_finite": finite.notna().astype(int),
    }).groupby(key).sum()
    g.index.names = ["cell", "log2_lr"]
    g = g.reset_index()
    n = g["n_finite"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_f = g["fin_sum"].to_numpy() / n
        var = (g["fin_sq"].to_numpy() - n * mean_f**2) / (n - 1)
        se = np.sqrt(np.clip(var, 0, None) / n)
    se[n < 2] = np.nan
    mean_obj = np.where(g["n_diverged"] > 0, np.inf, mean_f)
    mean_obj = np.where(g["n_seeds"] == 0, np.nan, mean_obj)
    sign = cfg.estimator.sign
    g["lr"] = np.exp2(g["log2_lr"])
    g["objective"] = mean_obj
    g["mean"] = mean_obj * sign
    g["mean_finite"] = mean_f * sign
    g["se"] = np.where(g["n_diverged"] > 0, np.nan, se)
    first = t.drop_duplicates("cell").set_index("cell")
    for a in cell_axes:
        g[a] = g["cell"].map(first[a])
    g["group"] = g["cell"].map(first["group"])
    g = g.drop(columns=["fin_sum", "fin_sq", "n_finite"])
    cols = ["cell", "group", *cell_axes, "lr", "log2_lr", "n_trials", "n_seeds", "n_diverged", "n_failed",
            "n_running", "mean", "se", "mean_finite", "objective"]
    return g[cols].sort_values(["cell", "log2_lr"]).reset_index(drop=True)


def fit_optimum(xs: np.ndarray, Y: np.ndarray, halfwidth: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorized optimum of loss curves Y (rows) over the grid xs = log2(lr) (sorted).

    Returns (x_star, i_best, fitted): the grid argmin refined by a least-squares quadratic over the
    argmin and `halfwidth` finite neighbours on each side (vertex kept inside that window; the grid
    point itself when the window has < 3 finite points or no upward curvature). Rows without a
    finite value give NaN."""
    Y = np.atleast_2d(np.asarray(Y, dtype=float))
    B, K = Y.shape
    Yf = np.where(np.isfinite(Y), Y, np.inf)
    ib = np.argmin(Yf, axis=1)
    ok = np.isfinite(Yf[np.arange(B), ib])
    offs = np.arange(-halfwidth, halfwidth + 1)
    idx = ib[:, None] + offs[None, :]
    valid = (idx >= 0) & (idx < K)
    idxc = np.clip(idx, 0, K - 1)
    xw = xs[idxc] - xs[ib][:, None]
    yw = Y[np.arange(B)[:, None], idxc] - Yf[np.arange(B), ib][:, None]
    m = valid & np.isfinite(yw)
    xw0 = np.where(m, xw, 0.0)
    yw0 = np.where(m, yw, 0.0)
    P = np.stack([np.ones_like(xw0), xw0, xw0**2], axis=-1) * m[..., None]  # (B, W, 3)
    A = np.einsum("bwi,bwj->bij", P, P)
    rhs = np.einsum("bwi,bw->bi", P, yw0)
    npts = m.sum(axis=1)
    det = np.linalg.det(A)
    solvable = ok & (npts >= 3) & (np.abs(det) > 1e-12)
    coef = np.zeros((B, 3))
    if solvable.any():
        coef[solvable] = np.linalg.solve(A[solvable], rhs[solvable][..., None])[..., 0]
    curved = solvable & (coef[:, 2] > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        vertex = np.where(curved, -coef[:, 1] / (2 * coef[:, 2]), 0.0)
    lo = np.where(m, xw, np.inf).min(axis=1)
    hi = np.where(m, xw, -np.inf).max(axis=1)
    vertex = np.where(curved, np.clip(vertex, lo, hi), 0.0)
    xstar = np.where(ok, xs[ib] + vertex, np.nan)
    return xstar, ib, curved


def _optima(
    trials: pd.DataFrame, lr_curves: pd.DataFrame, cell_axes: list[str], cfg: AnalysisConfig
) -> tuple[pd.DataFrame, dict[int, np.ndarray]]:
    rng = np.random.default_rng(cfg.random_seed)
    fin = trials[trials["status"].isin(FINISHED)]
    by_cell = dict(tuple(fin.groupby("cell", sort=True)))
    rows = []
    boot: dict[int, np.ndarray] = {}
    for cell, cur in lr_curves.groupby("cell", sort=True):
        base = {a: cur[a].iloc[0] for a in cell_axes}
        counts = {
            "n_trials": int(cur["n_trials"].sum()),
            "n_diverged": int(cur["n_diverged"].sum()),
            "n_failed": int(cur["n_failed"].sum()),
            "n_running": int(cur["n_running"].sum()),
        }
        have = cur[cur["n_seeds"] > 0]
        row: dict[str, Any] = {"cell": int(cell), "group": int(cur["group"].iloc[0]), **base, **counts,
                               "n_lr": len(have), "n_seeds": 0, "n_seeds_at_best": 0,
                               "lr_best_grid": np.nan, "log2_lr_best_grid": np.nan, "lr_star": np.nan,
                               "log2_lr_star": np.nan, "log2_lr_star_lo": np.nan, "log2_lr_star_hi": np.nan,
                               "best_value": np.nan, "best_se": np.nan, "grid_step": np.nan, "fit": "none",
                               "edge": "", "suggestion": ""}
        if have.empty:
            row["suggestion"] = "no finished trials yet"
            rows.append(row)
            continue
        xs = have["log2_lr"].to_numpy()
        ys = have["objective"].to_numpy()
        step = float(np.median(np.diff(xs))) if len(xs) > 1 else np.nan
        row["grid_step"] = step
        tr = by_cell.get(cell)
        seeds = np.sort(tr[SEED].unique())
        row["n_seeds"] = len(seeds)
        if not np.isfinite(ys).any():
            row["suggestion"] = f"every LR diverged: extend the grid below lr={np.exp2(xs[0]):.3g}"
            row["edge"] = "low"
            rows.append(row)
            continue
        xstar, ib, curved = fit_optimum(xs, ys[None, :], cfg.fit_halfwidth)
        i = int(ib[0])
        best = have.iloc[i]
        row.update(lr_best_grid=float(best["lr"]), log2_lr_best_grid=float(xs[i]),
                   log2_lr_star=float(xstar[0]), lr_star=float(np.exp2(xstar[0])),
                   best_value=float(best["mean"]), best_se=float(best["se"]),
                   n_seeds_at_best=int(best["n_seeds"]), fit="quadratic" if curved[0] else "grid")
        if len(xs) > 1 and i == 0:
            row["edge"] = "low"
            row["suggestion"] = f"optimum at the smallest LR: extend the grid below lr={np.exp2(xs[0]):.3g}"
        elif len(xs) > 1 and i == len(xs) - 1:
            row["edge"] = "high"
            row["suggestion"] = f"optimum at the largest LR: extend the grid above lr={np.exp2(xs[-1]):.3g}"
        elif len(xs) == 1:
            row["edge"] = "both"
            row["suggestion"] = "a single LR: add LRs on both sides"
        # bootstrap over seeds: resample seed rows of the (seed x LR) matrix, paired across LRs
        pos = {x: j for j, x in enumerate(xs)}
        spos = {s: j for j, s in enumerate(seeds)}
        M = np.full((len(seeds), len(xs)), np.nan)
        for s, x, v in zip(tr[SEED].to_numpy(), tr["log2_lr"].to_numpy(), tr["objective"].to_numpy(),
                           strict=True):
            j = pos.get(x)
            if j is not None:
                M[spos[s], j] = v
        if len(seeds) >= 2 and cfg.n_boot > 0:
            pick = rng.integers(0, len(seeds), size=(cfg.n_boot, len(seeds)))
            R = M[pick]  # (B, S, K)
            present = ~np.isnan(R)
            n = present.sum(axis=1)
            with np.errstate(invalid="ignore"):
                means = np.where(present, R, 0.0).sum(axis=1) / np.where(n > 0, n, np.nan)
            xb, _, _ = fit_optimum(xs, means, cfg.fit_halfwidth)
            boot[int(cell)] = xb
            row["log2_lr_star_lo"], row["log2_lr_star_hi"] = boot_interval(
                float(xstar[0]), xb, int(best["n_seeds"]), cfg.ci_level)
        rows.append(row)
    optima = pd.DataFrame(rows)
    return optima, boot


def _verdicts(
    optima: pd.DataFrame,
    lr_curves: pd.DataFrame,
    boot: dict[int, np.ndarray],
    group_axes: list[str],
    scale_axes: list[str],
    cfg: AnalysisConfig,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    rule, z = cfg.rule, cfg.z
    vrows: list[dict[str, Any]] = []
    rrows: list[dict[str, Any]] = []
    if not scale_axes:
        return _empty_verdicts(group_axes), _empty_regret()
    for group, opt in optima.groupby("group", sort=True):
        gkey = {a: opt[a].iloc[0] for a in group_axes}
        usable = opt[np.isfinite(opt["log2_lr_star"].astype(float))]
        varying = [a for a in scale_axes if usable[a].nunique() > 1]
        # joint regression log2 lr* ~ 1 + log2(width) + log2(depth) over the group's cells
        coef = {a: (np.nan, np.nan, np.nan) for a in scale_axes}
        if varying and len(usable) > len(varying):
            X = np.column_stack([np.ones(len(usable))] + [np.log2(usable[a].astype(float)) for a in varying])
            y = usable["log2_lr_star"].to_numpy(dtype=float)
            beta = np.linalg.lstsq(X, y, rcond=None)[0]
            cells = usable["cell"].to_numpy()
            if all(int(c) in boot for c in cells):
                Yb = np.stack([boot[int(c)] for c in cells])  # (cells, B)
                good = np.isfinite(Yb).all(axis=0)
                if good.sum() >= 10:
                    bb = np.linalg.lstsq(X, Yb[:, good], rcond=None)[0]
                else:
                    bb = None
            else:
                bb = None
            n_eff = int(np.median(usable["n_seeds_at_best"])) if len(usable) else 0
            for j, a in enumerate(varying, start=1):
                lo, hi = boot_interval(float(beta[j]), bb[j], n_eff, cfg.ci_level) if bb is not None \
                    else (np.nan, np.nan)
                coef[a] = (float(beta[j]), float(lo), float(hi))
        for axis in scale_axes:
            others = [a for a in scale_axes if a != axis]
            scales = sorted(opt[axis].dropna().unique().tolist())
            if len(scales) < 2:
                continue
            max_shift, max_gshift = np.nan, np.nan
            for skey, sl in (opt.groupby(others, sort=True) if others else [((), opt)]):
                skey = skey if isinstance(skey, tuple) else (skey,)
                slice_key = dict(zip(others, skey, strict=True))
                sl = sl.sort_values(axis)
                s0 = sl.iloc[0]
                if not np.isfinite(s0["log2_lr_best_grid"]):
                    continue
                x0 = float(s0["log2_lr_best_grid"])
                for _, c in sl.iloc[1:].iterrows():
                    if not np.isfinite(c["log2_lr_star"]):
                        continue
                    step = c["grid_step"] if np.isfinite(c["grid_step"]) else s0["grid_step"]
                    if np.isfinite(step) and step > 0:
                        shift = abs(c["log2_lr_star"] - s0["log2_lr_star"]) / step
                        gshift = abs(c["log2_lr_best_grid"] - x0) / step
                        max_shift = np.nanmax([max_shift, shift])
                        max_gshift = np.nanmax([max_gshift, round(gshift, 6)])
                    cur = lr_curves[lr_curves["cell"] == c["cell"]]
                    cur = cur[cur["n_seeds"] > 0]
                    j = int(np.argmin(np.abs(cur["log2_lr"].to_numpy() - x0)))
                    used = cur.iloc[j]
                    best_obj = c["best_value"] * cfg.estimator.sign
                    reg = float(used["objective"] - best_obj)
                    same = used["log2_lr"] == c["log2_lr_best_grid"]
                    reg_se = 0.0 if same else float(np.hypot(used["se"], c["best_se"]))
                    rrows.append({"group": int(group), **gkey, "axis": axis, "slice": slice_key,
                                  "scale": c[axis], "cell": int(c["cell"]), "lr_tuned": float(np.exp2(x0)),
                                  "lr_used": float(used["lr"]), "value": float(used["mean"]),
                                  "best_value": float(c["best_value"]), "regret": reg, "regret_se": reg_se})
            reg = [r for r in rrows if r["group"] == group and r["axis"] == axis]
            if reg:
                worst = max(reg, key=lambda r: (r["regret"], -np.nan_to_num(r["regret_se"])))
                max_reg = worst["regret"]
                regs = np.array([r["regret"] for r in reg], dtype=float)
                ses = np.array([r["regret_se"] for r in reg], dtype=float)
                with np.errstate(invalid="ignore"):
                    lows = np.where(np.isinf(regs), regs, regs - z * ses)
                    highs = np.where(np.isinf(regs), regs, regs + z * ses)
                # a bound is known when every scale's bound is (or one scale's lower bound is already inf)
                regret_lo = math.inf if np.isposinf(lows).any() else (
                    float(np.max(lows)) if np.isfinite(lows).all() else np.nan)
                regret_hi = float(np.max(highs)) if not np.isnan(highs).any() else np.nan
            else:
                max_reg = regret_lo = regret_hi = np.nan
            slope, slo, shi = coef[axis]
            involved = opt[opt[axis].isin(scales)]
            n_edge = int((involved["edge"] != "").sum())
            at_best = involved["n_seeds_at_best"]
            min_seeds = int(at_best.min()) if len(at_best) else 0
            n_scales = int(usable[axis].nunique())
            verdict, reasons = _decide(rule, n_scales, min_seeds, n_edge, slope, slo, shi, regret_lo, regret_hi,
                                       involved)
            vrows.append({"group": int(group), **gkey, "axis": axis, "verdict": verdict, "reasons": reasons,
                          "n_scales": n_scales, "scales": scales, "slope": slope, "slope_lo": slo,
                          "slope_hi": shi, "max_shift_steps": max_shift, "max_shift_grid_steps": max_gshift,
                          "max_regret": max_reg, "max_regret_lo": regret_lo, "max_regret_hi": regret_hi,
                          "min_seeds": min_seeds, "n_edge": n_edge})
    verdicts = pd.DataFrame(vrows) if vrows else _empty_verdicts(group_axes)
    regret = pd.DataFrame(rrows) if rrows else _empty_regret()
    return verdicts, regret


def _decide(
    rule: VerdictRule, n_scales: int, min_seeds: int, n_edge: int, slope: float, slo: float, shi: float,
    regret_lo: float, regret_hi: float, involved: pd.DataFrame,
) -> tuple[str, list[str]]:
    reasons: list[str] = []
    tol = rule.slope_tol
    if n_scales < rule.min_scales:
        return "inconclusive", [f"optima at {n_scales} scale(s); the rule needs {rule.min_scales}"]
    if min_seeds < rule.min_seeds:
        return "inconclusive", [f"{min_seeds} seed(s) at some optimum; the rule needs {rule.min_seeds}"]
    slope_bad = np.isfinite(slo) and (slo > tol or shi < -tol)
    slope_ok = np.isfinite(slo) and -tol <= slo and shi <= tol
    regret_bad = bool(not np.isnan(regret_lo) and regret_lo > rule.max_regret)
    regret_ok = np.isfinite(regret_hi) and regret_hi <= rule.max_regret
    if slope_bad:
        reasons.append(f"slope interval [{slo:.2f}, {shi:.2f}] lies outside ±{tol:g}")
    if regret_bad and math.isinf(regret_lo):
        reasons.append("the LR tuned at the smallest scale diverges at a larger scale")
    elif regret_bad:
        reasons.append(f"regret of the smallest-scale LR exceeds {rule.max_regret:g} (lower bound {regret_lo:.3g})")
    if slope_bad or regret_bad:
        return "does not transfer", reasons
    if n_edge:
        edges = involved[involved["edge"] != ""]
        where = "; ".join(sorted(set(edges["suggestion"])))
        return "inconclusive", [f"{n_edge} cell(s) have their optimum on the grid edge: {where}"]
    if slope_ok and regret_ok:
        return "transfers", [f"slope interval [{slo:.2f}, {shi:.2f}] within ±{tol:g}; "
                             f"regret ≤ {rule.max_regret:g} (upper bound {regret_hi:.3g})"]
    if not slope_ok:
        reasons.append(f"slope interval [{slo:.2f}, {shi:.2f}] straddles ±{tol:g}" if np.isfinite(slo)
                       else "no slope interval (too few bootstrap replicates)")
    if not regret_ok:
        reasons.append(f"regret upper bound {regret_hi:.3g} above {rule.max_regret:g}")
    return "inconclusive", reasons


# -- helpers -------------------------------------------------------------------------------------


def t_quantile(p: float, df: int) -> float:
    """Student-t quantile (no scipy): exact for df 1 and 2, Cornish-Fisher expansion above
    (Abramowitz & Stegun 26.7.5; error < 0.01 at df=3, p=0.975)."""
    if df < 1:
        return math.nan
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:
        return (2 * p - 1) / math.sqrt(2 * p * (1 - p))
    z = NormalDist().inv_cdf(p)
    v = float(df)
    return (z + (z**3 + z) / (4 * v) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * v**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * v**3)
            + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * v**4))


def boot_interval(point: float, reps: np.ndarray, n_seeds: int, level: float) -> tuple[float, float]:
    """Interval from bootstrap-over-seeds replicates: point ± t(n-1) * sqrt(n/(n-1)) * sd(reps).

    A plain percentile interval is far too narrow with the 2-5 seeds sweeps have (a bootstrap of
    n values underestimates the variance by (n-1)/n and the normal quantile ignores that the SE
    itself is estimated from n values); the t quantile with n-1 degrees of freedom corrects both."""
    reps = reps[np.isfinite(reps)]
    if n_seeds < 2 or len(reps) < 2 or not np.isfinite(point):
        return math.nan, math.nan
    sd = float(np.std(reps, ddof=1)) * math.sqrt(n_seeds / (n_seeds - 1))
    half = t_quantile(0.5 + level / 2, n_seeds - 1) * sd
    return point - half, point + half



def _empty_verdicts(group_axes: list[str]) -> pd.DataFrame:
    return pd.DataFrame(columns=["group", *group_axes, "axis", "verdict", "reasons", "n_scales", "scales",
                                 "slope", "slope_lo", "slope_hi", "max_shift_steps", "max_shift_grid_steps",
                                 "max_regret", "max_regret_lo", "max_regret_hi", "min_seeds", "n_edge"])


def _empty_regret() -> pd.DataFrame:
    return pd.DataFrame(columns=["group", "axis", "slice", "scale", "cell", "lr_tuned", "lr_used", "value",
                                 "best_value", "regret", "regret_se"])


def _hashable(col: pd.Series) -> pd.Series:
    if col.dtype == object:
        return col.map(lambda v: json.dumps(v, sort_keys=True) if isinstance(v, list | dict | tuple) else v)
    return col


def _codes(df: pd.DataFrame, axes: list[str]) -> np.ndarray:
    if not axes:
        return np.zeros(len(df), dtype="int64")
    return df.groupby(axes, sort=True, dropna=False).ngroup().to_numpy()


def _short(axis: str) -> str:
    return {"optimizer.name": "opt", "parametrization.kind": "param", "optimizer.lr": "lr"}.get(axis, axis)


def _num(v: Any) -> float | str | None:
    """JSON number: NaN/None -> null, +-inf -> "inf"/"-inf" (strict JSON has no infinities)."""
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    if math.isnan(f):
        return None
    if math.isinf(f):
        return "inf" if f > 0 else "-inf"
    return f


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        return _num(v)
    return v


def _stringify_objects(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    for c in out.columns:
        if out[c].dtype == object and out[c].map(lambda v: isinstance(v, list | dict | tuple)).any():
            out[c] = out[c].map(lambda v: json.dumps(v, default=str) if isinstance(v, list | dict | tuple) else v)
    return out
