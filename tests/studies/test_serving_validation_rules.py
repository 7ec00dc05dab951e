"""The rules that turn a published serving row into a scenario (perfmodel/studies/serving_validation.py),
each against a hand-made row."""

from __future__ import annotations

import pytest
import yaml

import perfmodel as pm
from perfmodel.spec.serving import DEFAULT_MAX_CONCURRENCY, parse_serving_scenario
from perfmodel.studies.serving_validation import (
    SERVING_FORMAT,
    TRTLLM_BENCH_MAX_BATCH,
    _batch_limit,
    latency_cases,
    scenario_of_row,
    validate_serving,
)


def _row(**workload) -> dict:
    return {"engine": {"name": "TensorRT-LLM", "benchmark": "trtllm-bench throughput"}, "workload": workload}


def test_trtllm_bench_batches_at_most_the_requests_it_sends():
    """The perf overview sends 3,000 requests of 1000/1000 tokens: no more than 3,000 can be in flight."""
    assert _batch_limit(_row(num_requests=3000)) == 3000


def test_trtllm_bench_cap_is_4096_without_a_request_count():
    assert _batch_limit(_row()) == TRTLLM_BENCH_MAX_BATCH == 4096
    assert _batch_limit(_row(num_requests=30000)) == 4096


def test_other_engines_keep_the_default_batch_limit():
    assert _batch_limit({"engine": {"name": "vLLM"}, "workload": {"num_requests": 3000}}) == DEFAULT_MAX_CONCURRENCY


ONLINE_ROW = {
    "id": "online-test", "hardware": "h100-sxm", "num_gpus": 1, "model": "llama3-8b",
    "precision": {"weights": "bf16"}, "parallelism": {"tp": 1},
    "engine": {"name": "TensorRT-LLM"},
    "workload": {"scenario": "online (requests sent at a set rate)", "input_tokens": 467, "output_tokens": 256,
                 "requests_per_s": 4},
    "measured": {"ttft_mean_s": 0.024, "itl_mean_s": 0.009},
}


def test_an_online_row_is_served_open_loop_at_its_rate():
    mapping, why = scenario_of_row(ONLINE_ROW)
    assert why == ""
    assert mapping["serving"]["requests_per_s"] == 4.0 and "concurrency" not in mapping["serving"]


def test_mean_ttft_is_the_engines_plus_the_md1_mean_wait():
    """By hand: Pollaczek-Khinchine, W = lambda D^2 / (2 (1 - lambda D)), D = the prefill, lambda = 4/s."""
    sc = parse_serving_scenario(scenario_of_row(ONLINE_ROW)[0])
    p = pm.serve(sc)
    cases = {c.metric: c for c in latency_cases(ONLINE_ROW, p, 1, "tp1", "h100-sxm")}
    D, lam = p.point.prefill_s, 4.0
    assert cases["ttft"].predicted_s == pytest.approx(p.point.ttft_s + lam * D * D / (2 * (1 - lam * D)), rel=1e-12)
    assert cases["ttft"].measured_s == 0.024 and cases["ttft"].statistic == "mean"
    assert cases["tpot"].predicted_s == p.point.tpot_s and cases["tpot"].measured_s == 0.009
    assert cases["tpot"].error == pytest.approx(p.point.tpot_s / 0.009 - 1)


def test_a_rate_the_replica_cannot_serve_is_not_compared(tmp_path):
    row = {**ONLINE_ROW, "workload": {**ONLINE_ROW["workload"], "requests_per_s": 1e6}}
    f = tmp_path / "runs.yaml"
    f.write_text(yaml.safe_dump({"format": SERVING_FORMAT, "runs": [row, ONLINE_ROW]}))
    v = validate_serving(f)
    assert [i for i, _ in v.skipped] == ["online-test"] and "saturated" in v.skipped[0][1]
    assert len(v.latency_cases) == 2 and not v.cases
    assert v.latency_mape()["ttft"][0] == 1
