"""`hpt run / rerun / status` against a real local Ray (the session's, 2 CPUs) and the Parquet store.

No mocks: trials are tiny GPT-2 runs (width 32/64, head_dim 32, depth 1, seq 32, batch 8, 20-40
steps); faults are injected through HPT_FAULTS (workloads/faults.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.grid import expand
from orchestrator.spec import load_spec
from results.store import RunStore, load_curves, load_trials
from tests.orchestrator.helpers import hpt, mtime, tiny_spec, write_spec

pytestmark = pytest.mark.usefixtures("ray_session")
REPO = Path(__file__).resolve().parents[2]


def _ids(spec_path: Path) -> list[str]:
    spec, _ = load_spec(str(spec_path))
    return [c.trial_id for c in expand(spec)]


def _expected_steps(steps: int, log_every: int = 5, eval_every: int = 10) -> list[int]:
    return sorted({0, *range(log_every, steps + 1, log_every), *range(eval_every, steps + 1, eval_every), steps})


def _assert_curves_exact(run_dir: Path, ids: list[str], steps: int) -> None:
    curves = load_curves(str(run_dir), ids)
    assert set(curves["trial_id"]) == set(ids)
    for tid, curve in curves.groupby("trial_id"):
        assert sorted(curve["step"]) == _expected_steps(steps), f"trial {tid}: steps {sorted(curve['step'])}"


def test_run_is_incremental(tmp_path, capsys):
    store = tmp_path / "runs"
    path = write_spec(tmp_path / "s.yaml", tiny_spec(store))
    run_dir = store / "tiny"

    assert hpt("run", path, "--no-progress") == 0
    ids = _ids(path)
    assert len(ids) == 6
    trials = load_trials(str(run_dir))
    assert sorted(trials["trial_id"]) == sorted(ids)
    assert set(trials["status"]) == {"completed"}
    _assert_curves_exact(run_dir, ids, 20)
    assert "ran 6 trials" in capsys.readouterr().out
    stamps = {tid: mtime(run_dir / "trials" / tid / "status.json") for tid in ids}

    # again: nothing to start, nothing rewritten
    assert hpt("run", path, "--no-progress") == 0
    assert "nothing to run" in capsys.readouterr().out
    assert {tid: mtime(run_dir / "trials" / tid / "status.json") for tid in ids} == stamps

    # one more LR: only that column (2 widths) runs
    write_spec(path, tiny_spec(store, lrs=(0.001, 0.004, 0.016, 0.064)))
    assert hpt("run", path, "--dry-run") == 0
    assert "8 trials: 2 new, 6 done" in capsys.readouterr().out
    assert hpt("run", path, "--no-progress") == 0
    assert "ran 2 trials" in capsys.readouterr().out
    new = set(_ids(path)) - set(ids)
    trials = load_trials(str(run_dir)).set_index("trial_id")
    assert len(new) == 2 and set(trials.loc[sorted(new), "optimizer.lr"]) == {0.064}
    assert set(trials["status"]) <= {"completed", "diverged"} and len(trials) == 8
    assert {tid: mtime(run_dir / "trials" / tid / "status.json") for tid in ids} == stamps

    assert hpt("status", run_dir) == 0
    out = capsys.readouterr().out
    assert "8 trials" in out


def test_failed_trial_records_traceback_and_rerun_completes_it(tmp_path, capsys, monkeypatch):
    store = tmp_path / "runs"
    path = write_spec(tmp_path / "s.yaml", tiny_spec(store, name="faulty", widths=(32,), lrs=(0.001, 0.004),
                                                     execution={"max_failures": 0}))
    run_dir = store / "faulty"
    bad = _ids(path)[1]
    fault_file = tmp_path / "faults.json"
    fault_file.write_text(json.dumps({bad: {"raise_at_step": 7}}))
    monkeypatch.setenv("HPT_FAULTS", str(fault_file))

    assert hpt("run", path, "--no-progress") == 1
    rs = RunStore(str(run_dir))
    st = rs.status(bad)
    assert st["status"] == "failed"
    assert "Traceback" in st["error"] and "InjectedFault" in st["error"] and "step 7" in st["error"]
    assert rs.statuses()[_ids(path)[0]] == "completed"
    capsys.readouterr()

    assert hpt("status", run_dir) == 1
    out = capsys.readouterr().out
    assert "failed" in out and bad in out and "InjectedFault" in out
    assert hpt("status", run_dir, "--json") == 1
    info = json.loads(capsys.readouterr().out)
    assert info["counts"]["failed"] == 1 and info["counts"]["completed"] == 1
    assert "InjectedFault" in info["failures"][0]["error"]

    # `hpt run` again does not retry it; rerun while still broken fails again
    assert hpt("run", path, "--no-progress") == 1
    assert "nothing to run" in capsys.readouterr().out
    good_stamp = mtime(run_dir / "trials" / _ids(path)[0] / "status.json")

    fault_file.write_text("{}")  # "fixed"
    assert hpt("rerun", run_dir, "--failed", "--no-progress") == 0
    assert "rerunning 1 failed" in capsys.readouterr().out
    assert rs.status(bad)["status"] == "completed" and rs.status(bad)["error"] is None
    assert mtime(run_dir / "trials" / _ids(path)[0] / "status.json") == good_stamp
    _assert_curves_exact(run_dir, _ids(path), 20)
    assert hpt("status", run_dir) == 0


def test_worker_sigkill_resumes_from_checkpoint_exactly_once(tmp_path, monkeypatch):
    store = tmp_path / "runs"
    path = write_spec(tmp_path / "s.yaml", tiny_spec(store, name="killed", widths=(32,), lrs=(0.002,), steps=40,
                                                     execution={"max_failures": 2, "checkpoint_every": 10}))
    run_dir = store / "killed"
    (tid,) = _ids(path)
    fault_file = tmp_path / "faults.json"
    fault_file.write_text(json.dumps({tid: {"kill_at_step": 25}}))
    monkeypatch.setenv("HPT_FAULTS", str(fault_file))

    assert hpt("run", path, "--no-progress") == 0
    assert Path(f"{fault_file}.{tid}.killed").exists(), "the worker was never killed"
    st = RunStore(str(run_dir)).status(tid)
    assert st["status"] == "completed"
    assert st["summary"]["resumed_from_step"] == 20 and st["summary"]["resumed_from"] == "ray"
    _assert_curves_exact(run_dir, [tid], 40)


def _group(pgid: int) -> dict[int, str]:
    """Live processes of a process group: pid -> command."""
    out = subprocess.run(["ps", "-e", "-o", "pid=,pgid=,args="], capture_output=True, text=True).stdout
    procs = {}
    for line in out.splitlines():
        pid, group, *cmd = line.split(None, 2)
        if int(group) == pgid:
            procs[int(pid)] = " ".join(cmd)
    return procs


def _kill_group(pgid: int) -> None:
    """Clean up what the test started (the driver's session), by its id."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_driver_sigkill_then_restart_finishes_without_rerunning(tmp_path, capsys):
    store = tmp_path / "runs"
    # sequential, ~1 s trials so the driver dies mid-sweep
    path = write_spec(tmp_path / "s.yaml", tiny_spec(store, name="driver", widths=(32, 64), lrs=(0.001, 0.004),
                                                     steps=150, execution={"max_concurrent": 1,
                                                                           "checkpoint_every": 25}))
    run_dir = store / "driver"
    ids = _ids(path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != "HPT_FAULTS"}
    log = (tmp_path / "driver.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "run", str(path), "--no-progress"],
                            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    rs = RunStore(str(run_dir))
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            done = [t for t, s in rs.statuses().items() if s == "completed"] if rs.exists() else []
            if done:
                break
            time.sleep(0.05)
        assert proc.poll() is None, f"driver ended before it could be killed: {(tmp_path / 'driver.log').read_text()}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    except BaseException:
        _kill_group(proc.pid)
        raise
    finally:
        log.close()
    # Ray's raylet/GCS/workers share the driver's fate; its dashboard and runtime-env agents do not
    deadline = time.monotonic() + 10
    while any("raylet" in c or "gcs_server" in c for c in _group(proc.pid).values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        statuses = rs.statuses()
        completed = [t for t, s in statuses.items() if s == "completed"]
        assert 1 <= len(completed) < len(ids), statuses
        stamps = {t: mtime(run_dir / "trials" / t / "status.json") for t in completed}
        assert rs.read_json(rs.path("driver.lock"))["pid"] == proc.pid  # stale lock of the dead driver

        assert hpt("run", path, "--dry-run") == 0
        plan = capsys.readouterr().out
        assert f"{len(completed)} done" in plan
        assert hpt("run", path, "--no-progress") == 0
        out = capsys.readouterr().out
        assert f"ran {len(ids) - len(completed)} trials" in out
        assert {t: mtime(run_dir / "trials" / t / "status.json") for t in completed} == stamps
        assert set(rs.statuses().values()) == {"completed"} and len(rs.statuses()) == len(ids)
        _assert_curves_exact(run_dir, ids, 150)
        # the restarted driver stopped what the dead one's Ray left behind
        time.sleep(0.5)
        leaked = _group(proc.pid)
    finally:
        _kill_group(proc.pid)
    assert not leaked, f"Ray processes outlived the killed driver and its restart: {leaked}"
