"""`hpt trial`: bad configs exit 2 naming the field, and write nothing; a good one runs."""

from __future__ import annotations

import os

import pytest

from orchestrator.cli import main

GOOD = """
workload: {kind: gpt2, seq_len: 16, batch_size: 4, steps: 3, eval_every: 3, eval_batches: 1, log_every: 1}
width: 32
depth: 1
optimizer: {name: adamw, lr: 0.001}
"""


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (GOOD.replace("width: 32", "width: wide"), "width"),
        (GOOD.replace("depth: 1", "depth: 1\nlearning_rate: 3"), "learning_rate"),
        (GOOD.replace("steps: 3", "steps: -3"), "workload.steps"),
        (GOOD.replace("lr: 0.001", "lr: -1"), "optimizer.lr"),
        (GOOD.replace("kind: gpt2", "kind: bert"), "workload"),
        ("width: [", "not valid YAML"),
    ],
)
def test_bad_trial_config_exits_2_naming_the_field(tmp_path, capsys, text, field):
    path = tmp_path / "trial.yaml"
    path.write_text(text)
    out = tmp_path / "out"
    assert main(["trial", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert field in err and "error:" in err
    assert not os.path.exists(out)


def test_good_trial_runs_and_prints_where_results_are(tmp_path, capsys):
    path = tmp_path / "trial.yaml"
    path.write_text(GOOD.replace("head_dim", "head_dim") .replace("seq_len: 16", "seq_len: 16, head_dim: 32"))
    assert main(["trial", str(path), "--out", str(tmp_path / "out"), "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "completed after 3 steps" in out and str(tmp_path / "out") in out
