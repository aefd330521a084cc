"""`hpt validate SPEC` and `hpt schema`."""

from __future__ import annotations

import argparse
import json

from orchestrator.errors import EXIT_OK
from orchestrator.spec import check_local_resources, load_spec, spec_json_schema


def validate(args: argparse.Namespace) -> int:
    from orchestrator.grid import expand

    spec, _ = load_spec(args.spec)
    if not args.cluster:
        check_local_resources(spec, args.spec)
    configs = expand(spec)
    axes = [f"{len(spec.parametrization)} parametrization(s)", f"{len(spec.optimizers)} optimizer(s)",
            f"{len(spec.grid.width)} width(s)", f"{len(spec.grid.depth)} depth(s)", f"{len(spec.grid.seed)} seed(s)"]
    axes += [f"{len(v)} {k}" for k, v in spec.grid.extra_axes().items()]
    print(f"{args.spec}: ok, {len(configs)} trials ({', '.join(axes)}); run dir {spec.run_dir()}")
    return EXIT_OK


def schema(args: argparse.Namespace) -> int:
    text = json.dumps(spec_json_schema(), indent=2)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
        print(f"wrote {args.out}")
    else:
        print(text)
    return EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    v = sub.add_parser("validate", help="check a sweep spec (exit 0 ok, 2 bad input)",
                       description="Validate SPEC: fields, registered optimizers/recipes, every grid point, "
                                   "and that this machine can run one trial.")
    v.add_argument("spec", help="sweep spec YAML")
    v.add_argument("--cluster", action="store_true",
                   help="skip the check of resources against this machine (the spec is for a cluster)")
    v.set_defaults(func=validate)
    s = sub.add_parser("schema", help="print the JSON schema of sweep specs (for editor completion)")
    s.add_argument("--out", default=None, help="write it to this file instead of stdout")
    s.set_defaults(func=schema)
