"""Step time of each optimizer on GPT-2-124M-shaped matrices (768x768, 768x3072, 3072x768) on CPU.

Usage: .venv/bin/python benchmarks/bench_optim.py [--threads 1] [--reps 5] [--quick]

Prints the absolute step times and the ratios against the targets of issue 3:
  Muon <= 1.0x torch.optim.Muon, MOGA <= 1.0x AdamW, Muown <= 1.3x Muon, OrScale <= 1.1x Muon.
torch.optim.Muon always runs Newton–Schulz in bf16, so the like-for-like comparison is our Muon with
ns_dtype=bf16; our CPU default (fp32 NS) is printed against it as well, labelled as such.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from collections.abc import Callable

import torch

from workloads.optim import MOGA, Lion, Muon, Muown, OrScale, Scion

GPT2_SHAPES = [(768, 768), (768, 3072), (3072, 768)]
QUICK_SHAPES = [(192, 192), (192, 768), (768, 192)]

OptFactory = Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer]


def _params(shapes: list[tuple[int, int]], seed: int = 0) -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(seed)
    ps = []
    for shape in shapes:
        p = torch.nn.Parameter(torch.randn(shape, generator=gen) * 0.02)
        p.grad = torch.randn(shape, generator=gen) * 1e-3
        ps.append(p)
    return ps


def time_steps(
    factories: dict[str, OptFactory], shapes: list[tuple[int, int]], reps: int, warmup: int
) -> dict[str, tuple[float, float]]:
    """(min, median) wall time of one ``step()`` over all matrices (grads fixed, state warm), per optimizer.

    The optimizers take turns (round robin) so that load from other processes hits all of them alike; the
    minimum is the figure least disturbed by other work on a shared machine, and the one the ratios use."""
    opts = {name: f(_params(shapes)) for name, f in factories.items()}
    for opt in opts.values():
        for _ in range(warmup):
            opt.step()
    times: dict[str, list[float]] = {name: [] for name in opts}
    for _ in range(reps):
        for name, opt in opts.items():
            t0 = time.perf_counter()
            opt.step()
            times[name].append(time.perf_counter() - t0)
    return {name: (min(t), statistics.median(t)) for name, t in times.items()}


def candidates() -> dict[str, OptFactory]:
    bf16 = torch.bfloat16
    return {
        "torch.optim.Muon (bf16 NS)": lambda ps: torch.optim.Muon(ps, lr=0.02, weight_decay=0.1),
        "Muon, ns_dtype=bf16 (like-for-like)": lambda ps: Muon(ps, lr=0.02, weight_decay=0.1, ns_dtype=bf16),
        "Muon, CPU default (fp32 NS)": lambda ps: Muon(ps, lr=0.02, weight_decay=0.1),
        "torch.optim.AdamW (default)": lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.1),
        "torch.optim.AdamW (fused)": lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=0.1, fused=True),
        "MOGA row": lambda ps: MOGA(ps, lr=0.02, norm="row", weight_decay=0.1),
        "MOGA col": lambda ps: MOGA(ps, lr=0.02, norm="col", weight_decay=0.1),
        "MOGA sign": lambda ps: MOGA(ps, lr=0.02, norm="sign", weight_decay=0.1),
        "Muown (fp32 NS)": lambda ps: Muown(ps, lr=0.02),
        "OrScale (fp32 PE)": lambda ps: OrScale(ps, lr=0.02),
        "Muown, ns_dtype=bf16": lambda ps: Muown(ps, lr=0.02, ns_dtype=bf16),
        "OrScale, ns_dtype=bf16": lambda ps: OrScale(ps, lr=0.02, ns_dtype=bf16),
        "Scion (spectral, fp32 NS)": lambda ps: Scion(ps, lr=1e-3, radius=3.0),
        "Lion": lambda ps: Lion(ps, lr=1e-4, weight_decay=0.1),
    }


RATIOS = [
    # (label, numerator, denominator, target or None)
    ("Muon / torch Muon, both bf16 NS (like-for-like)", "Muon, ns_dtype=bf16 (like-for-like)",
     "torch.optim.Muon (bf16 NS)", 1.0),
    ("Muon fp32 default / torch Muon bf16 (our CPU default)", "Muon, CPU default (fp32 NS)",
     "torch.optim.Muon (bf16 NS)", None),
    ("MOGA row / AdamW (default)", "MOGA row", "torch.optim.AdamW (default)", 1.0),
    ("MOGA row / AdamW (fused)", "MOGA row", "torch.optim.AdamW (fused)", None),
    ("Muown / Muon (fp32 NS both)", "Muown (fp32 NS)", "Muon, CPU default (fp32 NS)", 1.3),
    ("OrScale / Muon (fp32 both)", "OrScale (fp32 PE)", "Muon, CPU default (fp32 NS)", 1.1),
    ("Muown / Muon (bf16 both)", "Muown, ns_dtype=bf16", "Muon, ns_dtype=bf16 (like-for-like)", 1.3),
    ("OrScale / Muon (bf16 both)", "OrScale, ns_dtype=bf16", "Muon, ns_dtype=bf16 (like-for-like)", 1.1),
]


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1: the machine is shared)")
    ap.add_argument("--reps", type=int, default=5, help="timed steps per optimizer (min and median reported)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="quarter-size shapes, for a smoke run")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    shapes = QUICK_SHAPES if args.quick else GPT2_SHAPES
    print(f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"{args.threads} thread(s), cpu capability {torch.backends.cpu.get_cpu_capability()}")
    print(f"shapes {shapes}; {args.reps} timed steps per optimizer after {args.warmup} warm-up step(s)\n")
    timed = time_steps(candidates(), shapes, args.reps, args.warmup)
    results = {name: best for name, (best, _) in timed.items()}
    print(f"| {'optimizer':40s} | min step (ms) | median (ms) |")
    print(f"|{'-' * 42}|---------------|-------------|")
    for name, (best, med) in timed.items():
        print(f"| {name:40s} | {best * 1e3:13.1f} | {med * 1e3:11.1f} |")
    print(f"\n| {'ratio':56s} | value | target | met |")
    print(f"|{'-' * 58}|-------|--------|-----|")
    for label, num, den, target in RATIOS:
        r = results[num] / results[den]
        met = "-" if target is None else ("yes" if r <= target else "no")
        tgt = "info" if target is None else f"<= {target:.1f}"
        print(f"| {label:56s} | {r:5.2f} | {tgt:>6s} | {met:>3s} |")
    return results


if __name__ == "__main__":
    main()
