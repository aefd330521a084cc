"""`hpt data prepare TEXT --out DIR`: tokenize text into nanoGPT-format GPT-2 BPE shards, offline."""

from __future__ import annotations

import argparse
import os

from orchestrator.errors import EXIT_OK, InputError


def prepare(args: argparse.Namespace) -> int:
    from workloads.data.shards import prepare as prepare_shards

    if not os.path.isfile(args.text):
        raise InputError(f"text file {args.text!r} does not exist")
    if args.shard_tokens < 1:
        raise InputError(f"--shard-tokens={args.shard_tokens} must be >= 1")
    counts = prepare_shards(args.text, args.out, shard_tokens=args.shard_tokens, val_fraction=args.val_fraction)
    print(f"wrote {counts['train']:,} train and {counts['val']:,} val GPT-2 tokens to {args.out}")
    print(f"use it with: workload: {{kind: gpt2, dataset: shards, data_path: {os.path.abspath(args.out)}}}")
    return EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="prepare datasets")
    dsub = p.add_subparsers(dest="data_command", required=True)
    prep = dsub.add_parser("prepare", help="tokenize a text file into GPT-2 BPE .bin shards (offline)")
    prep.add_argument("text", help="UTF-8 text file")
    prep.add_argument("--out", required=True, help="output directory for {train,val}_NNNNNN.bin")
    prep.add_argument("--shard-tokens", type=int, default=100_000_000, help="tokens per shard")
    prep.add_argument("--val-fraction", type=float, default=0.1)
    prep.set_defaults(func=prepare)
