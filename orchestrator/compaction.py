"""Keep the driver's memory flat over a sweep: shrink Ray Tune's bookkeeping of finished trials.

Ray Tune keeps every Trial of an experiment in the driver until `Tuner.fit()` returns, and for
each one running statistics (min/max/avg and two deques) of every numeric key of every result,
plus JSON snapshots of all of that for its experiment checkpoints: ~50 KiB per trial, so a
sweep's driver grew with its length. The store, not Tune, holds our results; once a trial is
finished Tune needs only its status and the last result's few keys that its callbacks and
`ResultGrid` read. This callback drops the rest; Tune re-snapshots the smaller trial when it
marks it terminated.

It also forgets, after a sweep, the per-trial "cannot JSON-encode" keys that Tune's encoder
adds to Ray's process-wide `log_once` set (one per trial storage context and checkpoint
manager: ~1 KiB per trial for the life of the process).
"""

from __future__ import annotations

from typing import Any

from ray import tune

# what survives of a finished trial's last result: Tune's own control keys and what our
# ProgressCallback and the runner read (hpt_status, step)
KEPT_RESULT_KEYS = ("done", "training_iteration", "trial_id", "hpt_status", "step")
ENCODER_LOG_PREFIX = "tune_func_encode:"


def compact_trial(trial: Any) -> None:
    """Drop a finished trial's running metric statistics and all but a few last-result keys."""
    meta = trial.run_metadata
    last = meta.last_result or {}
    meta.last_result = {k: last[k] for k in KEPT_RESULT_KEYS if k in last}
    meta.metric_analysis = {}
    meta.metric_n_steps = {}
    trial.invalidate_json_state()


class CompactFinishedTrials(tune.Callback):
    """Compacts each trial as it completes or errors out (register after callbacks that read it)."""

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        compact_trial(trial)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        compact_trial(trial)


def forget_encoder_log_keys() -> int:
    """Remove Tune's per-object 'unable to encode' keys from Ray's log_once set; returns how many."""
    from ray.util import debug

    # private set, no public way to list keys; a missing attribute (another Ray) just skips this
    logged = getattr(debug, "_logged", None)
    if not isinstance(logged, set):
        return 0
    stale = [k for k in logged if isinstance(k, str) and k.startswith(ENCODER_LOG_PREFIX)]
    logged.difference_update(stale)
    return len(stale)
