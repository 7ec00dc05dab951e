"""``perfmodel diagnose``, ``sensitivity``, ``read-log`` and ``predict --anchor``: JSON equal to the
API's ``to_dict()``, strict JSON, one-line errors with exit status 2; and the symptom table as data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import perfmodel as pm
from perfmodel.cli import main
from perfmodel.engine.evaluate import COMPONENTS, LENS
from perfmodel.studies.observed.symptoms import PATTERNS, SYMPTOMS, TERMS

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "data" / "logs"
EXAMPLE = ROOT / "perfmodel" / "data" / "example_scenario.yaml"


def _json(capsys, argv) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))


def test_diagnose_json_is_the_api(capsys):
    out = _json(capsys, ["diagnose", str(EXAMPLE), "--log", str(LOGS / "megatron_sample.log"), "--format", "json"])
    runs, assumed = pm.load_runs_assumed(EXAMPLE, [LOGS / "megatron_sample.log"])
    api = pm.diagnose(runs)
    assert out.pop("assumptions") == list(assumed)
    assert out == json.loads(json.dumps(api.to_dict()))
    assert out["runs"][0]["measured_step_time_s"] == pytest.approx(15.2)
    assert [s["key"] for s in out["symptoms"]] == ["slow_start"]


def test_diagnose_table_names_causes_lenses_and_the_bottleneck(capsys):
    assert main(["diagnose", str(EXAMPLE), "--log", str(LOGS / "scaling_series.csv")]) == 0
    text = capsys.readouterr().out
    assert "Likely causes" in text and "Scaling: tokens/s per GPU against 64 GPUs" in text
    assert "bottleneck: peak FLOP/s (co-design)" in text
    assert "pattern" in text and "measure " in text


def test_read_log_writes_a_run_file_diagnose_reads(tmp_path, capsys):
    assert main(["read-log", str(LOGS / "nemo2_sample.log"), "--scenario", str(EXAMPLE)]) == 0
    run = tmp_path / "run.yaml"
    run.write_text(capsys.readouterr().out)
    doc = yaml.safe_load(run.read_text())
    assert doc["cases"][0]["measured"]["step_times_s"][1] == 6.105
    out = _json(capsys, ["diagnose", str(run), "--format", "json"])
    assert out["runs"][0]["measured_step_time_s"] == pytest.approx(6.099)


def test_predict_anchor_keeps_the_contract_keys(capsys):
    out = _json(capsys, ["predict", str(EXAMPLE), "--anchor", str(EXAMPLE), "--log",
                         str(LOGS / "megatron_sample.log"), "--format", "json"])
    assert {"step_time_s", "tokens_per_s_per_gpu", "mfu", "breakdown_s", "bottleneck"} <= set(out)
    assert out["step_time_s"] == pytest.approx(15.2, rel=1e-3)     # the what-if is the anchor's own job
    assert set(out["anchor"]["factors"]) == {"compute", "communication"}
    band = out["anchored_band"]["step_time_s"]
    assert band["p10"] < band["p50"] < band["p90"]


def test_sensitivity_json(capsys):
    out = _json(capsys, ["sensitivity", str(EXAMPLE), "--steps", "2", "--format", "json", "--profile", "none"])
    assert out == json.loads(json.dumps(pm.sensitivity(pm.load_scenario(EXAMPLE), profile=None,
                                                       path_steps=2).to_dict()))
    assert [e["resource"] for e in out["effects"]][0] == "peak_flops" and len(out["path"]) == 3


@pytest.mark.parametrize("argv,field", [
    (["diagnose", str(EXAMPLE)], "no measured run"),
    (["diagnose", str(EXAMPLE), "--log", str(LOGS / "unknown.log")], "not a training log"),
    (["diagnose", str(EXAMPLE), "--log", str(ROOT / "tests" / "data" / "nccl" / "all_reduce_perf_sample.txt")],
     "perfmodel calibrate"),
    (["diagnose", str(EXAMPLE), "--log", "/nonexistent/x.log"], "file not found"),
    (["predict", "--log", str(LOGS / "step_times.csv")], "give --anchor too"),
    (["sensitivity", str(EXAMPLE), "--steps", "99"], "path_steps"),
])
def test_errors_are_one_line_exit_2(capsys, argv, field):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert field in err and err.count("\n") == 1 and "Traceback" not in err


def test_the_symptom_table_is_whole():
    """LENSES.md's table has nine rows, five of which a log can show; every step term has its
    words, and a term's lens is the engine's."""
    assert len(SYMPTOMS) == 9 and sum(s.detector for s in SYMPTOMS) == 5
    assert all(set(s.patterns) <= set(PATTERNS) for s in SYMPTOMS)
    assert set(TERMS) == set(COMPONENTS) | {"memory_bandwidth"}
    assert all(set(t.patterns) <= set(PATTERNS) for t in TERMS.values())
    assert {s.lens for s in SYMPTOMS} <= set(LENS.values())
