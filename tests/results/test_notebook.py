"""notebooks/transfer.ipynb runs headless (nbclient) on a small run that is still in progress."""

from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from synth_runs import make_run

nbclient = pytest.importorskip("nbclient")

REPO = Path(__file__).resolve().parents[2]


def test_transfer_notebook_executes_on_in_progress_run(tmp_path, monkeypatch):
    run = tmp_path / "run"
    make_run(str(run), widths=(64, 128), log2_lrs=range(-11, -5), seeds=(0, 1), diverge_above=2.0,
             with_layers=True, status_of=lambda c: "running" if c["width"] == 128 and c["seed"] == 1 else None)
    # a trial that has only just started: config written, no status, no curve
    (run / "trials" / "zzfresh").mkdir()
    (run / "trials" / "zzfresh" / "config.json").write_text((next((run / "trials").iterdir()) / "config.json")
                                                           .read_text())
    monkeypatch.setenv("HPT_RUN_DIR", str(run))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    nb = nbformat.read(REPO / "notebooks" / "transfer.ipynb", as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(REPO)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 5  # lr curves, lr* vs width, heatmap, loss curves, layer diagnostics
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "TRANSFER VERDICTS" in text and "running/pending" in text
