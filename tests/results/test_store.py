"""The Parquet store: round trip, atomic files, local and URI paths."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow.parquet as pq

from results.store import RunStore, load_curves, load_trials


def _write_trial(store: RunStore, tid: str, lr: float, status: str = "completed") -> None:
    w = store.writer(tid)
    w.begin({"trial_id": tid, "width": 64, "optimizer": {"name": "adamw", "lr": lr}})
    curve = [{"step": s, "items": s * 10, "train_loss": 3.0 - s / 10, "val_loss": None, "lr": lr,
              "grad_norm": 1.0, "wall_time_s": s * 0.1} for s in range(1, 11)]
    w.finish(status, {"final_train_loss": 2.0, "steps_done": 10}, curve, [], [{"name": "w", "role": "hidden"}])


def test_round_trip_local(tmp_path):
    store = RunStore(str(tmp_path / "run"))
    _write_trial(store, "a1", 1e-3)
    _write_trial(store, "b2", 1e-2, status="diverged")
    trials = load_trials(str(tmp_path / "run")).set_index("trial_id")
    assert trials.loc["a1", "optimizer.lr"] == 1e-3 and trials.loc["b2", "status"] == "diverged"
    assert trials.loc["a1", "final_train_loss"] == 2.0
    curves = load_curves(str(tmp_path / "run"), trial_ids=["a1"])
    assert len(curves) == 10 and set(curves["trial_id"]) == {"a1"}
    assert store.statuses() == {"a1": "completed", "b2": "diverged"}
    # no checkpoint and no temporary file is left behind
    leftovers = [f for _, _, fs in os.walk(tmp_path) for f in fs if f.startswith(".tmp") or f == "checkpoint.pt"]
    assert leftovers == []


def test_round_trip_through_a_pyarrow_uri(tmp_path):
    uri = f"file://{tmp_path}/viauri"
    _write_trial(RunStore(uri), "c3", 3e-3)
    assert load_trials(uri)["trial_id"].tolist() == ["c3"]
    assert len(load_curves(uri)) == 10


def test_killed_writer_never_leaves_a_readable_partial_file(tmp_path):
    # A child rewrites a big curve file in a loop; we SIGKILL it mid-write many times over.
    script = textwrap.dedent(f"""
        from results.store import RunStore
        store = RunStore({str(tmp_path)!r})
        rows = [{{"step": i, "train_loss": float(i)}} for i in range(400_000)]
        print("ready", flush=True)
        while True:
            store.write_table(store.path("curve.parquet"), rows)
    """)
    target = tmp_path / "curve.parquet"
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
        assert child.stdout.readline().strip() == b"ready"
        time.sleep(0.7)
        child.send_signal(signal.SIGKILL)
        child.wait()
        if target.exists():  # whatever is at the final name is a whole file
            assert pq.read_table(target).num_rows == 400_000
    assert target.exists()
