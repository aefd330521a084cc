"""The Parquet store: one run directory per sweep, one folder per trial.

    RUN_DIR/spec.yaml                  the spec as submitted
    RUN_DIR/trials/<trial_id>/config.json
    RUN_DIR/trials/<trial_id>/status.json   {"status", "error", "summary", "updated"}
    RUN_DIR/trials/<trial_id>/curve.parquet   one row per logged step
    RUN_DIR/trials/<trial_id>/layers.parquet  per-layer diagnostics
    RUN_DIR/trials/<trial_id>/params.parquet  the resolved per-parameter table
    RUN_DIR/trials/<trial_id>/checkpoint.pt   resumable state (removed when the trial ends)

Every file is written under a temporary name and renamed, so a reader never sees half a file.
RUN_DIR may be a local path or any URI `pyarrow.fs` opens (s3://, gs://, ...).
"""

from __future__ import annotations

import io
import json
import os
import time
import uuid
from collections.abc import Iterable
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

STATUSES = ("pending", "running", "completed", "diverged", "failed")
FINISHED = ("completed", "diverged")
CURVE_COLUMNS = ("trial_id", "step", "items", "train_loss", "val_loss", "lr", "grad_norm", "wall_time_s")


def open_fs(uri: str) -> tuple[pafs.FileSystem, str]:
    """A filesystem and a path inside it; plain paths become absolute local paths."""
    if "://" in uri:
        return pafs.FileSystem.from_uri(uri)
    return pafs.LocalFileSystem(), os.path.abspath(uri)


class RunStore:
    """Read/write access to one run directory."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.fs, self.root = open_fs(uri)

    # -- paths -------------------------------------------------------------------------------
    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def trial_path(self, trial_id: str, name: str = "") -> str:
        return self.path("trials", trial_id, name) if name else self.path("trials", trial_id)

    def exists(self) -> bool:
        return self.fs.get_file_info(self.root).type == pafs.FileType.Directory

    # -- atomic primitives ---------------------------------------------------------------------
    def write_bytes(self, path: str, data: bytes) -> None:
        parent = path.rsplit("/", 1)[0]
        self.fs.create_dir(parent, recursive=True)
        tmp = f"{parent}/.tmp-{uuid.uuid4().hex}"
        with self.fs.open_output_stream(tmp) as out:
            out.write(data)
        self.fs.move(tmp, path)

    def read_bytes(self, path: str) -> bytes | None:
        try:
            with self.fs.open_input_stream(path) as f:
                return f.read()
        except (FileNotFoundError, OSError):
            return None

    def write_json(self, path: str, obj: Any) -> None:
        self.write_bytes(path, json.dumps(obj, indent=1, sort_keys=True, default=str).encode())

    def read_json(self, path: str) -> Any | None:
        data = self.read_bytes(path)
        return None if data is None else json.loads(data)

    def write_table(self, path: str, rows: list[dict[str, Any]]) -> None:
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows), buf, compression="zstd")
        self.write_bytes(path, buf.getvalue())

    def delete(self, path: str) -> None:
        try:
            self.fs.delete_file(path)
        except (FileNotFoundError, OSError):
            pass

    # -- run level -----------------------------------------------------------------------------
    def write_spec(self, text: str) -> None:
        self.write_bytes(self.path("spec.yaml"), text.encode())

    def read_spec(self) -> str | None:
        data = self.read_bytes(self.path("spec.yaml"))
        return None if data is None else data.decode()

    def trial_ids(self) -> list[str]:
        selector = pafs.FileSelector(self.path("trials"), allow_not_found=True)
        infos = self.fs.get_file_info(selector)
        return sorted(i.base_name for i in infos if i.type == pafs.FileType.Directory)

    def status(self, trial_id: str) -> dict[str, Any] | None:
        return self.read_json(self.trial_path(trial_id, "status.json"))

    def statuses(self) -> dict[str, str]:
        """trial_id -> status for every trial the store knows (the source of truth of what is done)."""
        out = {}
        for tid in self.trial_ids():
            st = self.status(tid)
            out[tid] = st["status"] if st else "pending"
        return out

    def config(self, trial_id: str) -> dict[str, Any] | None:
        return self.read_json(self.trial_path(trial_id, "config.json"))

    def writer(self, trial_id: str) -> TrialWriter:
        return TrialWriter(self, trial_id)


class TrialWriter:
    """Implements `workloads.sink.TrialSink` on the store (used directly by `hpt trial`)."""

    def __init__(self, store: RunStore, trial_id: str) -> None:
        self.store = store
        self.trial_id = trial_id

    def _p(self, name: str) -> str:
        return self.store.trial_path(self.trial_id, name)

    def set_status(self, status: str, summary: dict | None = None, error: str | None = None) -> None:
        assert status in STATUSES, status
        self.store.write_json(
            self._p("status.json"),
            {"status": status, "error": error, "summary": summary or {}, "updated": time.time()},
        )

    def begin(self, config: dict[str, Any]) -> None:
        self.store.write_json(self._p("config.json"), config)
        self.set_status("running")

    def load_checkpoint(self) -> bytes | None:
        return self.store.read_bytes(self._p("checkpoint.pt"))

    def report(self, step: int, metrics: dict[str, Any]) -> None:
        pass

    def checkpoint(self, step: int, state: bytes, curve: list[dict], layers: list[dict]) -> None:
        # Curve first, then checkpoint: a crash in between leaves a curve that the resumed
        # trial overwrites, never a checkpoint ahead of its curve.
        self._write_curves(curve, layers)
        self.store.write_bytes(self._p("checkpoint.pt"), state)

    def _write_curves(self, curve: list[dict], layers: list[dict]) -> None:
        self.store.write_table(self._p("curve.parquet"), [{"trial_id": self.trial_id, **r} for r in curve])
        if layers:
            self.store.write_table(
                self._p("layers.parquet"), [{"trial_id": self.trial_id, **r} for r in layers]
            )

    def finish(
        self,
        status: str,
        summary: dict[str, Any],
        curve: list[dict],
        layers: list[dict],
        params: list[dict],
        error: str | None = None,
    ) -> None:
        self._write_curves(curve, layers)
        if params:
            self.store.write_table(self._p("params.parquet"), params)
        self.set_status(status, summary, error)
        if status in FINISHED:  # a failed trial keeps its checkpoint so a rerun resumes from it
            self.store.delete(self._p("checkpoint.pt"))


# -- readers ---------------------------------------------------------------------------------


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def load_trials(run_dir: str) -> pd.DataFrame:
    """One row per trial: trial_id, status, error, flattened config (dotted names such as
    `optimizer.lr`, `workload.steps`, `width`), and the final metrics of its summary."""
    store = RunStore(run_dir)
    rows = []
    for tid in store.trial_ids():
        config = store.config(tid)
        if config is None:
            continue
        status = store.status(tid) or {"status": "pending", "error": None, "summary": {}}
        rows.append(
            {
                "trial_id": tid,
                "status": status["status"],
                "error": status.get("error"),
                **_flatten(config),
                **status.get("summary", {}),
            }
        )
    return pd.DataFrame(rows)


def load_curves(
    run_dir: str, trial_ids: Iterable[str] | None = None, columns: list[str] | None = None
) -> pd.DataFrame:
    """Long table of logged steps (trial_id, step, items, train_loss, val_loss, lr, grad_norm,
    wall_time_s, and workload-specific metrics such as val_accuracy) for the given trials."""
    return _load_trial_tables(run_dir, "curve.parquet", trial_ids, columns)


def load_layers(run_dir: str, trial_ids: Iterable[str] | None = None) -> pd.DataFrame:
    """Per-layer diagnostics over steps (trial_id, step, name, role, update_rms, spectral_norm, ...)."""
    return _load_trial_tables(run_dir, "layers.parquet", trial_ids, None)


def load_params(run_dir: str, trial_id: str) -> pd.DataFrame:
    store = RunStore(run_dir)
    data = store.read_bytes(store.trial_path(trial_id, "params.parquet"))
    return pd.DataFrame() if data is None else pq.read_table(io.BytesIO(data)).to_pandas()


def _load_trial_tables(
    run_dir: str, name: str, trial_ids: Iterable[str] | None, columns: list[str] | None
) -> pd.DataFrame:
    store = RunStore(run_dir)
    ids = store.trial_ids() if trial_ids is None else list(trial_ids)
    paths = [store.trial_path(t, name) for t in ids]
    infos = store.fs.get_file_info(paths)
    present = [i.path for i in infos if i.type == pafs.FileType.File]
    if not present:
        return pd.DataFrame(columns=list(columns or CURVE_COLUMNS))
    tables = [pq.read_table(p, filesystem=store.fs, columns=columns) for p in present]
    return pa.concat_tables(tables, promote_options="permissive").to_pandas()
