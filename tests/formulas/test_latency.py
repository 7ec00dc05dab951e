"""Latency percentiles (``perfmodel.formulas.latency``) and the engine's ``ttft_p50_s`` ...
``tpot_p99_s``: the Pollaczek-Khinchine wait of an M/D/1 prefill queue with an exponential tail,
a request's TPOT from a binomial count of stalled steps, and objectives checked at p99. By hand."""

from __future__ import annotations

import math

import pytest

import perfmodel as pm
from perfmodel.formulas.latency import md1_mean_wait_s, tpot_quantile_s, wait_quantile_s

BASE = {"hardware": "h100-sxm", "model": "llama3-70b",
        "serving": {"prompt_tokens": 1000, "output_tokens": 1000, "concurrency": 64, "parallelism": {"tp": 4},
                    "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}}}


def _serve(**serving):
    return pm.serve({**BASE, "serving": {**BASE["serving"], **serving}})


def test_pollaczek_khinchine_mean_wait_md1():
    # lambda 0.5/s, D 1 s: rho 0.5, W = 0.5 x 1^2 / (2 x 0.5) = 0.5 s (half of M/M/1's rho/(mu - lambda) = 1 s)
    assert md1_mean_wait_s(0.5, 1.0) == pytest.approx(0.5)
    # lambda 0.9/s, D 1 s: 0.9 / (2 x 0.1) = 4.5 s
    assert md1_mean_wait_s(0.9, 1.0) == pytest.approx(4.5)
    assert md1_mean_wait_s(1.0, 1.0) == math.inf


def test_wait_quantiles_by_hand():
    # rho 0.5: half the prompts find the prefill free, so the median waits 0
    assert wait_quantile_s(0.5, 0.5, 1.0) == 0.0
    # p99: (W / rho) ln(rho / 0.01) = (0.5 / 0.5) ln 50 = 3.912 s
    assert wait_quantile_s(0.99, 0.5, 1.0) == pytest.approx(math.log(50))
    # rho 0.9: p50 = (4.5 / 0.9) ln(0.9 / 0.5) = 5 x 0.5878 = 2.939 s
    assert wait_quantile_s(0.5, 0.9, 1.0) == pytest.approx(5 * math.log(1.8))
    assert wait_quantile_s(0.99, 1.2, 1.0) == math.inf
    assert wait_quantile_s(0.99, 0.0, 1.0) == 0.0


def test_tpot_quantiles_binomial_by_hand():
    # 4 steps of 1 s, each stalled 1 s with probability 1/2, 4 tokens: X ~ Bin(4, 1/2)
    assert tpot_quantile_s(0.5, 4, 0.5, 1.0, 1.0, 4) == pytest.approx((4 + 2) / 4)   # median X = 2
    # P(X <= 3) = 15/16 < 0.99, so the p99 is X = 4: (4 + 4) / 4
    assert tpot_quantile_s(0.99, 4, 0.5, 1.0, 1.0, 4) == pytest.approx(2.0)
    assert tpot_quantile_s(0.99, 4, 0.0, 1.0, 1.0, 4) == pytest.approx(1.0)            # no stalls: no spread
    assert tpot_quantile_s(0.99, 4, 2.0, 1.0, 1.0, 4) == pytest.approx((4 + 8) / 4)    # every step stalls: the mean


def test_engine_percentiles_are_its_own_steps():
    d = _serve().to_dict()
    p = d["point"]
    for k in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s"):
        assert d[k] == p[k]
    assert d["ttft_s"] <= d["ttft_p50_s"] <= d["ttft_p99_s"] and d["tpot_p50_s"] <= d["tpot_p99_s"]
    rps = p["requests_per_s_per_replica"]
    assert d["ttft_p99_s"] == pytest.approx(d["ttft_s"] + wait_quantile_s(0.99, rps, p["prefill_s"]))
    # the binomial's mean is the engine's TPOT: n t_step + (B - 1) t_pre over O tokens
    assert d["tpot_s"] == pytest.approx((1000 * p["decode_step_s"] + 63 * p["prefill_s"]) / 1000)
    assert d["tpot_p99_s"] == pytest.approx(tpot_quantile_s(0.99, 1000, 63 / 1000, p["decode_step_s"],
                                                            p["prefill_s"], 1000))


def test_static_batching_has_no_spread_and_an_open_loop_queues():
    d = _serve(batching="static").to_dict()
    assert d["ttft_p99_s"] == d["ttft_s"] and d["tpot_p99_s"] == d["tpot_s"]
    light = _serve(concurrency=None, requests_per_s=0.5).to_dict()
    busy_rate = _serve().to_dict()["curve"][-1]["requests_per_s_per_replica"] * 0.95
    busy = _serve(concurrency=None, requests_per_s=busy_rate).to_dict()
    assert light["ttft_p99_s"] - light["ttft_s"] < busy["ttft_p99_s"] - busy["ttft_s"]


def test_objectives_at_p99():
    d = _serve().to_dict()
    between = (d["tpot_s"] + d["tpot_p99_s"]) / 2          # the mean meets it, the p99 does not
    assert _serve(tpot_s=between).point.meets_objectives
    assert not _serve(tpot_s=between, objectives_at="p99").point.meets_objectives
    assert _serve(tpot_s=d["tpot_p99_s"] * 1.01, objectives_at="p99").point.meets_objectives


def test_objectives_at_is_checked():
    with pytest.raises(pm.InputError) as e:
        _serve(objectives_at="p95")
    assert "\n" not in str(e.value) and "objectives_at" in str(e.value)


def test_sizing_at_p99_needs_at_least_the_replicas_of_the_mean():
    s = {"prompt_tokens": 1000, "output_tokens": 500, "requests_per_s": 10.0, "ttft_s": 2.0, "tpot_s": 0.05,
         "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}}
    mean, p99 = (pm.size_serving({"hardware": "h200-sxm", "model": "llama3-70b",
                                  "serving": {**s, "objectives_at": at}}, hardware=("h200-sxm",)).best
                 for at in ("mean", "p99"))
    assert p99.num_gpus >= mean.num_gpus and p99.usd_per_hour >= mean.usd_per_hour


def test_varied_prompts_make_the_prefill_queue_m_g_1():
    """Pollaczek-Khinchine with E[S^2] = D^2 (1 + c^2): c = 1 (exponential service) is M/M/1, whose mean
    wait is rho D / (1 - rho) = 0.9 / 0.1 = 9 s at lambda 0.9/s, D 1 s: twice M/D/1's 4.5 s."""
    assert md1_mean_wait_s(0.9, 1.0, 1.0) == pytest.approx(9.0)
    assert md1_mean_wait_s(0.9, 1.0, 0.5) == pytest.approx(4.5 * 1.25)
    assert wait_quantile_s(0.99, 0.9, 1.0, 1.0) == pytest.approx(9.0 / 0.9 * math.log(0.9 / 0.01))
    base = {"hardware": "h200-sxm", "model": "llama3-70b", "serving": {
        "prompt_tokens": 2000, "output_tokens": 200, "requests_per_s": 2.0,
        "precision": {"weights": "fp8", "activations": "fp8", "kv_cache": "fp8"}}}
    fixed = pm.serve(base).to_dict()
    varied = pm.serve({**base, "serving": {**base["serving"], "prompt_tokens_cv": 1.0}}).to_dict()
    assert varied["ttft_s"] == fixed["ttft_s"] and varied["tpot_s"] == fixed["tpot_s"]
    assert varied["ttft_p99_s"] > fixed["ttft_p99_s"]
