"""Execution: the pending trials of a sweep -> Ray Tune Tuners -> the store.

The store is the source of truth for what is done: the driver expands the grid, asks the store
for each trial's status, and hands only the trials that still need running to a fresh Tuner (a
`tune.grid_search` over their trial ids; the configs travel once, as a `SweepPayload`). A long
sweep runs as successive Tuners of `trials_per_tuner` trials, because Ray Tune holds every trial
of a Tuner in the driver until it ends; finished trials are compacted meanwhile
(`orchestrator.compaction`). Ray Tune retries a failing trial (`FailureConfig`) from its last
Ray Tune checkpoint; a restarted driver resumes an interrupted trial from the store's checkpoint.
We never restore a Tune experiment: it cannot take new trials, and `restart_errored` ignores the
concurrency limit.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from orchestrator.errors import InputError
from orchestrator.grid import expand
from orchestrator.spec import SweepSpec
from orchestrator.trainable import SweepPayload
from results.store import FINISHED, RunStore
from workloads import faults
from workloads.config import RunOptions, TrialConfig

LOCK_FILE = "driver.lock"
RAY_DIR = "_ray"  # Ray Tune's own experiment folders (scratch; the store holds the results)
NAMESPACE = "hptransfer"
PARAM = "trial_id"  # the one key of a Tune trial's config (the rest travels once, as a SweepPayload)
log = logging.getLogger(__name__)


# -- planning ----------------------------------------------------------------------------------


def display_status(stored: str | None) -> str:
    """Store status -> what the plan shows: new, running (interrupted if no driver), done states."""
    if stored is None or stored == "pending":
        return "new"
    return stored


@dataclass
class SweepPlan:
    spec: SweepSpec
    run_dir: str
    configs: list[TrialConfig]
    stored: dict[str, str]  # trial_id -> status in the store (only trials the store knows)

    def status(self, config: TrialConfig) -> str:
        return display_status(self.stored.get(config.trial_id))

    def counts(self) -> Counter[str]:
        return Counter(self.status(c) for c in self.configs)

    def select(self, statuses: Iterable[str]) -> list[TrialConfig]:
        wanted = set(statuses)
        return [c for c in self.configs if self.status(c) in wanted]

    def to_run(self) -> list[TrialConfig]:
        """What `hpt run` runs: new trials and trials a dead driver left `running`."""
        return self.select(("new", "running"))


def plan_sweep(spec: SweepSpec, run_dir: str) -> SweepPlan:
    store = RunStore(run_dir)
    stored = store.statuses() if store.exists() else {}
    return SweepPlan(spec, run_dir, expand(spec), stored)


def trial_label(config: TrialConfig) -> str:
    parts = [config.parametrization.kind, f"w={config.width}", f"d={config.depth}",
             f"{config.optimizer.name} lr={config.optimizer.lr:.3g}", f"seed={config.seed}"]
    return " ".join(parts)


# -- the driver lock: one live driver per run directory ------------------------------------------


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _proc_start(pid: int) -> int | None:
    """Start time of a process (clock ticks since boot; Linux), to tell a pid from a reused one."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _descendants(root: int) -> list[tuple[int, int]]:
    """(pid, start time) of every live descendant of `root` (Linux /proc; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        start = _proc_start(pid)
        if start is not None:
            out.append((pid, start))
        todo.extend(children.get(pid, []))
    return out


def _reap(processes: list[list[int]]) -> int:
    """SIGKILL what a dead driver's embedded Ray left behind (Ray's dashboard and runtime-env agents
    outlive a SIGKILLed driver); only processes whose pid *and* start time still match."""
    killed = 0
    for pid, start in processes:
        if _proc_start(pid) == start:
            try:
                os.kill(pid, 9)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
    return killed


def acquire_lock(store: RunStore, started_ray: bool = False) -> None:
    path = store.path(LOCK_FILE)
    held = store.read_json(path)
    if held and held.get("host") == socket.gethostname() and held.get("pid") != os.getpid():
        if _pid_alive(int(held.get("pid", 0))):
            raise InputError(f"{store.uri}: another hpt driver (pid {held['pid']}, started "
                             f"{time.ctime(held.get('started', 0))}) is running this run directory; "
                             "wait for it or stop it first")
        if _reap(held.get("ray_processes", [])):
            log.warning("stopped Ray processes left by the killed driver (pid %s)", held["pid"])
    ray_processes = _descendants(os.getpid()) if started_ray else []
    store.write_json(path, {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time(),
                            "ray_processes": ray_processes})


def release_lock(store: RunStore) -> None:
    held = store.read_json(store.path(LOCK_FILE))
    if held and held.get("pid") == os.getpid() and held.get("host") == socket.gethostname():
        store.delete(store.path(LOCK_FILE))


def driver_alive(store: RunStore) -> bool:
    held = store.read_json(store.path(LOCK_FILE))
    if not held:
        return False
    if held.get("host") != socket.gethostname():
        return True  # cannot tell from here; assume it is
    return _pid_alive(int(held.get("pid", 0)))


# -- Ray ---------------------------------------------------------------------------------------


@dataclass
class RayOptions:
    address: str | None = None  # None: embedded local Ray; "auto"/"ray://..."/"HOST:PORT": join a cluster
    include_dashboard: bool = False
    dashboard_host: str = "127.0.0.1"
    num_cpus: int | None = None  # embedded Ray only; default: this machine's CPUs


def validate_address(address: str | None) -> None:
    if address is None or address in ("auto", "local"):
        return
    if address.startswith(("http://", "https://")):
        raise InputError(f"--address={address!r} is a dashboard (job submission) address; "
                         f"use `hpt submit SPEC --address {address}`, or give the Ray address "
                         "(auto, ray://HOST:10001 or HOST:6379) to `hpt run`")
    if address.startswith("ray://") or ":" in address:
        return
    raise InputError(f"--address={address!r}: expected auto, ray://HOST:PORT or HOST:PORT")


def ensure_ray(options: RayOptions) -> bool:
    """Use the Ray this process is already connected to, or start/join one. True if we started it."""
    import ray

    if ray.is_initialized():
        return False
    common: dict[str, Any] = {"namespace": NAMESPACE, "log_to_driver": False, "logging_level": logging.WARNING}
    if options.address in (None, "local"):
        # the local Ray's workers inherit this environment; a job runtime_env would instead keep
        # Ray from handing its prestarted workers to the trials (~1 s more per worker at start)
        os.environ.update(_propagated_env())
        ray.init(address="local", num_cpus=options.num_cpus, include_dashboard=options.include_dashboard,
                 dashboard_host=options.dashboard_host, **common)
    else:
        try:
            ray.init(address=options.address, runtime_env={"env_vars": _propagated_env()}, **common)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise InputError(f"--address={options.address!r}: cannot connect to a Ray cluster: {exc}") from None
    return True


def _propagated_env() -> dict[str, str]:
    env = {"RAY_CHDIR_TO_TRIAL_DIR": "0"}
    for name in (faults.ENV_VAR, "HPT_DATA_DIR"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


def _trial_needs(spec: SweepSpec) -> tuple[tuple[str, float], ...]:
    """(Ray resource name, amount) one trial asks for."""
    return (("CPU", spec.resources.cpu), ("GPU", spec.resources.gpu))


def check_cluster_resources(spec: SweepSpec) -> None:
    """The cluster must be able to place one trial (a GPU asked where there is none: exit 2)."""
    import ray

    total = ray.cluster_resources()
    for key, need in _trial_needs(spec):
        have = float(total.get(key, 0.0))
        if need > 0 and have < need:
            raise InputError(f"resources.{key.lower()}: a trial asks for {need:g} {key}(s) but the Ray cluster "
                             f"has {have:g}; lower resources.{key.lower()} or use a cluster that has them")


def trial_id_of(config: dict[str, Any]) -> str:
    return config[PARAM]


def _trial_dirname(trial: Any) -> str:
    return trial_id_of(trial.config)


# -- running -----------------------------------------------------------------------------------


@dataclass
class RunOutcome:
    ran: list[str]
    statuses: dict[str, str]  # trial_id -> final store status, for the trials that ran
    wall_s: float
    errors: dict[str, str] = field(default_factory=dict)
    tuners: int = 0  # how many successive Tuners ran them (execution.trials_per_tuner)

    def counts(self) -> Counter[str]:
        return Counter(self.statuses.values())


def run_options(spec: SweepSpec) -> RunOptions:
    device = "cuda" if spec.resources.gpu > 0 else "cpu"
    return RunOptions(device=device, threads=spec.threads(), checkpoint_every=spec.execution.checkpoint_every)


def sweep_payload(trials: list[TrialConfig], run_dir: str, options: RunOptions) -> SweepPayload:
    return SweepPayload(run_dir=run_dir, options=options.model_dump_json(),
                        faults=os.environ.get(faults.ENV_VAR) or None,
                        configs={c.trial_id: c.canonical_json() for c in trials})


def execute(
    spec: SweepSpec,
    run_dir: str,
    trials: list[TrialConfig],
    *,
    spec_text: str | None = None,
    ray_options: RayOptions | None = None,
    max_concurrent: int | None = None,
    progress: bool | None = None,
    stream: Any = None,
) -> RunOutcome:
    """Run `trials` (already filtered against the store) on Ray Tune; return their final statuses.

    Validates that the cluster can place a trial before writing anything; then takes the run
    directory's driver lock, records the spec, and runs the Tuners.
    """
    ray_options = ray_options or RayOptions()
    stream = stream or sys.stderr
    validate_address(ray_options.address)
    if not trials:
        return RunOutcome([], {}, 0.0)
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")  # no per-trial json/csv/tbx files
    os.environ["RAY_CHDIR_TO_TRIAL_DIR"] = "0"  # keep relative data paths meaning what they meant
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # with verbose=0: no experiment tables
    os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "1000")

    started_ray = ensure_ray(ray_options)
    free_cpus = None if started_ray else available_cpus()
    store = RunStore(run_dir)
    t0 = time.monotonic()
    try:
        check_cluster_resources(spec)
        acquire_lock(store, started_ray)
        try:
            if spec_text is not None:
                store.write_spec(spec_text)
            outcome = _fit(spec, store, trials, max_concurrent, progress, stream)
        finally:
            release_lock(store)
    finally:
        if started_ray:
            import ray

            ray.shutdown()
        else:
            wait_for_released_cpus(free_cpus)
    outcome.wall_s = time.monotonic() - t0
    return outcome


def _storage_path(store: RunStore) -> str:
    return store.path(RAY_DIR) if "://" not in store.uri else store.uri.rstrip("/") + "/" + RAY_DIR


def _fit(spec: SweepSpec, store: RunStore, trials: list[TrialConfig], max_concurrent: int | None,
         progress: bool | None, stream: Any) -> RunOutcome:
    """Run the trials through successive Tuners of `trials_per_tuner` trials (one, unless the sweep
    is long); after each, hand the driver's freed heap back to the OS."""
    from orchestrator.progress import ProgressCallback

    for name in ("ray.tune", "ray.train", "ray.air"):
        logging.getLogger(name).setLevel(logging.ERROR)
    live = progress if progress is not None else bool(getattr(stream, "isatty", lambda: False)())
    callback = ProgressCallback(len(trials), {c.trial_id: trial_label(c) for c in trials}, stream, live)
    _remove_stale_experiments(store)
    limit = max_concurrent or spec.execution.max_concurrent
    size = spec.execution.trials_per_tuner or default_trials_per_tuner(limit or placeable_trials(spec))
    ray_errors: dict[str, str] = {}
    starts = range(0, len(trials), size)
    try:
        for start in starts:
            ray_errors.update(_fit_tuner(spec, store, trials[start:start + size], limit, callback))
            release_memory()
    finally:
        callback.close()
    statuses = _reconcile(store, trials, ray_errors)
    return RunOutcome([c.trial_id for c in trials], statuses, 0.0, ray_errors, tuners=len(starts))


def default_trials_per_tuner(concurrency: int) -> int:
    """Trials per Tuner: Ray Tune holds ~15 KiB per trial until its Tuner ends, and each Tuner ends
    with a tail where slots idle while its last trials run (~(c-1)/2 trial times). 32·c² trials
    keep that tail under ~1.5 % of the Tuner's time and the driver's Tune state bounded."""
    return max(128, 32 * concurrency * concurrency)


def placeable_trials(spec: SweepSpec) -> int:
    """How many trials the connected Ray cluster can run at once under `resources`."""
    import ray

    total = ray.cluster_resources()
    fits = [int(float(total.get(key, 0.0)) // need) for key, need in _trial_needs(spec) if need > 0]
    return max(1, min(fits, default=1))


def available_cpus() -> float:
    import ray

    return float(ray.available_resources().get("CPU", 0.0))


def wait_for_released_cpus(free_before: float | None, timeout_s: float = 20.0) -> None:
    """In a Ray this driver did not start (a notebook, a test session), wait until the Tuners'
    actors, which Ray kills asynchronously, have given back the CPUs that were free before the
    sweep: a Tuner started right after would otherwise begin short of them."""
    import ray

    if free_before is None:
        return
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if available_cpus() >= min(free_before, ray.cluster_resources().get("CPU", 0.0)):
            return
        time.sleep(0.1)
    log.warning("the Ray cluster has fewer free CPUs %.0f s after the sweep than before it", timeout_s)


def release_memory() -> None:
    """Free what a finished Tuner left (its Trial objects, Tune's per-trial log keys) and return
    the freed heap to the OS; glibc keeps it otherwise, and a long-lived driver's RSS would creep up."""
    import ctypes
    import ctypes.util
    import gc

    from orchestrator.compaction import forget_encoder_log_keys

    forget_encoder_log_keys()
    gc.collect()
    libc_name = ctypes.util.find_library("c")
    if sys.platform.startswith("linux") and libc_name:
        try:
            ctypes.CDLL(libc_name).malloc_trim(0)
        except (OSError, AttributeError):  # not glibc (e.g. musl): nothing to trim
            pass


def _fit_tuner(spec: SweepSpec, store: RunStore, trials: list[TrialConfig], limit: int | None,
               callback: Any) -> dict[str, str]:
    """One Tuner over `trials`; returns Ray's error text per trial id that errored."""
    from ray import tune

    from orchestrator.compaction import CompactFinishedTrials

    options = run_options(spec)
    run_dir = store.uri if "://" in store.uri else store.root
    resources = {"cpu": spec.resources.cpu, "gpu": spec.resources.gpu}
    trainable = tune.with_resources(tune.with_parameters(_trainable(), sweep=sweep_payload(trials, run_dir, options)),
                                    resources)
    experiment = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}-{trials[0].trial_id[:6]}"
    storage = _storage_path(store)
    tuner = tune.Tuner(
        trainable,
        param_space={PARAM: tune.grid_search([c.trial_id for c in trials])},
        tune_config=tune.TuneConfig(
            max_concurrent_trials=limit,
            reuse_actors=True,
            trial_dirname_creator=_trial_dirname,
            trial_name_creator=_trial_dirname,
        ),
        run_config=tune.RunConfig(
            name=experiment,
            storage_path=storage,
            failure_config=tune.FailureConfig(max_failures=spec.execution.max_failures),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=1),
            verbose=0,
            callbacks=[callback, CompactFinishedTrials()],  # compaction last: it strips what others read
        ),
    )
    grid = tuner.fit()
    ray_errors: dict[str, str] = {}
    for result in grid:
        tid = trial_id_of(result.config) if result.config else None
        if tid and result.error is not None:
            ray_errors[tid] = f"{type(result.error).__name__}: {result.error}"
    if "://" not in store.uri:
        _remove_dir(os.path.join(storage, experiment))
    return ray_errors


def _trainable() -> Any:
    from orchestrator.trainable import train_trial

    return train_trial


def _reconcile(store: RunStore, trials: list[TrialConfig], ray_errors: dict[str, str]) -> dict[str, str]:
    """Final store statuses; a trial Ray gave up on without the trial recording it becomes `failed`."""
    out = {}
    for config in trials:
        tid = config.trial_id
        st = store.status(tid)
        status = st["status"] if st else "pending"
        if status not in FINISHED and status != "failed":
            writer = store.writer(tid)
            if store.config(tid) is None:
                store.write_json(store.trial_path(tid, "config.json"),
                                 {"trial_id": tid, **config.model_dump(mode="json")})
            error = ray_errors.get(tid) or "the trial ended without reporting a final status (worker lost?)"
            writer.set_status("failed", (st or {}).get("summary"), error=error)
            status = "failed"
        out[tid] = status
    return out


def _remove_stale_experiments(store: RunStore) -> None:
    """Ray Tune folders of earlier (finished or killed) drivers: we hold the lock, nobody uses them."""
    if "://" in store.uri:
        return
    root = store.path(RAY_DIR)
    if os.path.isdir(root):
        for name in os.listdir(root):
            _remove_dir(os.path.join(root, name))


def _remove_dir(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
