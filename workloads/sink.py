"""The small interface through which a trial hands out its results.

`results.store.TrialWriter` implements it on the Parquet store; the orchestrator wraps that to
add Ray Tune reporting and checkpoints. Keeping it here means `workloads` never imports either.
"""

from __future__ import annotations

from typing import Any, Protocol

Row = dict[str, Any]


class TrialSink(Protocol):
    def begin(self, config: dict[str, Any]) -> None:
        """The trial starts (or restarts): record its config and status `running`."""

    def load_checkpoint(self) -> bytes | None:
        """The latest checkpoint of this trial, or None to start from scratch."""

    def report(self, step: int, metrics: Row) -> None:
        """A logged step's metrics (for live progress); cheap, called every `log_every` steps."""

    def checkpoint(self, step: int, state: bytes, curve: list[Row], layers: list[Row]) -> None:
        """Persist resumable state together with the curve so far (the two always agree)."""

    def finish(
        self,
        status: str,
        summary: Row,
        curve: list[Row],
        layers: list[Row],
        params: list[Row],
        error: str | None = None,
    ) -> None:
        """Final status (`completed`, `diverged`, `failed`), final metrics and tables."""
