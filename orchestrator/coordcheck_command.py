"""`hpt coordcheck`: does every module's activation size stay flat across width (or depth)?

Example: hpt coordcheck --parametrization mup --optimizer adamw --widths 64,128,256,512 --steps 4 --seeds 2
Exit code 0 when the check passes, 1 when a module grows with scale, 2 on bad input.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from orchestrator.errors import EXIT_FAILED, EXIT_OK, InputError


def _ints(text: str, flag: str) -> list[int]:
    try:
        values = [int(v) for v in text.replace(" ", "").split(",") if v]
    except ValueError:
        raise InputError(f"{flag}={text!r}: give comma-separated integers, e.g. {flag} 64,128,256,512") from None
    if len(set(values)) < 2 or min(values) < 1:
        raise InputError(f"{flag}={text!r}: need at least two distinct positive values, e.g. 64,128,256,512")
    return values


def _pairs(items: list[str], flag: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"{flag} {item!r}: use KEY=VALUE, e.g. {flag} adjust_lr=spectral")
        out[key] = yaml.safe_load(value)  # numbers, booleans and strings as YAML reads them
    return out


def run(args: argparse.Namespace) -> int:
    import torch
    from pydantic import ValidationError

    from workloads.config import OptimizerConfig, ParametrizationConfig
    from workloads.coordcheck import DEFAULT_LRS, DEFAULT_TOLERANCE, coord_check, default_workload, plot
    from workloads.optim import REGISTRY
    from workloads.parametrization import RECIPES

    if args.widths is None and args.depths is None:
        raise InputError("give --widths W0,W1,... (width check) or --depths D0,D1,... (depth check)")
    if args.widths is not None and args.depths is not None:
        raise InputError("give either --widths or --depths, not both")
    if args.parametrization not in RECIPES:
        raise InputError(f"--parametrization {args.parametrization!r}: choose one of {sorted(RECIPES)}")
    if args.optimizer not in REGISTRY:
        raise InputError(f"--optimizer {args.optimizer!r}: choose one of {sorted(REGISTRY)}")
    lr = args.lr if args.lr is not None else DEFAULT_LRS.get(args.optimizer)
    if lr is None:
        raise InputError(f"--optimizer {args.optimizer!r} has no default coordinate-check LR: pass --lr")
    widths = _ints(args.widths, "--widths") if args.widths is not None else None
    depths = _ints(args.depths, "--depths") if args.depths is not None else None
    if args.steps < 1 or args.seeds < 1:
        raise InputError(f"--steps {args.steps} and --seeds {args.seeds} must be >= 1")
    torch.set_num_threads(args.threads)
    try:
        wl = default_workload(args.workload)
        updates: dict[str, Any] = {}
        if args.batch_size:
            updates["batch_size"] = args.batch_size
        if args.workload == "gpt2":
            updates.update({k: v for k, v in (("seq_len", args.seq_len), ("head_dim", args.head_dim)) if v})
        elif args.data_root:
            updates["data_root"] = args.data_root
        wl = type(wl).model_validate({**wl.model_dump(), **updates})
        pz = ParametrizationConfig(kind=args.parametrization, base_width=args.base_width, base_depth=args.base_depth,
                                   alpha=args.alpha, options=_pairs(args.option, "--option"))
        opt = OptimizerConfig(name=args.optimizer, lr=lr, weight_decay=args.weight_decay,
                              hparams=_pairs(args.hparam, "--hparam"))
    except ValidationError as exc:
        raise InputError(str(exc)) from None
    try:
        tolerance = DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
        result = coord_check(wl, pz, opt, widths=widths, depths=depths, width=args.width, depth=args.depth,
                             steps=args.steps, seeds=args.seeds, tolerance=tolerance, strict=args.strict,
                             device=args.device)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    if args.plot:
        plot(result, args.plot)
    if args.json:
        print(result.to_json())
    else:
        print(result.report())
        if args.plot:
            print(f"plot: {args.plot}")
    sys.stdout.flush()
    return EXIT_OK if result.passed else EXIT_FAILED


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "coordcheck",
        help="coordinate check: are activations flat in width (or depth) for a recipe + optimizer?",
        description="Train tiny models at several widths (or depths) for a few steps at a fixed LR and record "
                    "each module's mean |activation|. Reports the log-log slope against scale and the spread "
                    "(max/min) per module and step; fails when a module grows faster than --tolerance. "
                    "Exit 0 pass, 1 fail, 2 bad input.",
    )
    p.add_argument("--workload", choices=("gpt2", "resnet"), default="gpt2")
    p.add_argument("--parametrization", default="sp", help="a registered recipe (sp, mup, completep, ...)")
    p.add_argument("--optimizer", default="adamw", help="a registered optimizer (adamw, muon, moga, scion, ...)")
    p.add_argument("--widths", help="comma-separated widths for a width check, e.g. 64,128,256,512")
    p.add_argument("--depths", help="comma-separated depths for a depth check, e.g. 2,4,8,16")
    p.add_argument("--width", type=int, default=None, help="fixed width of a depth check (default 128 GPT-2, 1 ResNet)")
    p.add_argument("--depth", type=int, default=2, help="fixed depth of a width check (ResNet needs >= 3)")
    p.add_argument("--steps", type=int, default=4, help="steps t=1..k recorded (t=1 is the initialization)")
    p.add_argument("--seeds", type=int, default=2, help="seeds averaged per point")
    p.add_argument("--lr", type=float, default=None, help="learning rate (default: a per-optimizer value)")
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--hparam", action="append", default=[], metavar="KEY=VALUE",
                   help="optimizer hparam, e.g. --hparam adjust_lr=spectral (repeatable)")
    p.add_argument("--base-width", type=int, default=None, help="recipe base width (default: the smallest width)")
    p.add_argument("--base-depth", type=int, default=None, help="recipe base depth (default: the smallest depth)")
    p.add_argument("--alpha", type=float, default=1.0, help="CompleteP depth exponent")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="recipe option, e.g. --option readout_init=zero (repeatable)")
    p.add_argument("--tolerance", type=float, default=None, help="max |log-log slope| counted as flat (0.15)")
    p.add_argument("--strict", action="store_true", help="also fail modules that shrink with scale")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--seq-len", type=int, default=None, help="GPT-2 sequence length (default 16)")
    p.add_argument("--head-dim", type=int, default=None, help="GPT-2 head dim (default 32)")
    p.add_argument("--data-root", default=None, help="ResNet: dataset directory")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--plot", metavar="FILE", help="write a PNG: one panel per step, a line per module")
    p.set_defaults(func=run)
