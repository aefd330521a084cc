"""Benchmark: `hpt analyze` on a synthetic store of 10,000 trials x 1,000 logged steps.

    .venv/bin/python benchmarks/bench_analysis.py [--trials 10000] [--steps 1000] [--store DIR]

Builds (once, cached in --store) a run directory in the real store layout: 4 optimizers x 2
parametrizations x 5 widths x 5 depths x 10 LRs x 5 seeds = 10,000 trials, each with a
1,000-row curve.parquet (val_loss every 10th row), ~3% of them diverged. Then times, each in a
fresh process (wall time and peak RSS of that process):

  analyze/last        `python -m results.cli analyze STORE` (plots included); the `last` estimator
                      reads final_val_loss from status.json and opens no curve file
  analyze/mean_last_k the same with --estimator mean_last_k: reads the val_loss column of all
                      10,000 curve files through one pyarrow.dataset scan (filter: logged evals)
  analyze/ewm         --estimator ewm (same read path)
  baseline/pandas     the straightforward way: load_trials + load_curves (every column of every
                      file into one DataFrame), groupby trial -> last eval, groupby cell x LR ->
                      mean, idxmin per cell (no bootstrap, no fit, no plots)

and prints a table with the ratio to the baseline. Targets: <= 10 s and <= 2 GB on 2 cores.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

OPTIMIZERS = {"adamw": 0.0, "sgd": -1.0, "muon": 0.0, "lion": -0.5}
PARAMS = {"sp": -0.5, "mup": 0.0}
WIDTHS = (64, 128, 256, 512, 1024)
DEPTHS = (2, 4, 8, 16, 32)
LOG2_LRS = tuple(range(-13, -3))
SEEDS = tuple(range(5))


def _configs(n_trials: int) -> list[dict]:
    out = []
    for opt, dw in OPTIMIZERS.items():
        for pk, pw in PARAMS.items():
            for w in WIDTHS:
                for d in DEPTHS:
                    for x in LOG2_LRS:
                        for s in SEEDS:
                            c = -8.0 + (dw + pw) * math.log2(w / 64) - 0.25 * math.log2(d / 2)
                            out.append({"_c": c, "_x": x, "width": w, "depth": d, "seed": s,
                                        "workload": {"kind": "gpt2", "steps": 0, "batch_size": 32, "eval_every": 10,
                                                     "log_every": 1},
                                        "parametrization": {"kind": pk, "base_width": 64, "alpha": 1.0},
                                        "optimizer": {"name": opt, "lr": 2.0**x, "weight_decay": 0.0,
                                                      "hparams": {}}})
    return out[:n_trials]


def _write_chunk(args: tuple[str, list[dict], int, int]) -> int:
    from results.store import RunStore

    root, configs, steps, seed = args
    store = RunStore(root)
    rng = np.random.default_rng(seed)
    step = np.arange(1, steps + 1, dtype=np.int64)
    for cfg in configs:
        c, x = cfg.pop("_c"), cfg.pop("_x")
        cfg["workload"]["steps"] = steps
        tid = hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:16]
        final = 2.0 + 0.05 * (x - c) ** 2 + 0.01 * rng.standard_normal()
        diverged = x - c > 3.5
        n = steps // 2 if diverged else steps
        train = final + 3.0 * np.exp(-step[:n] / (steps / 5)) + 0.02 * rng.standard_normal(n)
        val = np.full(n, np.nan)
        val[9::10] = train[9::10] + 0.01
        if diverged:
            train[-1] = np.inf
            val[-1] = np.nan
        table = pa.table({"trial_id": pa.array([tid] * n), "step": step[:n], "items": step[:n] * 2048,
                          "train_loss": train, "val_loss": val, "lr": np.full(n, 2.0**x),
                          "grad_norm": np.ones(n), "wall_time_s": step[:n] * 0.05})
        store.write_json(store.trial_path(tid, "config.json"), {"trial_id": tid, **cfg})
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        store.write_bytes(store.trial_path(tid, "curve.parquet"), buf.getvalue())
        evals = val[~np.isnan(val)]
        summary = {"final_train_loss": float(train[-1]), "steps_done": int(n), "items_seen": int(n * 2048),
                   "wall_time_s": float(n * 0.05)}
        if diverged:
            summary["diverged_at_step"] = int(n)
        else:
            summary.update(final_val_loss=float(evals[-1]), best_val_loss=float(evals.min()))
        store.write_json(store.trial_path(tid, "status.json"),
                         {"status": "diverged" if diverged else "completed", "error": None, "summary": summary,
                          "updated": time.time()})
    return len(configs)


def build_store(root: str, n_trials: int, steps: int) -> float:
    marker = Path(root) / f".complete-{n_trials}-{steps}"
    if marker.exists():
        return 0.0
    t0 = time.perf_counter()
    configs = _configs(n_trials)
    chunks = [(root, configs[i::8], steps, i) for i in range(8)]
    with ProcessPoolExecutor(max_workers=2) as pool:
        done = sum(pool.map(_write_chunk, chunks))
    Path(root, "spec.yaml").write_text("name: bench\n")
    assert done == n_trials
    marker.write_text("ok")
    return time.perf_counter() - t0


BASELINE = r"""
import sys, numpy as np, pandas as pd
from results.store import load_trials, load_curves
run = sys.argv[1]
t = load_trials(run)
cur = load_curves(run)
last = cur.dropna(subset=["val_loss"]).groupby("trial_id")["val_loss"].last()
t["value"] = t["trial_id"].map(last)
t.loc[t["status"] == "diverged", "value"] = np.inf
cells = ["optimizer.name", "parametrization.kind", "width", "depth"]
m = t.groupby(cells + ["optimizer.lr"])["value"].mean().reset_index()
best = m.loc[m.groupby(cells)["value"].idxmin()]
print(len(best), "cells")
"""

MEASURE = r"""
import resource, runpy, sys, time
t0 = time.perf_counter()
sys.argv = sys.argv[1:]
try:
    if sys.argv[0] == "-c":
        code = sys.argv[1]; sys.argv = ["-c", *sys.argv[2:]]; exec(compile(code, "<baseline>", "exec"), {})
    else:
        runpy.run_module(sys.argv[0], run_name="__main__")
except SystemExit as e:
    if e.code not in (0, None): raise
sys.stderr.write(f"@@ {time.perf_counter() - t0:.3f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\n")
"""


def measure(argv: list[str]) -> tuple[float, float, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", MEASURE, *argv], capture_output=True, text=True, env=env,
                          cwd=REPO, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("@@ ")][-1]
    inner, rss_kb = line.split()[1:]
    del inner
    return wall, int(rss_kb) / 1024, proc.stdout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=1_000)
    ap.add_argument("--store", default="/tmp/hpt_bench_analysis")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    root = os.path.join(args.store, f"run_{args.trials}x{args.steps}")
    built = build_store(root, args.trials, args.steps)
    size = sum(f.stat().st_size for f in Path(root).rglob("*") if f.is_file()) / 2**20
    print(f"store: {root}: {args.trials} trials x {args.steps} steps, {size:.0f} MiB"
          + (f" (built in {built:.0f} s)" if built else " (cached)"))
    out = os.path.join(args.store, "out")
    cases = {
        "analyze/last (+plots)": ["results.cli", "analyze", root, "--out", out],
        "analyze/last --json --no-plots": ["results.cli", "analyze", root, "--out", out, "--json", "--no-plots"],
        "analyze/mean_last_k (+plots)": ["results.cli", "analyze", root, "--out", out, "--estimator", "mean_last_k"],
        "analyze/ewm --no-plots": ["results.cli", "analyze", root, "--out", out, "--estimator", "ewm", "--no-plots"],
        "baseline/pandas groupby": ["-c", BASELINE, root],
    }
    results = {}
    for name, argv in cases.items():
        best = None
        for _ in range(args.repeat):
            wall, rss, _ = measure(argv)
            best = (wall, rss) if best is None or wall < best[0] else best
        results[name] = best
        print(f"  {name:34s} {best[0]:7.2f} s  {best[1]:7.0f} MiB", flush=True)
    base = results["baseline/pandas groupby"]
    print()
    print(f"{'case':34s} {'wall s':>8s} {'peak MiB':>9s} {'x baseline time':>16s} {'x baseline mem':>15s} target")
    for name, (wall, rss) in results.items():
        ok = "" if name.startswith("baseline") else ("ok" if wall <= 10 and rss <= 2048 else "MISSED (10 s, 2 GB)")
        print(f"{name:34s} {wall:8.2f} {rss:9.0f} {wall / base[0]:16.2f} {rss / base[1]:15.2f} {ok}")
    print("\nwall = whole process (interpreter + imports + reading + analysis + writing); peak = max RSS.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
