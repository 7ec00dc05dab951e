"""`perfmodel validate`: the figures it prints are recomputed here from single predictions."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from support import spec_predict as predict

from perfmodel.cli import main
from perfmodel.present.validation_report import markdown
from perfmodel.spec.scenario import parse_scenario
from perfmodel.studies.observed.validation import load_cases, validate

RUNS = Path(__file__).resolve().parents[2] / "perfmodel" / "data" / "published_runs.yaml"
IDS = ("megatron2021_t1_1.7B", "megatron2021_t1_18.4B", "dgxc_1b9bb6b_h100_llama3_8b_bf16_8gpu")


@pytest.fixture(scope="module")
def small_cases():
    by_id = {c["id"]: c for c in load_cases(RUNS)}
    cases = [by_id[i] for i in IDS]
    return cases + [{"id": "no_scenario_here", "why_not_runnable": "layout not published"}]


def _tps(case):
    """Measured before derived; a published tokens/s per GPU before one from the step time."""
    s = case["scenario"]
    for block in (case.get("measured") or {}, case.get("derived") or {}):
        if block.get("tokens_per_s_per_gpu"):
            return block["tokens_per_s_per_gpu"]
        if block.get("step_time_s"):
            return s["global_batch_size"] * s["seq_length"] / (block["step_time_s"] * s["num_gpus"])
    raise AssertionError(case["id"])


def test_report_figures_are_the_mean_of_single_predictions(small_cases):
    report = validate(small_cases, profile=None)   # spec defaults, no profiles
    assert [r.id for r in report.results] == list(IDS)
    assert [(s.id, s.reason) for s in report.skipped] == [("no_scenario_here", "layout not published")]
    errors = [predict(parse_scenario(c["scenario"])).tokens_per_s_per_gpu / _tps(c) - 1.0 for c in small_cases[:3]]
    assert [r.error for r in report.results] == pytest.approx(errors, rel=1e-12)
    assert report.mape() == pytest.approx(np.mean(np.abs(errors)))
    assert report.mape("a100-sxm-80gb") == pytest.approx(np.mean(np.abs(errors[:2])))
    assert report.by_hardware()["h100-sxm"] == {"cases": 1, "mape": pytest.approx(abs(errors[2]))}
    by_source = report.by_source()
    assert sum(v["cases"] for v in by_source.values()) == 3
    for src, v in by_source.items():
        errs = [r.error for r in report.results if r.source == src]
        assert v["mape"] == pytest.approx(np.mean(np.abs(errs)))
        assert v["mean_error"] == pytest.approx(np.mean(errs))
    assert report.worst(1)[0].error == max(errors, key=abs)


def test_a_variant_spec_counts_under_its_gpu(small_cases):
    h100 = small_cases[2]
    variant = {**h100, "id": "same_run_on_the_500w_variant",
               "scenario": {**h100["scenario"], "hardware": "h100-sxm-hbm2e-500w"}}
    report = validate([h100, variant], profile=None)
    errs = [abs(r.error) for r in report.results]
    assert set(report.by_hardware()) == {"h100-sxm", "h100-sxm-hbm2e-500w"}
    assert report.by_gpu() == {"h100-sxm": {"cases": 2, "mape": pytest.approx(np.mean(errs)),
                                            "specs": ["h100-sxm", "h100-sxm-hbm2e-500w"]}}
    # the lower peak and HBM bandwidth make the variant slower on the same run
    assert report.results[1].predicted_tokens_per_s_per_gpu < report.results[0].predicted_tokens_per_s_per_gpu
    assert "h100-sxm-hbm2e-500w 1 at" in markdown(report, profiles=False, notes={})


def test_markdown_lists_summary_sources_and_every_case(small_cases):
    text = markdown(validate(small_cases, profile=None), profiles=False, notes={})
    assert "--no-profile" in text and "## By source" in text and "## Not runnable" in text
    for i in IDS:
        assert f"| {i} |" in text


def test_cli_json_and_one_line_errors(tmp_path, capsys, small_cases):
    path = tmp_path / "cases.yaml"
    path.write_text(yaml.safe_dump({"cases": small_cases}))
    assert main(["validate", str(path), "--format", "json", "--no-profile"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["num_cases"] == 3 and len(out["skipped"]) == 1
    assert {"mape_tokens_per_s_per_gpu", "by_hardware", "by_source", "worst", "cases"} <= set(out)

    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"cases": [{"scenario": {}}]}))
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "cases[0]" in err and "id" in err


def _result(id_, error, source="s", gpu="g", model="m"):
    from perfmodel.studies.observed.validation import CaseResult
    return CaseResult(id=id_, hardware=gpu, source=source, trust="high", basis="measured",
                      measured_tokens_per_s_per_gpu=100.0, predicted_tokens_per_s_per_gpu=100.0 * (1 + error),
                      predicted_step_time_s=1.0, measured_step_time_s=None, measured_mfu=None, predicted_mfu=0.5,
                      bottleneck="compute", error=error, gpu=gpu, model=model)


def test_what_if_pairs_only_cases_of_one_source_gpu_and_model():
    from perfmodel.studies.observed.validation import Report
    # +10% and -10% on one stack: the predicted ratio 1.1 / 0.9 is 22.2% off the measured 1.
    # +50% and +50%: a common offset, the ratio is exact. The lone cases pair with nothing.
    results = (_result("a", 0.10), _result("b", -0.10),
               _result("c", 0.50, source="t"), _result("d", 0.50, source="t"),
               _result("e", 0.30, gpu="other"), _result("f", -0.30, model="other"))
    wi = Report(results=results, skipped=()).what_if()
    assert wi["pairs"] == 2 and wi["cases"] == 4
    assert wi["mean"] == pytest.approx((1.1 / 0.9 - 1 + 0.0) / 2)
    assert [(g["source"], g["pairs"]) for g in wi["groups"]] == [("s", 1), ("t", 1)]
    assert wi["groups"][0]["mean"] == pytest.approx(2 / 9)


def test_what_if_ratio_is_the_ratio_of_single_predictions():
    by_id = {c["id"]: c for c in load_cases(RUNS)}
    a, b = (by_id[f"dgxc_1b9bb6b_h100_llama3_8b_bf16_{n}gpu"] for n in (8, 16))
    report = validate([a, b], profile=None)
    pred = [predict(parse_scenario(c["scenario"])).tokens_per_s_per_gpu for c in (a, b)]
    expected = abs((pred[0] / pred[1]) / (_tps(a) / _tps(b)) - 1)
    wi = report.to_dict()["what_if"]
    assert wi["pairs"] == 1 and wi["mean"] == pytest.approx(expected)
    assert "## What-if accuracy" in markdown(report, profiles=False, notes={})


def test_repeated_jobs_floor_by_hand():
    """Two cases of one job measured at 100 and 200 tok/s: predicting 100 leaves 0 + 0.5, 200
    leaves 1.0 + 0, so 0.5 stays whatever the model; three more cases (two distinct jobs)
    add nothing. Floor = 0.5 / 5 cases."""
    from dataclasses import replace

    from perfmodel.studies.observed.validation import Report
    a = replace(_result("a", 0.0), scenario_key="job1")
    b = replace(_result("b", 0.0), scenario_key="job1", measured_tokens_per_s_per_gpu=200.0)
    others = (replace(_result("c", 0.2), scenario_key="job2"), replace(_result("d", 0.1), scenario_key="job3"),
              replace(_result("e", 0.1), scenario_key="job3"))
    rep = Report(results=(a, b) + others, skipped=()).repeats()
    assert [g["cases"] for g in rep["groups"]] == [["a", "b"], ["d", "e"]]
    assert rep["groups"][0]["least_abs_error_sum"] == pytest.approx(0.5)
    assert rep["groups"][0]["spread"] == pytest.approx(1.0)
    assert rep["groups"][1]["least_abs_error_sum"] == 0.0
    assert rep["floor_mape"] == pytest.approx(0.5 / 5)


def test_equal_scenarios_share_a_key_and_the_name_is_not_part_of_it():
    by_id = {c["id"]: c for c in load_cases(RUNS)}
    case = by_id["dgxc_1b9bb6b_h100_llama3_8b_bf16_8gpu"]
    twin = {**case, "id": "twin", "scenario": {**case["scenario"], "name": "another name"}}
    other = {**case, "id": "other", "scenario": {**case["scenario"], "global_batch_size": 2 * case["scenario"]["global_batch_size"]}}
    report = validate([case, twin, other], profile=None)
    keys = {r.id: r.scenario_key for r in report.results}
    assert keys[case["id"]] == keys["twin"] != keys["other"]
    assert report.repeats()["groups"][0]["cases"] == [case["id"], "twin"]
    assert "## Repeated jobs" in markdown(report, profiles=False, notes={})


def test_published_runs_the_model_says_do_not_fit_are_listed(small_cases):
    h100 = small_cases[2]
    s = h100["scenario"]
    # the same run with 64 sequences per micro-batch: its activations alone exceed 80 GB
    big = {**h100, "id": "same_run_64_sequences_per_micro_batch",
           "scenario": {**s, "micro_batch_size": 64, "global_batch_size": 64 * s["num_gpus"]},
           "assumptions": ["zero_stage: 1 assumed", "memory: the recipe\n  offloads activations"]}
    report = validate([h100, big], profile=None)
    fits = [predict(parse_scenario(c["scenario"])).fits_in_memory for c in (h100, big)]
    assert fits == [True, False]
    assert [r.predicted_fits for r in report.results] == fits
    assert [r.id for r in report.not_fitting()] == [big["id"]]
    assert report.to_dict()["predicted_not_to_fit"] == [big["id"]]
    assert report.results[1].usable_memory_gib == pytest.approx(79.1, abs=0.05)
    text = markdown(report, profiles=False, notes={})
    assert "## Memory fit of published runs" in text and "1 of 2 runs" in text
    assert f"| {big['id']} |" in text.split("## Memory fit of published runs")[1]
    assert report.results[1].memory_note == "memory: the recipe offloads activations"
    assert report.results[0].memory_note == ""
    assert "| memory: the recipe offloads activations |" in text
