"""The rules that turn a published serving row into a scenario (perfmodel/studies/observed/serving_validation.py),
each against a hand-made row."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import perfmodel as pm
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.presets import load_model
from perfmodel.spec.profile import efficiencies_for
from perfmodel.spec.serving import DEFAULT_MAX_CONCURRENCY, parse_serving_scenario
from perfmodel.studies.observed.serving_validation import (
    SERVING_FORMAT,
    TRTLLM_BENCH_MAX_BATCH,
    _batch_limit,
    _packed,
    latency_cases,
    scenario_of_row,
    trtllm_bench_max_num_tokens,
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


def test_trtllm_bench_max_num_tokens_by_hand():
    """tuning.py finetune_setting: raw = min(min(requests, 4096) / pp x (1 + ISL/OSL), 32768), rounded up."""
    assert trtllm_bench_max_num_tokens(194, 1000, 1000, 1) == 2048       # raw 388: the 2048 floor
    assert trtllm_bench_max_num_tokens(3000, 1000, 1000, 1) == 6144      # raw 6000: up to 512s
    assert trtllm_bench_max_num_tokens(9000, 1000, 1000, 1) == 8192      # 4096 x 2 = 8192: 1024s
    assert trtllm_bench_max_num_tokens(380, 2048, 128, 1) == 6656        # 380 x 17 = 6460
    assert trtllm_bench_max_num_tokens(1500, 1000, 1000, 1) == 3072      # raw 3000: up to 256s
    assert trtllm_bench_max_num_tokens(4096, 5000, 500, 1) == 32768      # 45,056 capped
    assert trtllm_bench_max_num_tokens(3000, 1000, 1000, 2) == 3072      # per stage: 1500 x 2


def test_a_trtllm_bench_row_packs_its_prefills_up_to_the_benchmarks_token_budget():
    row = {"id": "pack", "hardware": "h200-sxm", "num_gpus": 8, "model": "qwen3-235b-a22b",
           "precision": {"weights": "fp8"}, "parallelism": {"tp": 8, "pp": 1},
           "engine": {"name": "TensorRT-LLM", "benchmark": "trtllm-bench throughput"},
           "workload": {"scenario": "max-throughput (offline, all requests queued at once)", "input_tokens": 1000,
                        "output_tokens": 1000, "num_requests": 3000},
           "measured": {"output_tokens_per_s": 23789}}
    mapping = scenario_of_row(row)[0]
    sc = parse_serving_scenario(mapping)
    held = pm.serve({**mapping, "serving": {**mapping["serving"], "concurrency": 4096, "max_concurrency": 4096}}).max_concurrency
    hw = load_hardware("h200-sxm")
    packed = _packed(mapping, row, hw, load_model("qwen3-235b-a22b"), efficiencies_for(hw)[0])
    assert sc.serving.prefill_tokens_per_pass is None
    assert packed.serving.prefill_tokens_per_pass == trtllm_bench_max_num_tokens(held, 1000, 1000, 1)


def test_the_deployment_sized_by_hand_in_the_docs_is_the_engines_answer():
    """docs/serving.md reproduces the H200 Llama 3.3 70B row by hand; its figure is the engine's, and its
    arithmetic (97 packed passes of 246.5 ms and 1,000 steps of 38.5 ms for 194 requests) gives it."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "serving.md").read_text()
    figure = int(re.search(r"\*\*([\d,]+) output tokens/s\*\* against 2,909", text).group(1).replace(",", ""))
    case = next(c for c in validate_serving().cases if c.id == "trtllm-perf-overview-llama3-70b-h200-tp1-fp8-1000-1000")
    assert round(case.predicted_output_tokens_per_s_per_gpu) == figure
    assert 194 * 1000 / (97 * 0.2465 + 1000 * 0.0385) == pytest.approx(figure, rel=0.002)


def test_a_closed_loop_row_is_served_at_its_concurrency_and_not_compared_beyond_the_cache(tmp_path):
    row = {**ONLINE_ROW, "id": "closed", "model": "llama3-70b", "num_gpus": 2, "parallelism": {"tp": 2},
           "precision": {"weights": "fp8"},
           "workload": {"scenario": "online (closed loop at a fixed concurrency)", "input_tokens": 5000,
                        "output_tokens": 500, "concurrency": 5}}
    mapping = scenario_of_row(row)[0]
    assert mapping["serving"]["concurrency"] == 5 and "requests_per_s" not in mapping["serving"]
    p = pm.serve(mapping)
    case = {c.metric: c for c in latency_cases(row, p, 1, "tp2", "h100-sxm")}["ttft"]
    rate = p.point.requests_per_s_per_replica          # the rate 5 clients draw
    D = p.point.prefill_s
    assert case.requests_per_s == pytest.approx(rate)
    assert case.predicted_s == pytest.approx(p.point.ttft_s + rate * D * D / (2 * (1 - rate * D)), rel=1e-12)
    many = {**row, "workload": {**row["workload"], "concurrency": 10 * p.max_concurrency}}
    f = tmp_path / "runs.yaml"
    f.write_text(yaml.safe_dump({"format": SERVING_FORMAT, "runs": [many]}))
    v = validate_serving(f)
    assert not v.latency_cases and "more than the" in v.skipped[0][1]


def test_the_docs_sizing_by_hand_of_ten_requests_per_second_on_h200():
    """docs/serving.md step 7: 194 requests per 62.5 s cycle = 3.11 requests/s per H200, so 10 requests/s need 4."""
    sc = {"hardware": "h200-sxm", "model": "llama3-70b",
          "serving": {"prompt_tokens": 1000, "output_tokens": 1000, "requests_per_s": 10, "prefill_tokens_per_pass": 2048,
                      "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}}}
    best = pm.size_serving(sc, hardware=("h200-sxm",)).best
    assert best.goodput_requests_per_s_per_replica == pytest.approx(194 / (97 * 0.2465 + 1000 * 0.0385), rel=0.003)
    assert (best.layout, best.replicas, best.num_gpus) == ("tp1 pp1 ep1 adp1", 4, 4)
    assert best.usd_per_hour == pytest.approx(4 * 5.41, rel=0.01)
