"""`hpt analyze` and `hpt report`: argparse sub-commands that `orchestrator.cli` registers.

    add_analyze_parser(subparsers)   # hpt analyze RUN_DIR [--out DIR] [--metric ...] [--json]
    add_report_parser(subparsers)    # hpt report RUN_DIR [--out FILE]

Both are also runnable before they are wired: `python -m results.cli analyze RUN_DIR ...`.
Exit codes: 0 ok, 2 bad input (run dir missing, no trials, bad option value).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any

from results.analysis import ESTIMATORS, METRICS, Analysis, AnalysisConfig, Estimator, VerdictRule, _short, analyze
from results.store import RunStore, load_trials


def _add_analysis_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", metavar="RUN_DIR", help="run directory (local path or pyarrow.fs URI)")
    g = p.add_argument_group("final metric per trial")
    g.add_argument("--metric", default="val_loss", choices=sorted(METRICS), help="curve column (default val_loss)")
    g.add_argument("--estimator", default="last", choices=ESTIMATORS,
                   help="last eval | mean of the last k evals | EWM-smoothed final value (default last)")
    g.add_argument("--k", type=int, default=3, help="evals averaged by mean_last_k (default 3)")
    g.add_argument("--halflife", type=float, default=2.0, help="EWM half-life in evals (default 2)")
    r = p.add_argument_group("verdict rule")
    r.add_argument("--slope-tol", type=float, default=VerdictRule.slope_tol,
                   help="|slope of log2 lr* vs log2 scale| that still transfers (default %(default)s)")
    r.add_argument("--max-regret", type=float, default=VerdictRule.max_regret,
                   help="regret (metric units) that still transfers (default %(default)s)")
    r.add_argument("--min-seeds", type=int, default=VerdictRule.min_seeds,
                   help="seeds needed at every optimum for a verdict (default %(default)s)")
    s = p.add_argument_group("statistics")
    s.add_argument("--n-boot", type=int, default=200, help="bootstrap replicates over seeds (default 200)")
    s.add_argument("--ci", type=float, default=0.95, help="interval level (default 0.95)")
    s.add_argument("--fit-halfwidth", type=int, default=1,
                   help="grid points each side of the argmin used by the quadratic fit (default 1)")


def add_analyze_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("analyze", help="optimum table, transfer verdicts, plots and analysis.parquet",
                              description="Reduce a run's curves to optimal-LR tables and transfer verdicts.")
    _add_analysis_options(p)
    p.add_argument("--out", default=None, help="output directory (default RUN_DIR/analysis)")
    p.add_argument("--json", action="store_true",
                   help="print the analysis as JSON (shape: docs/analysis.md) instead of tables")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG/SVG figures")
    p.set_defaults(func=run_analyze)
    return p


def add_report_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("report", help="one self-contained HTML page for a run",
                              description="Write a self-contained HTML report (plots embedded) for a run.")
    _add_analysis_options(p)
    p.add_argument("--out", default=None, help="HTML file (default RUN_DIR/report.html)")
    p.set_defaults(func=run_report)
    return p


def _config(args: argparse.Namespace) -> AnalysisConfig:
    return AnalysisConfig(
        estimator=Estimator(kind=args.estimator, metric=args.metric, k=args.k, halflife=args.halflife),
        rule=VerdictRule(slope_tol=args.slope_tol, max_regret=args.max_regret, min_seeds=args.min_seeds),
        ci_level=args.ci, n_boot=args.n_boot, fit_halfwidth=args.fit_halfwidth,
    )


def _load(args: argparse.Namespace) -> Analysis | int:
    run_dir = args.run_dir
    if not RunStore(run_dir).exists():
        print(f"error: RUN_DIR {run_dir!r} does not exist (give the run directory that `hpt run` wrote)",
              file=sys.stderr)
        return 2
    try:
        cfg = _config(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not 0 < cfg.ci_level < 1 or cfg.n_boot < 0 or cfg.fit_halfwidth < 1:
        print("error: --ci must be in (0, 1), --n-boot >= 0, --fit-halfwidth >= 1", file=sys.stderr)
        return 2
    trials = load_trials(run_dir)
    if trials.empty:
        print(f"error: RUN_DIR {run_dir!r} has no trials (no trials/<id>/config.json); "
              "run the sweep first (`hpt run SPEC`)", file=sys.stderr)
        return 2
    return analyze(run_dir, cfg, trials=trials)


def run_analyze(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    an = _load(args)
    if isinstance(an, int):
        return an
    out = args.out or os.path.join(an.run_dir, "analysis")
    files = an.write_parquet(out)
    figs: dict[str, list[str]] = {}
    if not args.no_plots:
        from results import plots

        figs = plots.write_all(an, out)
    if args.json:
        doc = an.to_json()
        doc["files"] = {"tables": files, "figures": figs}
        json.dump(doc, sys.stdout, indent=1, allow_nan=False)
        sys.stdout.write("\n")
        return 0
    print(format_text(an))
    print(f"\nwrote {len(files)} tables and {sum(len(v) for v in figs.values())} figure files to {out} "
          f"({time.perf_counter() - t0:.1f} s)")
    return 0


def run_report(args: argparse.Namespace) -> int:
    an = _load(args)
    if isinstance(an, int):
        return an
    from results.report import write_report

    path = write_report(an, args.out or os.path.join(an.run_dir, "report.html"))
    print(f"wrote {path}")
    return 0


# -- terminal tables -----------------------------------------------------------------------------


def _f(v: Any, nd: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return f"{v:.{nd}g}"
    return str(v)


def _columns(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(out)


def format_text(an: Analysis) -> str:
    c = an.counts
    lines = [f"run {an.run_dir}: {c['trials']} trials — {c['completed']} completed, {c['diverged']} diverged, "
             f"{c['failed']} failed, {c['running'] + c['pending']} running/pending; {c['cells']} cells",
             f"final metric: {an.estimator.label}; intervals {an.config.ci_level:.0%} bootstrap over seeds",
             "", "OPTIMUM PER CELL"]
    header = [_short(a) for a in an.cell_axes] + ["lr*", "log2 lr* [CI]", "best", "±SE", "seeds", "div", "fail",
                                                 "run", "edge"]
    rows = []
    for _, o in an.optima.iterrows():
        rows.append([str(o[a]) for a in an.cell_axes] + [
            _f(o["lr_star"]), f"{_f(o['log2_lr_star'])} [{_f(o['log2_lr_star_lo'])}, {_f(o['log2_lr_star_hi'])}]",
            _f(o["best_value"], 4), _f(o["best_se"], 2), str(o["n_seeds"]), str(o["n_diverged"]),
            str(o["n_failed"]), str(o["n_running"]), o["edge"] or ""])
    lines.append(_columns(header, rows))
    sugg = sorted({s for s in an.optima["suggestion"] if s})
    lines += [f"  note: {s}" for s in sugg]
    lines += ["", "TRANSFER VERDICTS"]
    if an.verdicts.empty:
        lines.append("  (no width/depth axis varies: nothing to transfer across)")
    else:
        header = [_short(a) for a in an.group_axes] + ["axis", "verdict", "slope [CI]", "max shift", "max regret [CI]"]
        rows = []
        for _, v in an.verdicts.iterrows():
            rows.append([str(v[a]) for a in an.group_axes] + [
                v["axis"], v["verdict"].upper(),
                f"{_f(v['slope'], 2)} [{_f(v['slope_lo'], 2)}, {_f(v['slope_hi'], 2)}]",
                f"{_f(v['max_shift_steps'], 2)} steps",
                f"{_f(v['max_regret'], 3)} [{_f(v['max_regret_lo'], 3)}, {_f(v['max_regret_hi'], 3)}]"])
        lines.append(_columns(header, rows))
        for _, v in an.verdicts.iterrows():
            who = an.group_label(int(v["group"]))
            lines.append(f"  {who} / {v['axis']}: {'; '.join(v['reasons'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m results.cli")
    sub = parser.add_subparsers(dest="command", required=True)
    add_analyze_parser(sub)
    add_report_parser(sub)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
