"""The `hpt` command line. Each subcommand lives in its own module and registers itself here."""

from __future__ import annotations

import argparse
import importlib
import sys

from orchestrator.errors import EXIT_BAD_INPUT, InputError

# (module, function) pairs that add a subparser; a missing optional module is skipped.
COMMANDS: list[tuple[str, str]] = [
    ("orchestrator.trial_command", "add_parser"),
    ("orchestrator.data_command", "add_parser"),
    ("orchestrator.coordcheck_command", "add_parser"),
    ("orchestrator.spec_commands", "add_parser"),  # validate, schema
    ("orchestrator.run_command", "add_parser"),  # run, rerun
    ("orchestrator.status_command", "add_parser"),
    ("orchestrator.submit_command", "add_parser"),
    ("results.cli", "add_analyze_parser"),
    ("results.cli", "add_report_parser"),
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hpt",
        description="hptransfer: does this optimizer's learning rate transfer across width and depth? "
        "Sweep specs run on Ray Tune; curves land in Parquet; `hpt analyze` gives the verdict.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module, func in COMMANDS:
        getattr(importlib.import_module(module), func)(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except InputError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
