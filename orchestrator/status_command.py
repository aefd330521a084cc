"""`hpt status RUN_DIR [--json]`: trials per status and each failure's error."""

from __future__ import annotations

import argparse
import json
from typing import Any

from orchestrator.errors import EXIT_FAILED, EXIT_OK, InputError
from results.store import STATUSES, RunStore


def collect(run_dir: str) -> dict[str, Any]:
    """Status of every trial of the run's spec (and any other trial the store holds)."""
    from orchestrator.run_command import load_run_spec
    from orchestrator.runner import driver_alive, plan_sweep, trial_label

    store = RunStore(run_dir)
    if not store.exists():
        raise InputError(f"{run_dir}: no such run directory")
    labels: dict[str, str] = {}
    expected: list[str] = []
    name = None
    if store.read_spec() is not None:
        spec, _ = load_run_spec(run_dir)
        plan = plan_sweep(spec, run_dir)
        name = spec.name
        expected = [c.trial_id for c in plan.configs]
        labels = {c.trial_id: trial_label(c) for c in plan.configs}
    alive = driver_alive(store)
    trials: dict[str, dict[str, Any]] = {}
    for tid in dict.fromkeys([*expected, *store.trial_ids()]):
        st = store.status(tid) or {"status": "pending", "error": None, "summary": {}}
        status = st["status"]
        if status == "running" and not alive:
            status = "interrupted"
        trials[tid] = {"trial_id": tid, "status": status, "label": labels.get(tid, ""),
                       "in_spec": tid in labels or not expected, "error": st.get("error"),
                       "summary": st.get("summary") or {}}
    counts = {s: 0 for s in (*STATUSES, "interrupted")}
    for t in trials.values():
        counts[t["status"]] = counts.get(t["status"], 0) + 1
    return {"run_dir": run_dir, "name": name, "driver_running": alive, "total": len(trials), "counts": counts,
            "failures": [t for t in trials.values() if t["status"] == "failed"], "trials": list(trials.values())}


def _last_line(error: str | None) -> str:
    lines = [ln for ln in (error or "").strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "(no error text)"


def status(args: argparse.Namespace) -> int:
    info = collect(args.run_dir)
    if args.json:
        print(json.dumps(info, indent=1, default=str))
    else:
        head = f"{info['name'] or args.run_dir}: {info['total']} trials"
        head += " (a driver is running)" if info["driver_running"] else ""
        print(head)
        for s, n in info["counts"].items():
            if n:
                print(f"  {s:12s} {n}")
        for t in info["failures"]:
            print(f"\nfailed {t['trial_id']} {t['label']}\n  {_last_line(t['error'])}")
            if args.verbose and t["error"]:
                print("  " + t["error"].rstrip().replace("\n", "\n  "))
        if info["failures"]:
            print(f"\n(`hpt status {args.run_dir} --verbose` prints the tracebacks; "
                  f"`hpt rerun {args.run_dir} --failed` reruns them)")
    return EXIT_FAILED if info["failures"] else EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="trials per status and each failure's error",
                       description="Counts per status (pending, running, completed, diverged, failed, "
                                   "interrupted) and each failed trial's error. Exit 1 if any trial failed.")
    p.add_argument("run_dir", help="run directory")
    p.add_argument("--json", action="store_true", help="machine-readable output (full tracebacks)")
    p.add_argument("--verbose", "-v", action="store_true", help="print full tracebacks")
    p.set_defaults(func=status)
