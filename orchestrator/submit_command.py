"""`hpt submit SPEC --address http://HEAD:8265`: run a sweep as a Ray job on a cluster.

The job's entrypoint is `python -m orchestrator.cli run SPEC --address auto` in a copy of the
working directory (`runtime_env.working_dir`), so the driver runs on the cluster and survives
the laptop closing. The store must be a path every node sees or a pyarrow.fs URI (s3://...).
"""

from __future__ import annotations

import argparse
import os
import shlex
import time
from typing import Any

from orchestrator.errors import EXIT_OK, InputError
from orchestrator.spec import load_spec

EXCLUDES = [".git", ".venv", "runs", "**/__pycache__", "*.pt", ".pytest_cache", ".ruff_cache"]


def build_submission(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of JobSubmissionClient.submit_job for this spec (validated first)."""
    spec, _ = load_spec(args.spec)
    if not args.address.startswith(("http://", "https://")):
        raise InputError(f"--address={args.address!r}: give the dashboard address, e.g. http://HEAD:8265")
    working_dir = os.path.abspath(args.working_dir)
    spec_path = os.path.abspath(args.spec)
    if os.path.commonpath([working_dir, spec_path]) != working_dir:
        raise InputError(f"{args.spec}: the spec must be inside the uploaded working dir {working_dir} "
                         "(--working-dir)")
    store = args.store or spec.store
    if "://" not in store and not os.path.isabs(store):
        raise InputError(f"store={store!r} is relative: on the cluster it would land in the job's temporary copy "
                         "of the working dir; pass --store /a/path/every/node/sees or --store s3://bucket/runs")
    cmd = ["python", "-m", "orchestrator.cli", "run", os.path.relpath(spec_path, working_dir), "--address", "auto",
           "--no-progress", "--store", store]
    if args.max_concurrent is not None:
        if args.max_concurrent < 1:
            raise InputError(f"--max-concurrent={args.max_concurrent}: must be >= 1")
        cmd += ["--max-concurrent", str(args.max_concurrent)]
    env_vars = {k: os.environ[k] for k in ("HPT_DATA_DIR",) if os.environ.get(k)}
    return {
        "entrypoint": shlex.join(cmd),
        "submission_id": f"hpt-{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}",
        "runtime_env": {"working_dir": working_dir, "excludes": EXCLUDES, "env_vars": env_vars},
        "metadata": {"hpt_spec": spec.name, "hpt_run_dir": spec.run_dir(store)},
    }


def _use_ray_auth_token_if_any() -> None:
    """Send the Ray auth token (~/.ray/auth_token, RAY_AUTH_TOKEN[_PATH]) if there is one: clusters of
    Ray >= 2.5x require it by default, and unlike `ray.init` the job client does not look for it."""
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:  # a Ray without token authentication
        return
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def submit(args: argparse.Namespace) -> int:
    request = build_submission(args)
    if args.print_only:
        import json

        print(json.dumps(request, indent=1))
        return EXIT_OK
    from ray.job_submission import JobSubmissionClient

    _use_ray_auth_token_if_any()
    try:
        client = JobSubmissionClient(args.address)
    except Exception as exc:  # connection refused, not a Ray dashboard, ...
        raise InputError(f"--address={args.address!r}: cannot reach a Ray dashboard: {exc}") from None
    try:
        job_id = client.submit_job(**request)
    except RuntimeError as exc:  # the job server answered with an error (no agent yet, bad runtime_env, ...)
        raise InputError(f"--address={args.address!r}: the Ray job server refused the job: {exc}") from None
    print(f"submitted job {job_id}: {request['entrypoint']}")
    ray_cmd = "RAY_AUTH_MODE=token ray" if os.environ.get("RAY_AUTH_MODE") == "token" else "ray"
    print(f"follow it:  {ray_cmd} job logs --follow --address {args.address} {job_id}")
    print(f"status:     {ray_cmd} job status --address {args.address} {job_id}")
    print(f"results:    {request['metadata']['hpt_run_dir']} (hpt status RUN_DIR on a machine that sees it)")
    return EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("submit", help="submit a sweep to a Ray cluster as a job",
                       description="Submit `hpt run SPEC --address auto` as a Ray job through the job-submission "
                                   "API, uploading the working directory; prints the job id and how to follow it.")
    p.add_argument("spec", help="sweep spec YAML (inside the working dir)")
    p.add_argument("--address", required=True, help="Ray dashboard address, e.g. http://HEAD:8265")
    p.add_argument("--store", default=None, help="store root every node sees (absolute path or URI)")
    p.add_argument("--max-concurrent", type=int, default=None)
    p.add_argument("--working-dir", default=".", help="directory uploaded as the job's runtime_env working_dir")
    p.add_argument("--print-only", action="store_true", help="print the submission request, submit nothing")
    p.set_defaults(func=submit)
