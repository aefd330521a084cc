"""Fault injection for testing recovery: make a chosen trial raise or die at a chosen step.

Set HPT_FAULTS to a JSON file {trial_id or "*": {"raise_at_step": n} | {"kill_at_step": n}}.
`raise_at_step` raises on every attempt while the entry exists (delete it to "fix" the trial);
`kill_at_step` SIGKILLs the worker process once (a marker file records that it fired).
Without HPT_FAULTS nothing happens.
"""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass

ENV_VAR = "HPT_FAULTS"


class InjectedFault(RuntimeError):
    pass


@dataclass
class FaultPlan:
    trial_id: str
    raise_at_step: int | None = None
    kill_at_step: int | None = None
    marker: str | None = None

    def before_step(self, step: int) -> None:
        if self.raise_at_step is not None and step == self.raise_at_step:
            raise InjectedFault(f"injected fault in trial {self.trial_id} at step {step}")
        if self.kill_at_step is not None and step == self.kill_at_step and self.marker:
            if not os.path.exists(self.marker):
                with open(self.marker, "w") as f:
                    f.write(str(step))
                os.kill(os.getpid(), signal.SIGKILL)


def plan_for(trial_id: str) -> FaultPlan:
    path = os.environ.get(ENV_VAR)
    if not path or not os.path.exists(path):
        return FaultPlan(trial_id)
    with open(path) as f:
        entries = json.load(f)
    entry = entries.get(trial_id) or entries.get("*") or {}
    return FaultPlan(
        trial_id,
        raise_at_step=entry.get("raise_at_step"),
        kill_at_step=entry.get("kill_at_step"),
        marker=f"{path}.{trial_id}.killed",
    )
