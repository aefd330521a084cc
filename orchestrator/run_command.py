"""`hpt run SPEC` (run what the store lacks) and `hpt rerun RUN_DIR --failed`."""

from __future__ import annotations

import argparse
import sys

from orchestrator.errors import EXIT_FAILED, EXIT_OK, InputError
from orchestrator.runner import (
    RayOptions,
    SweepPlan,
    display_status,
    execute,
    plan_sweep,
    trial_label,
    validate_address,
)
from orchestrator.spec import SweepSpec, check_local_resources, load_spec, parse_spec_text
from results.store import RunStore

PLAN_MARK = {"new": "new", "running": "interrupted", "completed": "done", "diverged": "done (diverged)",
             "failed": "failed"}


def print_plan(plan: SweepPlan, out: object = None) -> None:
    """The trial table of `--dry-run`: id, the point, its state in the store."""
    out = out or sys.stdout
    rows = [(c.trial_id, trial_label(c), PLAN_MARK.get(plan.status(c), plan.status(c))) for c in plan.configs]
    width = max((len(r[1]) for r in rows), default=10)
    print(f"{'trial_id':16s}  {'trial':{width}s}  state", file=out)
    for tid, label, state in rows:
        print(f"{tid:16s}  {label:{width}s}  {state}", file=out)
    counts = plan.counts()
    to_run = len(plan.to_run())
    print(f"\n{len(plan.configs)} trials: {counts['new']} new, "
          f"{counts['completed'] + counts['diverged']} done ({counts['diverged']} diverged), "
          f"{counts['failed']} failed, {counts['running']} interrupted; "
          f"`hpt run` would start {to_run}", file=out)
    print(f"run dir: {plan.run_dir}", file=out)


def _check_concurrency(n: int | None) -> None:
    if n is not None and n < 1:
        raise InputError(f"--max-concurrent={n}: must be >= 1")


def _ray_options(args: argparse.Namespace) -> RayOptions:
    validate_address(args.address)
    return RayOptions(address=args.address, include_dashboard=args.dashboard, dashboard_host=args.dashboard_host)


def _finish(plan_statuses: dict[str, str], ran: int, wall: float, run_dir: str, skipped_failed: int = 0,
            tuners: int = 1) -> int:
    counts: dict[str, int] = {}
    for s in plan_statuses.values():
        counts[s] = counts.get(s, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    through = f" through {tuners} successive Tuners" if tuners > 1 else ""
    print(f"ran {ran} trials in {wall:.1f} s{through}; sweep now: {summary or 'empty'}")
    if counts.get("failed"):
        print(f"{counts['failed']} failed; see `hpt status {run_dir}` and `hpt rerun {run_dir} --failed`")
    if skipped_failed:
        print(f"({skipped_failed} of them failed in an earlier run and were not rerun)")
    return EXIT_FAILED if counts.get("failed") else EXIT_OK


def _run_plan(spec: SweepSpec, plan: SweepPlan, trials: list, args: argparse.Namespace, spec_text: str | None,
              skipped_failed: int = 0) -> int:
    outcome = execute(spec, plan.run_dir, trials, spec_text=spec_text, ray_options=_ray_options(args),
                      max_concurrent=args.max_concurrent, progress=None if not args.no_progress else False)
    final = {c.trial_id: display_status(plan.stored.get(c.trial_id)) for c in plan.configs}
    final.update(outcome.statuses)
    return _finish(final, len(outcome.ran), outcome.wall_s, plan.run_dir, skipped_failed, outcome.tuners)


def run(args: argparse.Namespace) -> int:
    spec, text = load_spec(args.spec)
    _check_concurrency(args.max_concurrent)
    validate_address(args.address)
    if args.address is None:
        check_local_resources(spec, args.spec)
    plan = plan_sweep(spec, spec.run_dir(args.store))
    if args.dry_run:
        print_plan(plan)
        return EXIT_OK
    trials = plan.to_run()
    skipped = len(plan.select(("failed",)))
    if not trials:
        print(f"nothing to run: all {len(plan.configs)} trials of {spec.name} are in the store ({plan.run_dir})")
        return _finish({c.trial_id: plan.status(c) for c in plan.configs}, 0, 0.0, plan.run_dir, skipped)
    print(f"{spec.name}: {len(trials)} of {len(plan.configs)} trials to run -> {plan.run_dir}", flush=True)
    return _run_plan(spec, plan, trials, args, text, skipped)


def load_run_spec(run_dir: str) -> tuple[SweepSpec, str]:
    store = RunStore(run_dir)
    if not store.exists():
        raise InputError(f"{run_dir}: no such run directory")
    text = store.read_spec()
    if text is None:
        raise InputError(f"{run_dir}: no spec.yaml in this run directory (not made by `hpt run`?)")
    return parse_spec_text(text, f"{run_dir}/spec.yaml"), text


def rerun(args: argparse.Namespace) -> int:
    if not args.failed:
        raise InputError("say what to rerun: `hpt rerun RUN_DIR --failed`")
    _check_concurrency(args.max_concurrent)
    spec, _ = load_run_spec(args.run_dir)
    validate_address(args.address)
    if args.address is None:
        check_local_resources(spec, f"{args.run_dir}/spec.yaml")
    plan = plan_sweep(spec, args.run_dir)
    trials = plan.select(("failed",))
    if not trials:
        print(f"no failed trials in {args.run_dir}")
        return _finish({c.trial_id: plan.status(c) for c in plan.configs}, 0, 0.0, plan.run_dir)
    print(f"{spec.name}: rerunning {len(trials)} failed trials", flush=True)
    return _run_plan(spec, plan, trials, args, None)


def _ray_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--address", default=None,
                   help="Ray cluster to join: auto (on a cluster node), ray://HOST:10001 or HOST:6379 "
                        "(default: start an embedded Ray on this machine)")
    p.add_argument("--max-concurrent", type=int, default=None, help="trials at once (overrides the spec)")
    p.add_argument("--dashboard", action="store_true", help="start the Ray dashboard (embedded Ray only)")
    p.add_argument("--dashboard-host", default="127.0.0.1",
                   help="address the dashboard listens on (default 127.0.0.1: this machine only)")
    p.add_argument("--no-progress", action="store_true", help="one line per finished trial instead of a bar")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the trials of a sweep spec that the store lacks",
                       description="Expand SPEC's grid, skip every trial the store has finished "
                                   "(completed or diverged) or saw fail, and run the rest on Ray Tune. "
                                   "Exit 0: all trials completed or diverged; 1: some failed; 2: bad input.")
    p.add_argument("spec", help="sweep spec YAML")
    p.add_argument("--store", default=None, help="store root (overrides the spec's `store`); run dir = STORE/NAME")
    p.add_argument("--dry-run", action="store_true", help="print the trial table (new / done / failed), write nothing")
    _ray_args(p)
    p.set_defaults(func=run)

    r = sub.add_parser("rerun", help="rerun the failed trials of a run directory",
                       description="Rerun trials whose status is `failed`, under the spec's concurrency limit.")
    r.add_argument("run_dir", help="run directory (made by `hpt run`)")
    r.add_argument("--failed", action="store_true", help="rerun the failed trials")
    _ray_args(r)
    r.set_defaults(func=rerun)
