"""``perfmodel serve`` and ``perfmodel validate-serving``: thin over ``pm.serve`` and
``pm.validate_serving``, the JSON names its results ``ttft_s`` and ``tpot_s``."""

from __future__ import annotations

import json

import pytest
import yaml

import perfmodel as pm
from perfmodel.cli import main
from perfmodel.spec.paths import PROJECT_DIR

EXAMPLE = str(PROJECT_DIR / "perfmodel" / "data" / "example_serving.yaml")
RUNS = str(PROJECT_DIR / "perfmodel" / "data" / "serving_runs.yaml")


def test_serve_json_is_the_api(capsys):
    assert main(["serve", EXAMPLE, "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    for key in ("ttft_s", "tpot_s", "output_tokens_per_s_per_gpu", "output_tokens_per_s_per_replica",
                "slo_goodput_output_tokens_per_s_per_gpu", "usd_per_million_input_tokens",
                "usd_per_million_output_tokens", "curve"):
        assert key in d
    assert d["ttft_s"] == pm.serve(EXAMPLE).ttft_s


def test_serve_table_shows_the_curve(capsys):
    assert main(["serve", EXAMPLE]) == 0
    out = capsys.readouterr().out
    assert "time to first token" in out and "concurrency" in out


def test_bad_serving_scenario_is_one_line(tmp_path, capsys):
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump({"hardware": "h100-sxm", "model": "llama3-70b",
                                 "serving": {"prompt_tokens": 10, "output_tokens": 10}}))
    assert main(["serve", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "concurrency" in err


def test_validate_serving_covers_30_results_on_3_gpus(capsys):
    assert main(["validate-serving", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["num_cases"] >= 30 and len(d["mape_by_gpu"]) >= 3
    assert 0 < d["mape"] < 1


@pytest.mark.parametrize("form", ["table", "markdown"])
def test_validate_detects_a_serving_file(form, capsys):
    assert main(["validate", RUNS, "--format", form]) == 0
    out = capsys.readouterr().out
    assert "MAPE" in out


def test_validate_of_a_binary_file_is_one_line(tmp_path, capsys):
    """The serving-file sniff reads text: a file that is not UTF-8 is refused in one line by the
    training validation, not an internal error (found by scripts/fuzz.py, files)."""
    f = tmp_path / "runs.yaml"
    f.write_bytes(b"\xff\xfe\x00cases: []")
    assert main(["validate", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "internal error" not in err and "cases" in err


def test_serve_size_names_the_cheapest(tmp_path, capsys):
    f = tmp_path / "s.yaml"
    f.write_text(yaml.safe_dump({"hardware": "h100-sxm", "model": "llama3-70b", "serving": {
        "prompt_tokens": 1000, "output_tokens": 500, "requests_per_s": 10.0, "ttft_s": 2.0, "tpot_s": 0.05,
        "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}}}))
    assert main(["serve", str(f), "--size", "--hardware", "h100-sxm,h200-sxm", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["best"]["hardware"] in ("h100-sxm", "h200-sxm") and d["best"]["num_gpus"] >= 1


def test_docs_validation_ends_with_the_serving_section_of_validate_serving(capsys):
    """``perfmodel validate ... --format markdown`` (docs/validation.md) closes with the serving MAPE
    table, the numbers of ``validate-serving`` itself; ``--serving-runs ''`` leaves it out."""
    training = str(PROJECT_DIR / "perfmodel" / "data" / "published_runs.yaml")
    assert main(["validate", training, "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    section = out[out.index("## Serving"):]
    d = pm.validate_serving(RUNS).to_dict()
    assert f"{d['num_cases']} results" in section and f"**{100 * d['mape']:.1f}%**" in section
    assert all(f"| {g} | {v['cases']} |" in section for g, v in d["mape_by_gpu"].items())
    assert main(["validate", training, "--format", "markdown", "--serving-runs", ""]) == 0
    assert "## Serving" not in capsys.readouterr().out
