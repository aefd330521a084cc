"""`hpt submit` against a live Ray head with its job server (needs `ray[default]`; skipped without).

`make test` installs `ray[tune]` only, so CI skips this; run it where `pip install "ray[default]"`
is installed: `.venv/bin/pytest tests/orchestrator/test_submit_live.py`.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from results.store import load_trials
from tests.orchestrator.helpers import tiny_spec, write_spec

pytest.importorskip("aiohttp", reason="a Ray head with a job server needs ray[default]")
REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_") and k != "HPT_FAULTS"}
    # the job's entrypoint runs `python`: this environment's, as on a cluster with hptransfer installed
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def test_submit_runs_the_sweep_as_a_ray_job(tmp_path):
    ray_cli = str(Path(sys.executable).with_name("ray"))
    port, dashboard_port = _free_port(), _free_port()
    # every port of its own, so that it cannot collide with another Ray on this machine
    ports = [f"--{name}={_free_port()}" for name in ("dashboard-agent-listen-port", "dashboard-agent-grpc-port",
                                                      "metrics-export-port", "runtime-env-agent-port",
                                                      "node-manager-port", "object-manager-port")]
    head = subprocess.Popen([ray_cli, "start", "--head", "--block", "--port", str(port), "--dashboard-port",
                             str(dashboard_port), "--dashboard-host", "127.0.0.1", "--include-dashboard", "true",
                             "--num-cpus", "2", "--disable-usage-stats", *ports],
                            env=_clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    address = f"http://127.0.0.1:{dashboard_port}"
    try:
        work = tmp_path / "work"
        work.mkdir()
        store = tmp_path / "store"
        spec = write_spec(work / "tiny.yaml", tiny_spec(store, name="live", lrs=(0.001, 0.004), steps=10))
        submit = [sys.executable, "-m", "orchestrator.cli", "submit", str(spec), "--address", address,
                  "--working-dir", str(work)]
        deadline = time.monotonic() + 90
        while True:  # the job server comes up a few seconds after the head
            out = subprocess.run(submit, cwd=REPO, env=_clean_env(), capture_output=True, text=True)
            if out.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert out.returncode == 0, out.stdout + out.stderr
        job_id = re.search(r"submitted job (\S+):", out.stdout).group(1)
        assert f"job logs --follow --address {address} {job_id}" in out.stdout

        status = ""
        deadline = time.monotonic() + 180
        probe = ("import sys\nfrom orchestrator.submit_command import _use_ray_auth_token_if_any\n"
                 "from ray.job_submission import JobSubmissionClient\n_use_ray_auth_token_if_any()\n"
                 "print(JobSubmissionClient(sys.argv[1]).get_job_status(sys.argv[2]))")
        while time.monotonic() < deadline:
            status = subprocess.run([sys.executable, "-c", probe, address, job_id], cwd=REPO, env=_clean_env(),
                                    capture_output=True, text=True).stdout.strip()
            if status in ("SUCCEEDED", "FAILED", "STOPPED"):
                break
            time.sleep(2)
        if status != "SUCCEEDED":
            logs = subprocess.run([sys.executable, "-c", probe.replace("get_job_status", "get_job_logs"), address,
                                   job_id], cwd=REPO, env=_clean_env(), capture_output=True, text=True).stdout
            pytest.fail(f"job {job_id}: {status}\n{logs[-3000:]}")
        trials = load_trials(str(store / "live"))
        assert len(trials) == 4 and set(trials["status"]) == {"completed"}
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
