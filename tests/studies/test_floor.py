"""The floors the best-only search prunes by never exceed the step they bound: on every valid
layout of varied jobs (dense, MoE with MTP, explicit pipeline layouts, every schedule, every
recompute mode, overlap settings, ZeRO-3, activation offload), and on random ones; and the
parts one GPU count keeps for the next are those the next would compute."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import with_software

import perfmodel.engine.evaluate as evaluate_module
import perfmodel.engine.floor as floor_module
from perfmodel.engine import distinct
from perfmodel.engine.enumerate import enumerate_layouts, keep
from perfmodel.engine.evaluate import evaluate
from perfmodel.engine.floor import compute_floor_s, step_time_floor_s
from perfmodel.engine.job import bind
from perfmodel.engine.rules import layout_rule_fields, layout_violations, with_recompute
from perfmodel.formulas.layouts import Layouts, layouts_from_arrays
from perfmodel.spec.scenario import PIPELINE_SCHEDULES, Scenario, hardware_of, model_of, parse_scenario
from perfmodel.studies.search.search import SearchOptions, bounds_for

TINY_MOE = dict(name="tiny-moe", num_layers=6, hidden_size=256, num_attention_heads=8, num_query_groups=4,
                ffn_hidden_size=1024, gated_mlp=True, vocab_size=1000,
                moe=dict(num_experts=8, top_k=2, expert_ffn_hidden_size=512, num_dense_layers=1), mtp_layers=1)


def scen(model, **over) -> Scenario:
    base = dict(hardware="h100-sxm", num_gpus=16, model=model if isinstance(model, str) else dict(model),
                seq_length=512, global_batch_size=32, training_tokens=1e9)
    base.update(over)
    return parse_scenario(with_software(base))


def valid_layouts(s: Scenario, schedules=None) -> Layouts:
    """Every layout of the search's enumeration that passes the rules, with its schedule."""
    m, hw = model_of(s), hardware_of(s)
    opts = SearchOptions(schedules=schedules)
    c = enumerate_layouts(m, hw, s.num_gpus, s.global_batch_size, s.seq_length, bounds_for(s, opts))
    ok = layout_violations(m, hw, s.seq_length, s.global_batch_size, s.num_gpus, s.precision, tp=c["tp"],
                           pp=c["pp"], vpp=c["vpp"], cp=c["cp"], ep=c["ep"], etp=c["etp"], sp=c["sp"],
                           micro_batch_size=c["mbs"], schedule=c["schedule"], **layout_rule_fields(s)).ok
    c = keep(c, ok)
    dp = s.num_gpus // (c["tp"] * c["pp"] * c["cp"])
    return layouts_from_arrays(**{k: c[k] for k in ("tp", "pp", "vpp", "cp", "ep", "etp", "sp", "zero_stage", "mbs",
                                                    "schedule")},
                               dp=dp, num_mb=s.global_batch_size // (c["mbs"] * dp))


def check(s: Scenario, recompute: str, L: Layouts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(compute floor, step floor, step) of every layout, asserting compute <= floor <= step."""
    m, hw = model_of(s), hardware_of(s)
    job = bind(with_recompute(s, recompute), m, hw, hw.efficiency)
    lo, fl, step = compute_floor_s(job, L), step_time_floor_s(job, L), evaluate(job, L).step_time_s
    assert len(L)
    worst = np.argmax(fl / step)
    assert (fl <= step).all(), f"floor {fl[worst]} > step {step[worst]} at {L.take([worst])}"
    assert (lo <= fl * (1 + 1e-12)).all()             # up to rounding: the same compute, summed otherwise
    return lo, fl, step


CASES = [
    ("gpt3-175b", dict(num_gpus=256, seq_length=2048, global_batch_size=512), None),
    ("deepseek-v3", dict(hardware="gb200-nvl72", num_gpus=512, seq_length=4096, global_batch_size=1024), None),
    ("deepseek-v3", dict(hardware="h100-sxm", num_gpus=256, seq_length=4096, global_batch_size=512,
                         overlap=dict(ep=1.0, dp=0.0, tp=None)), PIPELINE_SCHEDULES),
    ("mixtral-8x7b", dict(num_gpus=64, seq_length=4096, global_batch_size=256, recompute_num_layers=2,
                          selective_recompute=["moe"]), PIPELINE_SCHEDULES),
    ("llama3-8b", dict(num_gpus=64, seq_length=8192, global_batch_size=128, elementwise_kernels="eager",
                       attention_backend="unfused", fsdp_collectives_per_layer=12), None),
    ("llama3-70b", dict(num_gpus=64, seq_length=8192, global_batch_size=64, activation_offload_layers=4,
                        selective_recompute="save_qkv_proj"), None),
    ("gpt3-175b", dict(num_gpus=64, seq_length=2048, global_batch_size=64, pipeline_layout="Et*3|(t*4|)*22t*5L"),
     None),
    (TINY_MOE, dict(num_gpus=16, overlap=dict(ep=0.5, cp=0.0, fsdp=0.0)), PIPELINE_SCHEDULES),
]


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("model, kw, schedules", CASES,
                         ids=[f"{c[0] if isinstance(c[0], str) else c[0]['name']}-{i}" for i, c in enumerate(CASES)])
def test_the_floors_never_exceed_the_step(model, kw, schedules, recompute):
    """compute floor <= step floor <= step on every valid layout (every schedule where named),
    and the step floor is a real bound: near the step somewhere, above the compute floor."""
    s = scen(model, **kw)
    lo, fl, step = check(s, recompute, valid_layouts(s, schedules))
    assert (fl > 0.5 * step).any()
    assert (fl > lo).any()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(["llama3-8b", "mixtral-8x7b", "deepseek-v3", "tiny"]),
       hardware=st.sampled_from(["h100-sxm", "gb200-nvl72", "mi300x", "a100-sxm-40gb"]),
       log_gpus=st.integers(3, 7), batch=st.sampled_from([1, 2, 4]),
       recompute=st.sampled_from(["none", "selective", "full"]),
       phi=st.tuples(*(st.sampled_from([0.0, 0.5, 1.0]) for _ in range(5))),
       schedules=st.sampled_from([None, PIPELINE_SCHEDULES]), seed=st.integers(0, 2**31 - 1))
def test_the_floor_never_exceeds_the_step_on_random_jobs(model, hardware, log_gpus, batch, recompute, phi, schedules,
                                                         seed):
    n = 2 ** log_gpus
    tp, cp, ep, pp, dp = phi
    s = scen(TINY_MOE if model == "tiny" else model, hardware=hardware, num_gpus=n, seq_length=2048,
             global_batch_size=n * batch, overlap=dict(tp=tp, cp=cp, ep=ep, pp=pp, dp=dp))
    L = valid_layouts(s, schedules)
    if not len(L):
        return
    rows = np.random.default_rng(seed).choice(len(L), size=min(len(L), 3000), replace=False)
    check(s, recompute, L.take(np.sort(rows)))


@pytest.mark.parametrize("hardware", ["h100-sxm", "gb200-nvl72"])
def test_what_one_gpu_count_keeps_is_what_the_next_computes(hardware, monkeypatch):
    """The floors' parts are kept per hardware as placed, not per GPU count: the floors and the
    step of a count computed after another's are those computed alone from its own job, bit for
    bit."""
    shared = {}
    for n in (128, 256, 512):
        s = scen("deepseek-v3", hardware=hardware, num_gpus=n, seq_length=4096, global_batch_size=2 * n)
        job = bind(s, model_of(s), hardware_of(s), hardware_of(s).efficiency)
        L = valid_layouts(s)
        shared[n] = (job, L, compute_floor_s(job, L), step_time_floor_s(job, L), evaluate(job, L).step_time_s)
    assert floor_module._shared_jobs
    monkeypatch.setattr(distinct, "MIN_ROWS", 10**9)   # nothing kept, nothing shared
    monkeypatch.setattr(floor_module, "_shared", lambda c, recompute: c)
    for job, L, lo, fl, step in shared.values():
        assert np.array_equal(lo, compute_floor_s(job, L))
        assert np.array_equal(fl, step_time_floor_s(job, L))
        assert np.array_equal(step, evaluate(job, L).step_time_s)


# --------------------------------------------------------------------- the memory floor
@pytest.mark.parametrize("model, kw, schedules", CASES, ids=[c[0] if isinstance(c[0], str) else "tiny-moe"
                                                            for c in CASES])
def test_rank_zero_states_never_exceed_the_peak_memory(model, kw, schedules):
    """``job_state_floor_bytes`` (rank 0's weights, gradients and optimizer states) is at most
    ``job_memory``'s peak on every valid layout, in every precision's state bytes, and the
    search's check (``memory_and_fit``) gives the peak and the fit of ``job_memory`` wherever
    a layout fits."""
    from perfmodel.engine.job_memory import job_memory, job_state_floor_bytes, memory_and_fit
    from perfmodel.formulas.memory import fits_in_memory
    s = scen(model, **kw)
    L = valid_layouts(s, schedules)
    m, hw = model_of(s), hardware_of(s)
    for precision in ("bf16", "fp16", "fp8"):
        job = bind(with_recompute(s, "none"), m, hw, hw.efficiency, precision=precision)
        peak = job_memory(job, L)
        states = job_state_floor_bytes(job, L)
        assert (states <= peak.total).all()
        if job.software.pipeline_stages is None:
            assert (states > 0).all()
        mem, fit = memory_and_fit(job, L)
        assert np.array_equal(fit, fits_in_memory(peak, hw))
        assert np.array_equal(mem.total[fit], peak.total[fit])


def test_the_memory_floor_skips_layouts_where_the_states_alone_overflow():
    """DeepSeek-V3 on 64 H100: rank 0's states overflow 80 GB on most layouts (671B parameters
    x at least 16 bytes over 64 GPUs is 168 GB a GPU on average), so most go unchecked; the
    counts of the search are those of checking every layout."""
    from perfmodel.engine.job_memory import job_state_floor_bytes
    s = scen("deepseek-v3", num_gpus=64, seq_length=4096, global_batch_size=128)
    L = valid_layouts(s)
    job = bind(s, model_of(s), hardware_of(s), hardware_of(s).efficiency)
    over = job_state_floor_bytes(job, L) > hardware_of(s).gpu.hbm_usable_bytes
    assert over.mean() > 0.9


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("model, kw", [("deepseek-v3", dict(hardware="gb200-nvl72", num_gpus=256, seq_length=4096,
                                                             global_batch_size=512)),
                                       ("gpt3-175b", dict(num_gpus=256, seq_length=2048, global_batch_size=512))])
def test_a_layer_with_its_compute_shared_is_the_layer_worked_out_whole(model, kw, recompute):
    """``evaluate._layer_totals`` (what the per-shape memo keeps) gives each layer's times as
    ``_layer_time`` works them out from the rows of every operation, in every recompute mode
    (selective recompute reads which operations it redoes)."""
    from dataclasses import fields as dc_fields

    from perfmodel.formulas.workload import layer_kinds
    s = scen(model, **kw)
    L = valid_layouts(s)
    job = bind(with_recompute(s, recompute), model_of(s), hardware_of(s), hardware_of(s).efficiency)
    for kind in set(layer_kinds(model_of(s))):
        whole, shared = evaluate_module._layer_time(kind, job, L, 0.0), evaluate_module._layer_totals(kind, job, L)
        for f in dc_fields(whole):
            if f.name == "block":
                for g in dc_fields(whole.block):
                    if g.name != "ops":
                        assert np.array_equal(getattr(whole.block, g.name), getattr(shared.block, g.name)), g.name
            else:
                assert np.array_equal(getattr(whole, f.name), getattr(shared, f.name)), (kind, f.name)
