"""The driver stays small over long sweeps: compacted Tune trials, successive Tuners.

Real Ray Tune objects and a real local Ray; the memory figures themselves are measured by
`benchmarks/bench_orchestrator.py`.
"""

from __future__ import annotations

import os

import pytest
from ray.tune.experiment import Trial
from ray.util import debug

from orchestrator.compaction import KEPT_RESULT_KEYS, compact_trial, forget_encoder_log_keys
from orchestrator.runner import default_trials_per_tuner, execute, plan_sweep
from orchestrator.spec import load_spec
from results.store import load_curves, load_trials
from tests.orchestrator.helpers import hpt, tiny_spec, write_spec


def _finished_trial() -> Trial:
    trial = Trial("train_trial", stub=True, config={"trial_id": "abc"})
    for i, loss in enumerate((2.0, 1.5, 1.0), start=1):
        trial.update_last_result({"train_loss": loss, "val_loss": loss + 0.1, "step": 10 * i, "training_iteration": i,
                                  "time_total_s": 0.3 * i, "time_this_iter_s": 0.3, "done": i == 3,
                                  "hpt_status": "completed", "config": {"trial_id": "abc"}})
    return trial


def test_compacting_a_finished_trial_drops_its_metric_statistics():
    trial = _finished_trial()
    assert {"train_loss", "val_loss", "time_total_s"} <= set(trial.run_metadata.metric_analysis)
    _, metadata_json = trial.get_json_state()
    before = len(metadata_json)

    compact_trial(trial)

    assert trial.run_metadata.metric_analysis == {} and trial.run_metadata.metric_n_steps == {}
    assert set(trial.last_result) <= set(KEPT_RESULT_KEYS)
    assert trial.last_result["hpt_status"] == "completed" and trial.last_result["step"] == 30
    assert trial.last_result["done"] is True
    _, metadata_json = trial.get_json_state()  # the snapshot Tune keeps for its experiment state shrinks too
    assert len(metadata_json) < before / 2, (len(metadata_json), before)


def test_forgetting_encoder_log_keys_keeps_other_keys():
    debug.log_once("tune_func_encode:StorageContext<trial 1>")
    debug.log_once("tune_func_encode:StorageContext<trial 2>")
    debug.log_once("hpt-test-other-key")
    assert forget_encoder_log_keys() >= 2
    assert not any(str(k).startswith("tune_func_encode:") for k in debug._logged)
    assert not debug.log_once("hpt-test-other-key")  # still logged once


def test_default_trials_per_tuner_grows_with_concurrency():
    assert default_trials_per_tuner(1) == 128
    assert default_trials_per_tuner(2) == 128
    assert default_trials_per_tuner(8) == 2048


@pytest.mark.usefixtures("ray_session")
def test_a_long_sweep_runs_as_successive_tuners_each_trial_once(tmp_path, capsys):
    store = tmp_path / "runs"
    spec_dict = tiny_spec(store, name="chunks", steps=10, execution={"trials_per_tuner": 2, "checkpoint_every": 0})
    path = write_spec(tmp_path / "s.yaml", spec_dict)
    spec, _ = load_spec(str(path))
    plan = plan_sweep(spec, spec.run_dir())
    with open(os.devnull, "w") as quiet:
        outcome = execute(spec, plan.run_dir, plan.to_run(), progress=False, stream=quiet)

    assert outcome.tuners == 3  # 6 trials, 2 per Tuner
    assert set(outcome.statuses.values()) == {"completed"} and len(outcome.statuses) == 6
    trials = load_trials(plan.run_dir)
    assert len(trials) == 6 and set(trials["status"]) == {"completed"}
    curves = load_curves(plan.run_dir)
    for tid, curve in curves.groupby("trial_id"):
        assert sorted(curve["step"]) == [0, 5, 10], tid  # each logged step once
    assert not os.listdir(os.path.join(plan.run_dir, "_ray"))  # every Tuner's scratch folder removed

    assert hpt("run", path, "--no-progress") == 0
    assert "nothing to run" in capsys.readouterr().out


def test_trials_per_tuner_must_be_positive(tmp_path, capsys):
    store = tmp_path / "runs"
    path = write_spec(tmp_path / "s.yaml", tiny_spec(store, execution={"trials_per_tuner": 0}))
    assert hpt("validate", path) == 2
    err = capsys.readouterr().err
    assert "execution.trials_per_tuner" in err and "(got 0)" in err
    assert not store.exists()
