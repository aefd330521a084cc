"""Live progress of a sweep (trials done / running / failed / diverged, ETA) instead of Ray's tables.

On a terminal: a tqdm bar. Otherwise (logs, CI, jobs): one line per finished trial.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Any

from ray import tune


def _tid(trial: Any) -> str:
    return trial.config["trial_id"]


class ProgressCallback(tune.Callback):
    def __init__(self, total: int, labels: dict[str, str], stream: Any = None, live: bool = False) -> None:
        self.total = total
        self.labels = labels
        self.stream = stream
        self.counts: Counter[str] = Counter()
        self.running: set[str] = set()
        self.started = time.monotonic()
        self.bar: Any = None
        if live:
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="trial", file=self._out(), dynamic_ncols=True, mininterval=0.5)
            self._refresh()

    def __getstate__(self) -> dict[str, Any]:
        # Tune pickles the run config (tuner.pkl): never the bar or the stream
        return {k: (None if k in ("bar", "stream") else v) for k, v in self.__dict__.items()}

    def _out(self) -> Any:
        return self.stream or sys.stderr

    def _refresh(self) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(
                f"running={len(self.running)} completed={self.counts['completed']} "
                f"diverged={self.counts['diverged']} failed={self.counts['failed']}", refresh=True)

    def _done(self, trial: Any, status: str) -> None:
        tid = _tid(trial)
        self.running.discard(tid)
        self.counts[status] += 1
        n = sum(self.counts.values())
        if self.bar is not None:
            self.bar.update(1)
            self._refresh()
            return
        elapsed = time.monotonic() - self.started
        eta = elapsed / n * (self.total - n) if n else 0.0
        print(f"[{n}/{self.total} {elapsed:.1f}s] {status:9s} {tid} {self.labels.get(tid, '')}  "
              f"(running {len(self.running)}, failed {self.counts['failed']}, "
              f"diverged {self.counts['diverged']}, ETA {eta:.0f}s)", file=self._out(), flush=True)

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.running.add(_tid(trial))
        self._refresh()

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.running.discard(_tid(trial))
        if self.bar is None:
            print(f"retrying {_tid(trial)} from its last checkpoint", file=self._out(), flush=True)
        self._refresh()

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._done(trial, (trial.last_result or {}).get("hpt_status", "completed"))

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._done(trial, "failed")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
