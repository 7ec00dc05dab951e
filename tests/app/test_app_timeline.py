"""perfmodel.formulas.timeline (pipeline schedule Gantt rows) and perfmodel.studies.views.roofline (ops on the roofline).

Formula tests: hand-computed makespans of 1F1B and interleaved 1F1B (Narayanan et al. 2021,
sec. 2.2), and cross-checks against the step model.
"""

from __future__ import annotations

import pytest
from support import spec_predict as predict

from perfmodel.cli.common import EXAMPLE_SCENARIO
from perfmodel.engine.rules import resolve
from perfmodel.formulas.timeline import PHASES, pipeline_timeline, rank_order
from perfmodel.spec.errors import InputError
from perfmodel.spec.scenario import load_scenario
from perfmodel.studies.views.roofline import roofline
from perfmodel.studies.views.timeline import scenario_timeline


def _stage_busy(tl, stage):
    return sum(r["end_s"] - r["start_s"] for r in tl.rows if r["stage"] == stage and r["phase"] != PHASES[3])


# ------------------------------------------------------------------------ schedule
@pytest.mark.parametrize("m", [1, 3, 8])
def test_no_bubble_when_pp_is_1(m):
    tl = pipeline_timeline(1, 1, m, fwd_s=1.0, bwd_s=2.0, max_microbatches=None)
    assert tl.makespan_s == pytest.approx(m * 3.0)
    assert tl.bubble_frac == pytest.approx(0.0)


@pytest.mark.parametrize("p,m,f,b", [(2, 4, 1.0, 2.0), (4, 8, 1.0, 2.0), (4, 3, 1.0, 1.0), (8, 16, 0.5, 1.5)])
def test_1f1b_makespan_is_m_plus_p_minus_1_stage_times(p, m, f, b):
    tl = pipeline_timeline(p, 1, m, fwd_s=f, bwd_s=b, max_microbatches=None)
    assert tl.makespan_s == pytest.approx((m + p - 1) * (f + b))
    # bubble fraction (p - 1) / (m + p - 1) of each stage's time
    assert tl.bubble_frac == pytest.approx((p - 1) / (m + p - 1))


@pytest.mark.parametrize("p,v,m", [(2, 2, 4), (4, 2, 8), (4, 4, 16), (4, 5, 64), (8, 3, 16), (4, 2, 4)])
def test_interleaved_bubble_is_divided_by_v(p, v, m):
    f, b = 1.0, 2.0
    tl = pipeline_timeline(p, v, m, fwd_s=f, bwd_s=b, max_microbatches=None)
    assert tl.makespan_s == pytest.approx(m * (f + b) + (p - 1) * (f + b) / v)


def test_every_stage_does_all_its_work_once():
    p, v, m = 4, 2, 8
    tl = pipeline_timeline(p, v, m, fwd_s=[1, 2, 1, 1], bwd_s=[2, 4, 2, 2], max_microbatches=None)
    for r in range(p):
        ops = [(x["phase"], x["microbatch"], x["chunk"]) for x in tl.rows if x["stage"] == r]
        assert len(ops) == len(set(ops)) == 2 * m * v
        assert _stage_busy(tl, r) == pytest.approx(m * ([1, 2, 1, 1][r] + [2, 4, 2, 2][r]))
    # no two operations of one stage overlap
    for r in range(p):
        spans = sorted((x["start_s"], x["end_s"]) for x in tl.rows if x["stage"] == r)
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(spans, spans[1:]))


@pytest.mark.parametrize("v", [1, 2])
@pytest.mark.parametrize("t", [[3.0, 3.0, 3.0, 6.0], [4.0, 3.0, 3.0, 5.0], [3.0, 6.0, 3.0, 3.0], [6.0, 3.0, 3.0, 3.0]])
def test_slowest_stage_sets_the_pace(t, v):
    """Steady state at the slowest stage. When the last stage is the slowest (the output layer:
    the step model's case) the other stages add exactly (sum - max) / v, ``pipeline.bubble_s``;
    a slow earlier stage overlaps part of its neighbours' fill and drain, so that is a bound."""
    m = 16
    tl = pipeline_timeline(4, v, m, fwd_s=[x / 3 for x in t], bwd_s=[2 * x / 3 for x in t], max_microbatches=None)
    model = m * max(t) + (sum(t) - max(t)) / v
    assert m * max(t) - 1e-9 <= tl.makespan_s <= model + 1e-9
    if t[-1] == max(t):
        assert tl.makespan_s == pytest.approx(model)


def test_dependencies_hold():
    p, v, m, hop = 4, 2, 8, 0.1
    tl = pipeline_timeline(p, v, m, fwd_s=1.0, bwd_s=2.0, p2p_s=hop, max_microbatches=None)
    end = {}
    start = {}
    for r in tl.rows:
        j = r["chunk"] * p + r["stage"]
        end[(r["phase"], r["microbatch"], j)] = r["end_s"]
        start[(r["phase"], r["microbatch"], j)] = r["start_s"]
    J = p * v
    for mb in range(m):
        for j in range(1, J):
            assert start[("forward", mb, j)] >= end[("forward", mb, j - 1)] + hop - 1e-12
        for j in range(J - 1):
            assert start[("backward", mb, j)] >= end[("backward", mb, j + 1)] + hop - 1e-12
        assert start[("backward", mb, J - 1)] >= end[("forward", mb, J - 1)] - 1e-12


def test_exposed_comm_is_its_own_phase_and_adds_time():
    base = pipeline_timeline(2, 1, 4, fwd_s=1.0, bwd_s=2.0, max_microbatches=None)
    comm = pipeline_timeline(2, 1, 4, fwd_s=1.0, bwd_s=2.0, fwd_comm_s=0.5, bwd_comm_s=0.5, max_microbatches=None)
    assert any(r["phase"] == "exposed comm" for r in comm.rows)
    assert not any(r["phase"] == "exposed comm" for r in base.rows)
    assert comm.makespan_s == pytest.approx((4 + 2 - 1) * 4.0)


def test_tail_runs_after_the_last_backward():
    tl = pipeline_timeline(2, 1, 4, fwd_s=1.0, bwd_s=2.0, tail_s=0.25, max_microbatches=None)
    tail = [r for r in tl.rows if r["phase"] == PHASES[3]]
    assert len(tail) == 2 and tail[0]["start_s"] == pytest.approx(15.0)
    assert tl.makespan_s == pytest.approx(15.25)


def test_cap_on_microbatches_drawn():
    tl = pipeline_timeline(4, 2, 64, fwd_s=1.0, bwd_s=2.0, max_microbatches=10)
    assert tl.num_microbatches_total == 64
    assert tl.num_microbatches_drawn == 8   # a multiple of pp when interleaved
    assert max(r["microbatch"] for r in tl.rows) == 7
    assert pipeline_timeline(4, 1, 64, fwd_s=1, bwd_s=2, max_microbatches=10).num_microbatches_drawn == 10


def test_megatron_order_warmup_counts():
    # non-interleaved: rank r warms up with p - r - 1 forwards
    assert [op for op, _, _ in rank_order(0, 4, 1, 8)[:4]] == ["F", "F", "F", "F"]
    assert rank_order(3, 4, 1, 8)[:2] == [("F", 0, 0), ("B", 0, 0)]
    # interleaved: chunks advance every p micro-batches
    order = [x for x in rank_order(0, 2, 2, 4) if x[0] == "F"]
    assert order[:4] == [("F", 0, 0), ("F", 1, 0), ("F", 0, 1), ("F", 1, 1)]


@pytest.mark.parametrize("kwargs,field", [
    (dict(pp=0, vpp=1, num_microbatches=4), "timeline"),
    (dict(pp=4, vpp=2, num_microbatches=6), "timeline"),
    (dict(pp=2, vpp=1, num_microbatches=4, fwd_s=[1.0]), "fwd_s"),
    (dict(pp=2, vpp=1, num_microbatches=4, bwd_s=-1.0), "bwd_s"),
])
def test_invalid_inputs_raise_input_error(kwargs, field):
    args = dict(fwd_s=1.0, bwd_s=2.0) | kwargs
    with pytest.raises(InputError) as exc:
        pipeline_timeline(**args)
    assert exc.value.field == field


def test_scenario_timeline_matches_the_step_model():
    sc = load_scenario(EXAMPLE_SCENARIO)
    tl = scenario_timeline(resolve(sc), max_microbatches=None)
    assert tl.makespan_s == pytest.approx(predict(sc).step_time_s, rel=0.01)
    capped = scenario_timeline(resolve(sc))
    assert capped.num_microbatches_drawn < capped.num_microbatches_total


# ------------------------------------------------------------------------ roofline
def test_roofline_points_and_roofs():
    sc = load_scenario(EXAMPLE_SCENARIO)
    r = resolve(sc)
    rl = roofline(r)
    hw = r.job.hardware
    peak, bw = hw.gpu.peak_flop_per_s("bf16"), hw.gpu.hbm_bandwidth_bytes_per_s
    assert rl.ridge_flop_per_byte["bf16"] == pytest.approx(peak / bw)
    names = {p["op"] for p in rl.points}
    assert {"attention/qkv", "attention/core", "mlp/up", "mlp/down", "output/logits"} <= names
    for p in rl.points:
        if p["flop"] > 0:
            assert p["arithmetic_intensity_flop_per_byte"] == pytest.approx(p["flop"] / p["bytes"])
            roof = min(peak, p["arithmetic_intensity_flop_per_byte"] * bw)
            assert 0 < p["achieved_flop_per_s"] <= roof * (1 + 1e-9), p["op"]
        else:
            assert p["bound"] == "memory"
            assert p["achieved_bytes_per_s"] <= bw
    for r in rl.roofs:
        level_peak = peak if r["level"] == "peak" else None
        if level_peak:
            assert r["flop_per_s"] == pytest.approx(min(peak, r["arithmetic_intensity_flop_per_byte"] * bw))


@pytest.mark.parametrize("seq,bound", [(16, "memory"), (8192, "compute")])
def test_roofline_bound_follows_the_tokens_per_gemm(seq, bound):
    """16 tokens per GEMM: ~16 FLOP/byte, far below the H100 ridge (~295): memory-bound.
    8192 tokens: thousands of FLOP/byte: compute-bound."""
    sc = load_scenario(EXAMPLE_SCENARIO)
    par = sc.parallelism.model_copy(update={"tp": 8, "pp": 1, "vpp": 1, "cp": 1})
    sc = sc.model_copy(update={"seq_length": seq, "parallelism": par})
    gemms = [p for p in roofline(resolve(sc)).points if p["kind"] == "gemm"]
    assert gemms and all(p["bound"] == bound for p in gemms), [(p["op"], p["bound"]) for p in gemms]


@pytest.mark.parametrize("ep,listed", [(8, True), (128, False)])
def test_roofline_lists_the_expert_sort_only_where_it_runs(ep, listed):
    """The all-to-all dispatcher's sort by local expert runs only with > 1 expert per GPU."""
    base = load_scenario(EXAMPLE_SCENARIO)
    sc = type(base).model_validate({**base.model_dump(exclude_none=True), "model": "qwen3-30b-a3b", "num_gpus": 128,
                                    "global_batch_size": 128, "seq_length": 4096,
                                    "parallelism": dict(tp=1, pp=1, ep=ep)})
    ops = {p["op"] for p in roofline(resolve(sc)).points}
    assert "moe/permute" in ops
    assert ("moe/sort_by_local_expert" in ops) is listed


@pytest.mark.parametrize("option, value, ops", [
    ("attention_backend", "unfused", {"attention/core"}),
    ("elementwise_kernels", "eager", {"norm", "mlp/activation", "attention/rope"}),
    ("cross_entropy", "eager_fp32", {"output/cross_entropy"}),
])
def test_roofline_follows_the_software_stack(option, value, ops):
    """The Plan page's roofline is the prediction's: every stack option that changes an
    operation's time changes that operation's point (the roofline once drew flash attention for
    an unfused job while the predicted compute time moved from 12.9 s to 16.4 s)."""
    import perfmodel as pm

    base = load_scenario(EXAMPLE_SCENARIO)
    changed = base.model_copy(update={"software": base.software.model_copy(update={option: value})})

    def points(sc):
        return {(p["group"], p["op"]): p for p in pm.roofline(sc).points}

    before, after = points(base), points(changed)
    moved = {op for (group, op), p in after.items()
             if (group, op) not in before or p["time_s"] != before[(group, op)]["time_s"]}
    assert ops <= moved
    assert pm.predict(changed).breakdown_s["compute"] != pm.predict(base).breakdown_s["compute"]
