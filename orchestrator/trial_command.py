"""`hpt trial CONFIG.yaml --out DIR`: one trial without Ray, for debugging a configuration."""

from __future__ import annotations

import argparse
import sys

import yaml
from pydantic import ValidationError

from orchestrator.errors import EXIT_FAILED, EXIT_OK, InputError, describe_validation_error
from workloads.config import RunOptions, TrialConfig


def load_trial_config(path: str) -> TrialConfig:
    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of trial fields at the top level, got {type(data).__name__}")
    try:
        return TrialConfig.model_validate(data)
    except ValidationError as exc:
        raise InputError(describe_validation_error(exc, path)) from None


def run(args: argparse.Namespace) -> int:
    from results.store import RunStore
    from workloads.trial import run_trial

    config = load_trial_config(args.config)
    if args.explain:
        from workloads.explain import explain

        print(explain(config))
        return EXIT_OK
    store = RunStore(args.out)
    result = run_trial(
        config,
        store.writer(config.trial_id),
        RunOptions(device=args.device, threads=args.threads, checkpoint_every=args.checkpoint_every),
    )
    s = result.summary
    print(f"trial {result.trial_id}: {result.status} after {s.get('steps_done', 0)} steps "
          f"({s.get('wall_time_s', 0):.1f} s)")
    if "final_val_loss" in s:
        print(f"  val loss {s['final_val_loss']:.4f} (best {s['best_val_loss']:.4f}), "
              f"train loss {s.get('final_train_loss', float('nan')):.4f}")
    print(f"  results: {store.trial_path(result.trial_id)}")
    if result.error:
        print(result.error, file=sys.stderr)
    return EXIT_FAILED if result.status == "failed" else EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("trial", help="run one trial without Ray (debugging)",
                       description="Run one trial config (YAML: workload, width, depth, seed, "
                                   "parametrization, optimizer) in this process and store its results.")
    p.add_argument("config", help="trial config YAML")
    p.add_argument("--out", default="runs/trials", help="run directory (local path or pyarrow.fs URI)")
    p.add_argument("--device", default="auto", help="auto|cpu|cuda")
    p.add_argument("--threads", type=int, default=None, help="torch threads")
    p.add_argument("--checkpoint-every", type=int, default=0, help="checkpoint every N steps")
    p.add_argument("--explain", action="store_true",
                   help="print the resolved per-parameter table (init, lr, wd, eps, multipliers) and exit")
    p.set_defaults(func=run)
