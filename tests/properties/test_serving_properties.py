"""Physical invariants of the serving engine on random valid serving scenarios (hypothesis): more
HBM bandwidth is never slower, a bigger batch never lowers a replica's throughput on the curve's
memory-bound part nor shortens its TPOT, the decode step's parts sum to its total, and goodput is
at most throughput."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfmodel.engine.serve import serve
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.presets import load_model
from perfmodel.spec.profile import efficiencies_for
from perfmodel.spec.serving import parse_serving_scenario

pytestmark = pytest.mark.properties
SETTINGS = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}

scenarios = st.fixed_dictionaries({
    "hardware": st.sampled_from(["h100-sxm", "h200-sxm", "b200"]),
    "model": st.sampled_from(["llama3-8b", "llama3-70b", "mixtral-8x7b"]),
    "prompt_tokens": st.integers(16, 8192),
    "output_tokens": st.integers(1, 2048),
    "concurrency": st.integers(1, 512),
    "tp": st.sampled_from([2, 4, 8]),
    "weights": st.sampled_from(["bf16", "fp8"]),
})


def _run(d, bandwidth_scale=1.0):
    hw = load_hardware(d["hardware"])
    if bandwidth_scale != 1.0:
        gpu = hw.gpu.model_copy(update={"hbm_bandwidth_gb_per_s": hw.gpu.hbm_bandwidth_gb_per_s * bandwidth_scale})
        hw = hw.model_copy(update={"gpu": gpu})
    sc = parse_serving_scenario({"hardware": d["hardware"], "model": d["model"], "serving": {
        "prompt_tokens": d["prompt_tokens"], "output_tokens": d["output_tokens"], "concurrency": d["concurrency"],
        "tpot_s": 0.05, "precision": {"weights": d["weights"], "activations": d["weights"], "kv_cache": d["weights"]},
        "parallelism": {"tp": d["tp"]}}})
    return serve(sc, hw, load_model(d["model"]), efficiencies_for(hw)[0])


@settings(max_examples=25, **SETTINGS)
@given(d=scenarios)
def test_serving_invariants(d):
    p = _run(d)
    fast = _run(d, bandwidth_scale=2.0)
    assert fast.point.tpot_s <= p.point.tpot_s * (1 + 1e-9)
    assert fast.point.ttft_s <= p.point.ttft_s * (1 + 1e-9)
    tpots = [c.decode_step_s for c in p.curve]
    assert tpots == sorted(tpots)                                   # a bigger batch never steps faster
    assert sum(r["seconds"] for r in p.decode_breakdown) == pytest.approx(p.point.decode_step_s / 1)
    assert p.goodput_output_tokens_per_s_per_gpu <= p.point.output_tokens_per_s_per_gpu
    assert p.slo_goodput_output_tokens_per_s_per_gpu <= max(c.output_tokens_per_s_per_gpu for c in p.curve)


@settings(max_examples=15, **SETTINGS)
@given(d=scenarios, batching=st.sampled_from(["continuous", "chunked_prefill", "static"]))
def test_percentiles_are_ordered_and_p99_objectives_admit_no_more(d, batching):
    """On every point of the curve TTFT <= its p50 <= its p99 and TPOT's p50 <= its p99; objectives
    checked at p99 never serve more within them than at p50."""
    hw, m = load_hardware(d["hardware"]), load_model(d["model"])

    def run(at):
        sc = parse_serving_scenario({"hardware": d["hardware"], "model": d["model"], "serving": {
            "prompt_tokens": d["prompt_tokens"], "output_tokens": d["output_tokens"],
            "concurrency": d["concurrency"], "ttft_s": 1.0, "tpot_s": 0.05, "objectives_at": at, "batching": batching,
            "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}, "parallelism": {"tp": d["tp"]}}})
        return serve(sc, hw, m, efficiencies_for(hw)[0])

    p50, p99 = run("p50"), run("p99")
    for c in p99.curve:
        assert c.ttft_s <= c.ttft_p50_s <= c.ttft_p99_s and c.tpot_p50_s <= c.tpot_p99_s
    assert p99.slo_goodput_output_tokens_per_s_per_gpu <= p50.slo_goodput_output_tokens_per_s_per_gpu
