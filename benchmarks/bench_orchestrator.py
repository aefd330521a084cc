"""How much of the machine does `hpt run` keep busy, and does its driver grow with the sweep?

    .venv/bin/python benchmarks/bench_orchestrator.py [--trials 16] [--steps 400] [--concurrency 2]
                                                       [--memory-trials 20 200] [--skip-memory]

1. Utilization: 16 trials of a fixed ~5 s workload (GPT-2 char model, width 64, depth 2, seq 64,
   batch 16, 400 AdamW steps, one thread each) through `hpt run` on 2 CPUs (embedded Ray,
   `max_concurrent: 2`). Ideal wall time = sum of the trials' own times / concurrency; the
   utilization is ideal / measured, once for the whole command (Python start, `ray.init`,
   shutdown included) and once for the sweep itself (the Tuner, as `hpt run` reports it). The
   per-trial overhead is (sweep wall x concurrency - sum of trial times) / trials: Ray Tune's
   scheduling, model/data setup, store writes. A trial's own time is its `wall_time_s` (the
   training loop, evaluations included).
2. Driver memory: `hpt run` of 20, 200 and 1000 tiny trials (width 32, 5 steps), each in a fresh
   process; the driver's peak and final RSS (from /proc, the driver process alone, not Ray's).
   Growth per trial = (peak at 200 - peak at 20) / 180, and so on; "beyond the plan" subtracts
   the Python heap of the expanded TrialConfigs (measured here with tracemalloc), which grows
   with the spec before any trial runs. Ray Tune's state is bounded by `trials_per_tuner`
   (128 at concurrency 2). Then one long-lived driver (this process) runs sweeps of 20, 200
   and 200 trials in turn: a per-trial leak would grow RSS on every sweep.

Each `hpt run` is a subprocess with its own embedded Ray, as a user would run it. Runs go to a
temporary store that is removed afterwards (--keep to keep it).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from results.store import load_trials  # noqa: E402


def write_spec(path: Path, name: str, store: Path, *, width: int, depth: int, seq_len: int, batch: int, steps: int,
               lrs: list[float], seeds: list[int], concurrency: int, eval_every: int, eval_batches: int,
               trials_per_tuner: int | None = None) -> Path:
    spec = {
        "name": name,
        "workload": {"kind": "gpt2", "seq_len": seq_len, "head_dim": min(32, width), "batch_size": batch,
                     "steps": steps, "eval_every": eval_every, "eval_batches": eval_batches, "log_every": 10},
        "parametrization": {"kind": "sp"},
        "grid": {"width": [width], "depth": [depth], "seed": seeds},
        "optimizers": [{"name": "adamw", "lr": lrs}],
        "resources": {"cpu": 1, "gpu": 0},
        "execution": {"max_concurrent": concurrency, "max_failures": 0, "checkpoint_every": 0,
                      **({"trials_per_tuner": trials_per_tuner} if trials_per_tuner else {})},
        "store": str(store),
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _proc_kib(pid: int) -> dict[str, int]:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, value = line.split(":", 1)
                    out[key] = int(value.split()[0])
    except OSError:
        pass
    return out


def hpt_run(spec: Path) -> dict[str, float]:
    """Run `hpt run SPEC` in a fresh process; wall time, its own report, and driver RSS (polled)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != "HPT_FAULTS"}
    log_path = spec.with_suffix(".log")  # a file, not a pipe: an unread pipe fills and blocks the driver
    t0 = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "run", str(spec), "--no-progress"],
                                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
        peak, last = 0, 0
        while proc.poll() is None:
            mem = _proc_kib(proc.pid)
            peak = max(peak, mem.get("VmHWM", 0))
            last = mem.get("VmRSS", last)
            time.sleep(0.1)
    wall = time.perf_counter() - t0
    out = log_path.read_text()
    if proc.returncode != 0:
        raise SystemExit(f"hpt run {spec} exited {proc.returncode}:\n{out}")
    match = re.search(r"ran (\d+) trials in ([\d.]+) s", out)
    if not match:
        raise SystemExit(f"unexpected output of hpt run:\n{out}")
    return {"wall_s": wall, "trials": int(match.group(1)), "sweep_s": float(match.group(2)),
            "peak_rss_mib": peak / 1024, "last_rss_mib": last / 1024}


def bench_utilization(root: Path, trials: int, steps: int, concurrency: int) -> dict[str, float]:
    seeds = [0, 1] if trials % 2 == 0 else [0]
    n_lrs = trials // len(seeds)
    lrs = [round(2.0 ** (-12 + 0.25 * k), 8) for k in range(n_lrs)]  # 2^-12 .. well below divergence
    spec = write_spec(root / "util.yaml", "bench_util", root / "runs", width=64, depth=2, seq_len=64, batch=16,
                      steps=steps, lrs=lrs, seeds=seeds, concurrency=concurrency, eval_every=100, eval_batches=2)
    run = hpt_run(spec)
    table = load_trials(str(root / "runs" / "bench_util"))
    assert len(table) == trials and set(table["status"]) == {"completed"}, table["status"].value_counts()
    busy = float(table["wall_time_s"].sum())
    ideal = busy / concurrency
    return {
        **run,
        "trial_mean_s": busy / trials,
        "trial_sum_s": busy,
        "ideal_s": ideal,
        "util_end_to_end": ideal / run["wall_s"],
        "util_sweep": ideal / run["sweep_s"],
        "overhead_per_trial_s": (run["sweep_s"] * concurrency - busy) / trials,
        "startup_s": run["wall_s"] - run["sweep_s"],
    }


def bench_memory(root: Path, counts: list[int], concurrency: int,
                 trials_per_tuner: int | None) -> list[dict[str, float]]:
    rows = []
    for n in counts:
        seeds = list(range(max(1, n // 10)))
        lrs = [round(2.0 ** (-12 + 0.5 * k), 8) for k in range(n // len(seeds))]
        spec = write_spec(root / f"mem{n}.yaml", f"bench_mem{n}", root / "runs", width=32, depth=1, seq_len=16,
                          batch=4, steps=5, lrs=lrs, seeds=seeds, concurrency=concurrency, eval_every=5,
                          eval_batches=1, trials_per_tuner=trials_per_tuner)
        run = hpt_run(spec)
        assert run["trials"] == n, run
        rows.append({"trials": n, **run, "plan_mib": plan_mib(spec)})
    return rows


def plan_mib(spec_path: Path) -> float:
    """Python heap of the sweep's plan (its expanded TrialConfigs), which every driver holds from the
    start: the part of the driver that grows with the spec, not with running trials."""
    import gc
    import tracemalloc

    from orchestrator.grid import expand
    from orchestrator.spec import load_spec

    spec, _ = load_spec(str(spec_path))
    expand(spec)  # warm caches (validators, regexes) outside the measurement
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        configs = expand(spec)
        size = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    del configs
    return size / 2**20


def _rss_mib() -> float:
    return _proc_kib(os.getpid()).get("VmRSS", 0) / 1024


def bench_memory_one_driver(root: Path, counts: list[int], concurrency: int) -> list[dict[str, float]]:
    """One long-lived driver (this process, one embedded Ray) runs sweeps of `counts` trials in turn:
    RSS after each. A leak per trial shows as growth on every sweep, not just on the first big one."""
    import ray

    from orchestrator.runner import execute, plan_sweep
    from orchestrator.spec import load_spec

    ray.init(address="local", num_cpus=concurrency, include_dashboard=False, log_to_driver=False,
             logging_level="WARNING")
    rows = []
    try:
        for i, n in enumerate(counts):
            seeds = list(range(max(1, n // 10)))
            lrs = [round(2.0 ** (-12 + 0.5 * k), 8) for k in range(n // len(seeds))]
            path = write_spec(root / f"one{i}.yaml", f"bench_one{i}", root / "runs", width=32, depth=1, seq_len=16,
                              batch=4, steps=5, lrs=lrs, seeds=seeds, concurrency=concurrency, eval_every=5,
                              eval_batches=1)
            spec, _ = load_spec(str(path))
            plan = plan_sweep(spec, spec.run_dir())
            before = _rss_mib()
            with open(os.devnull, "w") as quiet:
                out = execute(spec, plan.run_dir, plan.to_run(), progress=False, stream=quiet)
            after = _rss_mib()
            rows.append({"trials": len(out.ran), "before_mib": before, "after_mib": after,
                         "kib_per_trial": (after - before) * 1024 / max(1, len(out.ran))})
    finally:
        ray.shutdown()
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=16)
    p.add_argument("--steps", type=int, default=400, help="steps per utilization trial (~5 s at 400 here)")
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--memory-trials", type=int, nargs="+", default=[20, 200, 1000],
                   help="sweep sizes for the driver-memory runs (two or more)")
    p.add_argument("--trials-per-tuner", type=int, default=None,
                   help="execution.trials_per_tuner of the memory runs (default: the runner's, 128 at concurrency 2)")
    p.add_argument("--skip-memory", action="store_true")
    p.add_argument("--skip-utilization", action="store_true")
    p.add_argument("--keep", action="store_true", help="keep the temporary store")
    args = p.parse_args()

    root = Path(tempfile.mkdtemp(prefix="hpt-bench-"))
    print(f"machine: {os.cpu_count()} CPUs; store {root}")
    try:
        if not args.skip_utilization:
            u = bench_utilization(root, args.trials, args.steps, args.concurrency)
            print(f"\n## utilization: {args.trials} trials x ~{u['trial_mean_s']:.1f} s, concurrency "
                  f"{args.concurrency}")
            print("| measure | value |\n|---|---|")
            print(f"| sum of trial times | {u['trial_sum_s']:.1f} s (mean {u['trial_mean_s']:.2f} s) |")
            print(f"| ideal wall (sum / concurrency) | {u['ideal_s']:.1f} s |")
            print(f"| `hpt run` wall, whole command | {u['wall_s']:.1f} s |")
            print(f"| sweep wall (Tuner, as `hpt run` reports) | {u['sweep_s']:.1f} s |")
            print(f"| startup + shutdown (Python, ray.init, ray.shutdown) | {u['startup_s']:.1f} s |")
            print(f"| utilization, sweep | {100 * u['util_sweep']:.1f} % (target >= 85 %) |")
            print(f"| utilization, whole command | {100 * u['util_end_to_end']:.1f} % |")
            print(f"| overhead per trial | {u['overhead_per_trial_s']:.2f} s |")
        if not args.skip_memory:
            rows = bench_memory(root, args.memory_trials, args.concurrency, args.trials_per_tuner)
            per_tuner = args.trials_per_tuner or "default"
            print(f"\n## driver memory (the `hpt run` process alone; trials_per_tuner: {per_tuner})")
            print("| trials | wall | sweep | peak RSS | final RSS | of which the plan |\n|---|---|---|---|---|---|")
            for r in rows:
                print(f"| {r['trials']} | {r['wall_s']:.1f} s | {r['sweep_s']:.1f} s | {r['peak_rss_mib']:.1f} MiB | "
                      f"{r['last_rss_mib']:.1f} MiB | {r['plan_mib']:.2f} MiB |")
            print("\n| from -> to | peak RSS growth | per trial | per trial, beyond the plan |\n|---|---|---|---|")
            for a, b in zip(rows, rows[1:], strict=False):
                n = b["trials"] - a["trials"]
                grew = b["peak_rss_mib"] - a["peak_rss_mib"]
                plan = b["plan_mib"] - a["plan_mib"]
                print(f"| {a['trials']} -> {b['trials']} | {grew:+.1f} MiB | {grew * 1024 / n:+.1f} KiB | "
                      f"{(grew - plan) * 1024 / n:+.1f} KiB |")
        if not args.skip_memory:
            rows = bench_memory_one_driver(root, [20, 200, 200], args.concurrency)
            print("\n## one long-lived driver, sweeps in turn (RSS of this process)")
            print("| sweep | trials | RSS before | RSS after | growth per trial |\n|---|---|---|---|---|")
            for i, r in enumerate(rows):
                print(f"| {i + 1} | {r['trials']} | {r['before_mib']:.0f} MiB | {r['after_mib']:.0f} MiB | "
                      f"{r['kib_per_trial']:+.1f} KiB |")
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
