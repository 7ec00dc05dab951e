"""The serving pass (``perfmodel.formulas.serving``) and engine (``perfmodel.engine.serve``): a
decode step from weight and cache bytes over HBM bandwidth, a prefill from FLOPs, speculative
decoding's yield, and the serving scenario's one-line errors. Numbers by hand."""

from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.engine.serve import prompts_per_pass
from perfmodel.formulas.comm import Collective, Fabric, group_time_s
from perfmodel.formulas.compute import attention_efficiency
from perfmodel.formulas.serving import (
    ATTENTION_BACKEND,
    expected_tokens_per_step,
    experts_touched,
    kv_handoff_s,
    mla_decode_flop_per_key,
    pass_time,
)
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.presets import load_model
from perfmodel.spec.profile import efficiencies_for
from perfmodel.spec.serving import parse_serving_scenario
from perfmodel.studies.search.serving_size import layouts

# Llama 3 70B GEMM weights by hand (Dubey et al. 2024, table 3): per layer QKV 8192 x (64 + 2 x 8) x 128,
# out 8192 x 8192, gated up 8192 x 2 x 28672, down 28672 x 8192; 80 layers; output layer 8192 x 128256
LAYER_PARAMS = 8192 * 80 * 128 + 8192 * 8192 + 8192 * 2 * 28672 + 28672 * 8192
assert LAYER_PARAMS == 855_638_016
HEAD_PARAMS = 8192 * 128_256
GEMMS_PER_LAYER = 4


def _setup(**serving):
    base = {"prompt_tokens": 1000, "output_tokens": 1000, "concurrency": 1,
                "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}}
    sc = parse_serving_scenario({"hardware": "h200-sxm", "model": "llama3-70b", "serving": {**base, **serving}})
    hw = load_hardware("h200-sxm")
    return sc, hw, load_model("llama3-70b"), efficiencies_for(hw)[0]


def test_speculative_tokens_per_step_leviathan_eq1():
    assert expected_tokens_per_step(0.8, 4) == pytest.approx((1 - 0.8 ** 5) / (1 - 0.8))   # 3.3616
    assert expected_tokens_per_step(0.0, 4) == 1.0
    assert expected_tokens_per_step(0.5, 1) == pytest.approx(1.5)


def test_experts_touched():
    assert experts_touched(256, 8, 1) == pytest.approx(8)
    assert experts_touched(256, 8, 10_000) == pytest.approx(256)
    assert experts_touched(8, 2, 2) == pytest.approx(8 * (1 - 0.75 ** 2))


def test_decode_step_reads_the_weights_at_hbm_bandwidth():
    sc, hw, m, eff = _setup()
    bw = hw.gpu.hbm_bandwidth_bytes_per_s * eff.memory_efficiency     # 4.8 TB/s x STREAM fraction
    weight_bytes = 80 * LAYER_PARAMS * 1 + HEAD_PARAMS * 2            # fp8 layers, bf16 output layer
    kernels = 80 * GEMMS_PER_LAYER + 1
    by_hand = weight_bytes / bw + kernels * eff.kernel_overhead_s      # ~17.3 ms + overheads
    p = pass_time(m, sc.serving, hw, eff, 1, 1, 2000, False)
    assert p.gemm_s == pytest.approx(by_hand, rel=0.01)


def test_decode_attention_reads_the_cache_at_hbm_bandwidth():
    sc, hw, m, eff = _setup()
    bw = hw.gpu.hbm_bandwidth_bytes_per_s * eff.memory_efficiency
    requests, context = 64, 2000
    kv_layer_bytes = requests * context * (2 * 8 * 128 * 1)           # K and V of 8 heads, fp8
    by_hand = 80 * (kv_layer_bytes / bw + eff.kernel_overhead_s)      # 21 GB: ~5 ms
    p = pass_time(m, sc.serving, hw, eff, requests, 1, context, False)
    assert p.attention_s == pytest.approx(by_hand, rel=1e-9)


def test_prefill_time_from_flops():
    sc, hw, m, eff = _setup()
    T = 4096
    g = eff.gemm["fp8"]
    gemm_flop = 2 * 80 * LAYER_PARAMS * T                              # 2 N T
    head_s = HEAD_PARAMS * 2 / (hw.gpu.hbm_bandwidth_bytes_per_s * eff.memory_efficiency)   # logits of one token
    by_hand = gemm_flop / (hw.gpu.peak_flop_per_s("fp8") * g.efficiency_max) + head_s
    p = pass_time(m, sc.serving, hw, eff, 1, T, T, True)
    assert p.gemm_s == pytest.approx(by_hand, rel=0.02)                # shape factors m/(m+d) etc. >= 0.987
    attn_flop = 2 * 64 * (128 + 128) * (T / 2) * T                     # causal: T/2 keys per query
    rate = hw.gpu.peak_flop_per_s("bf16") * attention_efficiency(T, 128, eff, False, ATTENTION_BACKEND)
    assert p.attention_s == pytest.approx(80 * (eff.kernel_overhead_s + attn_flop / rate), rel=1e-9)


def test_serve_answers_and_curve():
    p = pm.serve({"hardware": "h200-sxm", "model": "llama3-70b", "num_gpus": 8,
                      "serving": {"prompt_tokens": 1000, "output_tokens": 500, "concurrency": 32, "ttft_s": 1.0, "tpot_s": 0.05,
                                   "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"},
                                   "parallelism": {"tp": 2}}})
    d = p.to_dict()
    assert p.replicas == 4 and d["num_gpus"] == 8
    assert d["ttft_s"] > 0 and d["tpot_s"] > 0
    assert d["output_tokens_per_s_per_replica"] == pytest.approx(2 * d["output_tokens_per_s_per_gpu"])
    assert d["usd_per_million_output_tokens"] > d["usd_per_million_input_tokens"] > 0
    tput = [c.output_tokens_per_s_per_gpu for c in p.curve]
    tpot = [c.tpot_s for c in p.curve]
    assert tput == sorted(tput) and tpot == sorted(tpot)               # more batch: more throughput, slower tokens
    assert p.slo_goodput_output_tokens_per_s_per_gpu >= p.goodput_output_tokens_per_s_per_gpu


def test_goodput_is_zero_outside_the_objectives():
    p = pm.serve({"hardware": "h200-sxm", "model": "llama3-70b",
                      "serving": {"prompt_tokens": 1000, "output_tokens": 500, "concurrency": 8, "tpot_s": 0.001,
                                   "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}}})
    assert not p.point.meets_objectives
    assert p.goodput_output_tokens_per_s_per_gpu == 0 and p.slo_goodput_output_tokens_per_s_per_gpu == 0


def test_speculation_cuts_tpot_at_small_batch():
    base = {"prompt_tokens": 1000, "output_tokens": 500, "concurrency": 1,
                "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}}
    plain = pm.serve({"hardware": "h200-sxm", "model": "llama3-70b", "serving": base})
    spec = pm.serve({"hardware": "h200-sxm", "model": "llama3-70b",
                         "serving": {**base, "speculative": {"draft_tokens": 3, "acceptance_rate": 0.7}}})
    assert spec.tpot_s < plain.tpot_s


def test_rate_picks_the_smallest_batch_that_serves_it():
    p = pm.serve({"hardware": "h200-sxm", "model": "llama3-70b",
                      "serving": {"prompt_tokens": 1000, "output_tokens": 500, "requests_per_s": 1.0,
                                   "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}}})
    assert p.point.requests_per_s_per_replica >= 1.0 and not p.saturated
    smaller = [c for c in p.curve if c.concurrency < p.point.concurrency]
    assert all(c.requests_per_s_per_replica < 1.0 for c in smaller)


@pytest.mark.parametrize("serving, says", [
    ({"prompt_tokens": 10, "output_tokens": 10}, "exactly one of concurrency and requests_per_s"),
    ({"prompt_tokens": 10, "output_tokens": 10, "concurrency": 1, "requests_per_s": 1.0}, "exactly one"),
    ({"prompt_tokens": 10, "output_tokens": 10, "concurrency": 1, "parallelism": {"tp": 2, "ep": 4}}, "ep(4) does not divide"),
    ({"prompt_tokens": 10, "output_tokens": 10, "concurrency": 1, "batching": "dynamic"}, "batching"),
    ({"prompt_tokens": 10, "output_tokens": 10, "concurrency": 1, "speculative": {"draft_tokens": 2, "acceptance_rate": 1.0}},
     "acceptance_rate"),
    ({"prompt_tokens": 10, "output_tokens": 10, "concurrency": 1, "bandwith": 3}, "bandwith"),
])
def test_bad_serving_input_is_one_line(serving, says):
    with pytest.raises(InputError) as e:
        parse_serving_scenario({"hardware": "h200-sxm", "model": "llama3-70b", "serving": serving})
    assert says in str(e.value) and "\n" not in str(e.value)


def test_weights_that_do_not_fit_say_so():
    with pytest.raises(InputError, match="weights take"):
        pm.serve({"hardware": "h100-sxm", "model": "llama3-405b",
                      "serving": {"prompt_tokens": 10, "output_tokens": 10, "concurrency": 1}})


def test_size_serving_picks_the_cheapest_deployment_that_meets_the_objectives():
    sc = {"hardware": "h100-sxm", "model": "llama3-70b",
              "serving": {"prompt_tokens": 1000, "output_tokens": 500, "requests_per_s": 20.0, "ttft_s": 2.0, "tpot_s": 0.05,
                           "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}}}
    r = pm.size_serving(sc, hardware=("h100-sxm", "h200-sxm", "a100-sxm-80gb"))
    ok = [o for o in r.options if not o.reason]
    assert r.best == min(ok, key=lambda o: o.usd_per_hour)
    assert r.best.replicas * r.best.goodput_requests_per_s_per_replica >= 20.0
    assert r.best.tpot_s <= 0.05 and r.best.ttft_s <= 2.0
    assert all("no fp8" in o.reason for o in r.options if o.hardware == "a100-sxm-80gb")
    with pytest.raises(InputError, match="request rate"):
        pm.size_serving({**sc, "serving": {**sc["serving"], "requests_per_s": None, "concurrency": 4}})


def test_a_decode_pool_never_stalls_for_prefills_and_a_prefill_pool_never_decodes():
    base = {"prompt_tokens": 2000, "output_tokens": 500, "concurrency": 64,
                "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}}
    both = pm.serve({"hardware": "h200-sxm", "model": "llama3-70b", "serving": base}).point
    dec = pm.serve({"hardware": "h200-sxm", "model": "llama3-70b", "serving": {**base, "pool": "decode"}}).point
    pre = pm.serve({"hardware": "h200-sxm", "model": "llama3-70b", "serving": {**base, "pool": "prefill"}}).point
    assert dec.tpot_s == pytest.approx(dec.decode_step_s) and dec.tpot_s < both.tpot_s
    assert dec.output_tokens_per_s_per_gpu == pytest.approx(64 / dec.decode_step_s)   # B tokens per step
    assert pre.output_tokens_per_s_per_gpu == 0 and pre.input_tokens_per_s_per_gpu > both.input_tokens_per_s_per_gpu


def test_kv_handoff_by_hand():
    """Llama 3 70B, 8,192-token prompt, fp8 cache: 80 layers x 2 x 8 KV heads x 128 x 1 B = 163,840 B per
    token, 1,342,177,280 B per prompt; at tp 8 each GPU holds 1/8 (167,772,160 B) and sends it over its
    own 50 GB/s link (one 400 Gb/s NIC): 3.355 ms + 5 us latency. DeepSeek-V3 MLA: 61 x (512 + 64) x 1 B
    x 8,192 = 287,834,112 B, the latent replicated on every tensor-parallel rank, so each sends it whole."""
    link = Fabric(50e9, 5e-6)
    llama, ds = load_model("llama3-70b"), load_model("deepseek-v3")
    assert kv_handoff_s(llama, 8192, 1, 8, 1, link) == pytest.approx(5e-6 + 167_772_160 / 50e9)
    assert kv_handoff_s(llama, 8192, 1, 8, 4, link) == pytest.approx(5e-6 + 4 * 167_772_160 / 50e9)
    assert kv_handoff_s(ds, 8192, 1, 8, 1, link) == pytest.approx(5e-6 + 287_834_112 / 50e9)


def test_a_prefill_pools_ttft_adds_the_kv_handoff_over_the_scale_out_link():
    sc, hw, _, eff = _setup(pool="prefill", prompt_tokens=8192, concurrency=2)
    p = pm.serve(sc).point
    net = hw.scale_out.bandwidth_bytes_per_s * eff.scale_out_bus_efficiency
    handoff = eff.scale_out_latency_s + 2 * 80 * 2 * 8 * 128 * 8192 / net   # tp 1: the whole cache of 2 prompts
    assert p.kv_handoff_s == pytest.approx(handoff)
    assert p.ttft_s == pytest.approx(p.prefill_s + handoff) and p.requests_per_s_per_replica == pytest.approx(2 / p.prefill_s)
    over_nvlink = pm.serve({**sc.model_dump(), "serving": {**sc.serving.model_dump(), "kv_link": "scale_up"}}).point
    assert over_nvlink.kv_handoff_s < p.kv_handoff_s
    assert pm.serve({**sc.model_dump(), "serving": {**sc.serving.model_dump(), "pool": "both"}}).point.kv_handoff_s == 0


def test_attention_dp_with_experts_split_over_the_stage_gathers_and_scatters_the_tokens():
    """tp 1, attention_dp 8, ep 1: each GPU holds 1/8 of every expert, so every MoE layer all-gathers
    the 8 groups' tokens (64 x 4096 x 2 B) and reduce-scatters the partial sums; no tensor-parallel
    all-reduce (tp 1). Qwen3-235B-A22B: 94 layers, all MoE."""
    m = load_model("qwen3-235b-a22b")
    sc = parse_serving_scenario({"hardware": "h200-sxm", "model": "qwen3-235b-a22b", "serving": {
        "prompt_tokens": 1000, "output_tokens": 1000, "concurrency": 64,
        "parallelism": {"tp": 1, "attention_dp": 8, "ep": 1}}})
    hw = load_hardware("h200-sxm")
    eff = efficiencies_for(hw)[0]
    full = 64 * 4096 * 2
    per_layer = sum(float(group_time_s(op, full, 8, 1, hw, eff)) for op in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER))
    assert per_layer > 0
    assert pass_time(m, sc.serving, hw, eff, 64, 1, 1500, False).comm_s == pytest.approx(94 * per_layer, rel=1e-9)


def test_prefill_passes_pack_prompts_up_to_the_token_budget():
    """8,192 tokens per pass, 1,000-token prompts: 8 per pass, at most the B waiting; the cycle of B
    requests is (B / k) packed passes plus O decode steps, by hand from the pass times."""
    sc, hw, m, eff = _setup(concurrency=64, prefill_tokens_per_pass=8192)
    assert prompts_per_pass(sc.serving, 64) == 8 and prompts_per_pass(sc.serving, 5) == 5
    assert prompts_per_pass(sc.serving.model_copy(update={"prefill_tokens_per_pass": None}), 64) == 1
    assert prompts_per_pass(sc.serving.model_copy(update={"batching": "chunked_prefill"}), 64) == 1
    p = pm.serve(sc).point
    t_pass = pass_time(m, sc.serving, hw, eff, 8, 1000, 1000, True).total_s
    t_step = pass_time(m, sc.serving, hw, eff, 64, 1, 1500, False).total_s
    cycle = 64 / 8 * t_pass + 1000 * t_step
    assert p.prefill_s == pytest.approx(t_pass) and p.output_tokens_per_s_per_gpu == pytest.approx(64 * 1000 / cycle)
    one_by_one = pm.serve({**sc.model_dump(), "serving": {**sc.serving.model_dump(), "prefill_tokens_per_pass": None}}).point
    assert p.output_tokens_per_s_per_gpu > one_by_one.output_tokens_per_s_per_gpu


def test_mla_decode_attends_to_the_latent_with_absorbed_weights():
    """DeepSeek-V3 decode (128 heads, latent 512, RoPE key 64): 2 x 128 x (576 + 512) = 278,528 FLOPs per
    cached token per query (FlashMLA deep dive), at 660/990 of the bf16 peak; the fp8 latent read,
    64 x 4,096 x 576 B per layer, is faster, so each of the 61 layers is compute-bound."""
    m = load_model("deepseek-v3")
    hw = load_hardware("h800-sxm")
    eff = efficiencies_for(hw)[0]
    sv = parse_serving_scenario({"hardware": "h800-sxm", "model": "deepseek-v3", "serving": {
        "prompt_tokens": 4096, "output_tokens": 1, "concurrency": 64, "pool": "decode",
        "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"},
        "parallelism": {"tp": 1, "attention_dp": 8, "ep": 8}}}).serving
    assert mla_decode_flop_per_key(m, 128) == 278_528
    requests = 64 * 8                                                  # 64 per attention group
    flop = 64 * 4096 * 278_528
    compute = eff.kernel_overhead_s + flop / (hw.gpu.peak_flop_per_s("bf16") * 660 / 990)
    memory = 64 * 4096 * 576 / (hw.gpu.hbm_bandwidth_bytes_per_s * eff.memory_efficiency)
    assert compute > memory
    assert pass_time(m, sv, hw, eff, requests, 1, 4096, False).attention_s == pytest.approx(61 * compute, rel=1e-9)


def test_sizing_tries_pipeline_and_expert_parallel_layouts():
    """DeepSeek-V3 in fp8 (~671 GB of weights) does not fit one 8 x 80 GB H100 host at 0.9 of its memory, so
    every H100 answer has pp >= 2; the MoE layouts (ep = tp, data-parallel attention with ep) are tried; an
    option's GPUs are its replicas x tp x pp x attention_dp."""
    assert {"tp": 1, "attention_dp": 8, "ep": 8} in layouts(True) and {"tp": 8, "pp": 2} in layouts(False)
    assert not any("ep" in lay for lay in layouts(False))
    sc = {"hardware": "h100-sxm", "model": "deepseek-v3",
          "serving": {"prompt_tokens": 2000, "output_tokens": 1000, "requests_per_s": 20.0, "ttft_s": 2.0,
                      "tpot_s": 0.05, "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}}}
    r = pm.size_serving(sc, hardware=("h100-sxm",))
    ok = [o for o in r.options if not o.reason]
    assert ok and all(o.pp >= 2 for o in ok)
    assert all(o.num_gpus == o.replicas * o.tp * o.pp * o.attention_dp for o in r.options)
    assert r.best.layout == f"tp{r.best.tp} pp{r.best.pp} ep{r.best.ep} adp{r.best.attention_dp}"
