"""The serving validation data (perfmodel/data/serving_runs.yaml, issue 53): every row carries a
source, hardware the catalogue knows (or an explicit inline spec), a model the catalogue knows (or
an inline one), positive figures with units in their names, and per-GPU figures that agree with
the totals; at least 30 rows over at least three GPU types."""

from __future__ import annotations

import numbers
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "perfmodel" / "data" / "serving_runs.yaml"
HARDWARE_IDS = {yaml.safe_load(p.read_text())["id"] for p in (ROOT / "hardware").glob("*.yaml")}
MODEL_IDS = set(yaml.safe_load((ROOT / "perfmodel" / "data" / "models.yaml").read_text())["models"])
TRUST = {"audited", "vendor", "engine-blog", "operator-report"}
UNIT_HINTS = ("_per_s", "_s", "_tokens", "tokens_", "nodes_", "_usd", "usd_", "_fraction")

DOC = yaml.safe_load(DATA.read_text())
RUNS = DOC["runs"]


def _numbers(block):
    """(key, value) for every number in a mapping, lists and nested mappings included."""
    for key, value in block.items():
        if isinstance(value, bool):
            continue
        if isinstance(value, numbers.Number):
            yield key, value
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, numbers.Number):
                    yield key, item
        elif isinstance(value, dict):
            yield from _numbers(value)


def test_format_and_row_count():
    assert DOC["format"] == "perfmodel-serving-runs/1"
    assert len(RUNS) >= 30
    ids = [r["id"] for r in RUNS]
    assert len(ids) == len(set(ids)), "row ids must be unique"


def test_at_least_three_gpu_types():
    kinds = {r.get("hardware") or r["hardware_inline"]["name"] for r in RUNS}
    assert len(kinds) >= 3, kinds
    # the four the issue names are each present
    assert {"h100-sxm", "h200-sxm", "b200", "gb200-nvl72"} <= kinds


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r["id"])
def test_row_has_a_source(run):
    src = run["source"]
    assert src.get("title"), "source needs a title"
    assert src.get("url") or (src.get("repository") and src.get("path") and src.get("commit")), (
        "source needs a URL or repository + path + commit"
    )
    if "commit" in src:
        assert len(src["commit"]) == 40 and all(c in "0123456789abcdef" for c in src["commit"])
    assert run["trust"] in TRUST
    assert run.get("basis")


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r["id"])
def test_hardware_and_model_are_known_or_inline(run):
    if "hardware" in run:
        assert run["hardware"] in HARDWARE_IDS, f"unknown hardware id {run['hardware']!r}"
    else:
        spec = run["hardware_inline"]
        assert spec.get("name") and spec.get("memory_gib", 0) > 0
    if "model" in run:
        assert run["model"] in MODEL_IDS, f"unknown model id {run['model']!r}"
    else:
        spec = run["model_inline"]
        assert spec.get("params_b", 0) > 0 and spec.get("layers", 0) > 0 and spec.get("hidden", 0) > 0


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r["id"])
def test_figures_are_positive_with_units_in_their_names(run):
    measured = run["measured"]
    assert measured, "a row without measured figures is not a measurement"
    for key, value in _numbers(measured):
        assert value > 0, f"{key} = {value}"
        assert any(h in key for h in UNIT_HINTS), f"measured key {key!r} names no unit"
    for key, value in _numbers(run.get("derived", {})):
        assert value > 0, f"derived {key} = {value}"
    for key in ("num_gpus", "gpus_per_node"):
        if key in run:
            assert isinstance(run[key], int) and run[key] > 0
    for key, value in _numbers(run.get("parallelism", {})):
        assert isinstance(value, int) and value > 0, f"parallelism {key} = {value}"


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r["id"])
def test_latencies_are_ordered_and_within_their_objective(run):
    m = run["measured"]
    for metric in ("ttft", "tpot"):
        p50, p99 = m.get(f"{metric}_p50_s"), m.get(f"{metric}_p99_s")
        if p50 is not None and p99 is not None:
            assert p50 <= p99
        limit = run.get("constraints", {}).get(f"{metric}_p99_max_s")
        if limit is not None and p99 is not None:
            # MLPerf accepts a VALID run when the early-stopping estimate of the p99 meets the limit;
            # the reported p99 may sit a hair above it, hence the 5% allowance.
            assert p99 <= limit * 1.05, f"{metric} p99 {p99} over its limit {limit}"


def _pairs(run):
    """(per-GPU value, total value, GPUs) for each throughput given both ways in one row."""
    blocks = [run["measured"], {**run["measured"], **run.get("derived", {})}]
    n = run.get("num_gpus")
    per_node = run.get("gpus_per_node")
    for block in blocks:
        for key, value in block.items():
            if not key.endswith("_per_gpu") or not isinstance(value, numbers.Number):
                continue
            base = key[: -len("_per_gpu")]
            if n and base in block:
                yield key, value * n, block[base]
            if per_node and f"{base}_per_node" in block:
                yield key, value * per_node, block[f"{base}_per_node"]


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r["id"])
def test_per_gpu_and_total_throughput_agree(run):
    for key, scaled, total in _pairs(run):
        assert abs(scaled - total) <= 0.01 * total, f"{key} x GPUs = {scaled}, total {total}"


def test_per_gpu_check_is_exercised():
    """The agreement test above must bite on a good share of rows, not pass vacuously."""
    assert sum(1 for r in RUNS if list(_pairs(r))) >= 30


def test_mlperf_server_rows_carry_their_objectives():
    """MLPerf Llama 2 70B: server TTFT 2 s / TPOT 200 ms, interactive 450 ms / 40 ms (mlperf.conf)."""
    expected = {"server": (2.0, 0.2), "interactive": (0.45, 0.04)}
    rows = [r for r in RUNS if r["trust"] == "audited" and r["model"] == "llama2-70b"]
    assert rows
    for r in rows:
        scenario = r["workload"]["scenario"]
        if scenario in expected:
            c = r["constraints"]
            assert (c["ttft_p99_max_s"], c["tpot_p99_max_s"]) == expected[scenario]
        else:
            assert scenario == "offline" and "constraints" not in r


def test_data_file_ships_with_the_package():
    text = (ROOT / "pyproject.toml").read_text()
    assert 'perfmodel = ["data/*.yaml"]' in text
    assert DATA.parent.name == "data" and DATA.suffix == ".yaml"
