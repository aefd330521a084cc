"""Shared fixtures. `ray_session`: ONE real local Ray (2 CPUs, no dashboard) per test session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def ray_session():
    """A local Ray for the whole session; the orchestrator reuses it (ray.is_initialized())."""
    ray = pytest.importorskip("ray")
    started = False
    if not ray.is_initialized():
        # address="local": never attach to another engineer's `ray start` cluster on this machine
        ray.init(address="local", num_cpus=2, include_dashboard=False, namespace="hptransfer-tests",
                 log_to_driver=False, runtime_env={"env_vars": {"RAY_CHDIR_TO_TRIAL_DIR": "0"}})
        started = True
    yield ray
    if started:
        ray.shutdown()
