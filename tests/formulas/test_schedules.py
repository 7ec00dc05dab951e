"""Pipeline schedules (perfmodel.formulas.pipeline, schedule_orders, timeline): each schedule's
bubble and activations in flight against its paper's closed form on hand-computed cases, the
timeline's simulation against the closed form for equal stages, and the weight-gradient share
of a layer from the operation inventory.

Sources: Narayanan et al. 2021 sec. 2.2 (1F1B, interleaved); Qi et al. 2023, "Zero Bubble
Pipeline Parallelism" (arXiv 2401.10241) table 2 (ZB-H1, ZB-H2); Qi et al. 2024, "Pipeline
Parallelism with Controllable Memory" (arXiv 2405.15362) and github sail-sg/zero-bubble-
pipeline-parallelism README (ZB-V: zero bubble at F = B = W, 1F1B's memory); DeepSeek-V3
technical report (arXiv 2412.19437) table 2 and github deepseek-ai/DualPipe README (DualPipe,
DualPipeV).
"""

from __future__ import annotations

import numpy as np
import pytest

from perfmodel.engine.block import block_time
from perfmodel.formulas import pipeline as pl
from perfmodel.formulas.compute import gemm_precision, gemm_shape, gemm_time_s
from perfmodel.formulas.layouts import layouts_from_arrays
from perfmodel.formulas.schedule_orders import Placement, rank_orders
from perfmodel.formulas.timeline import pipeline_timeline
from perfmodel.formulas.workload import LayerKind, OpKind, layer_ops
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.presets import load_model
from perfmodel.spec.software import SoftwareStack
from perfmodel.spec.schedules import schedule_names

P, M = 4, 8
F, B, W = 1.0, 1.2, 0.8           # forward, input-gradient backward, weight-gradient backward


def _closed(name, p=P, v=1, f=F, b=B, w=W):
    return float(pl.bubble_closed_form_s(pl.schedule_code(name), p, v, f, b, w))


# -------------------------------------------------------------------- closed forms
@pytest.mark.parametrize("name,v,expected", [
    ("1f1b", 1, 3 * 3.0),                       # (p-1)(F+B+W), Narayanan et al. 2021
    ("interleaved", 2, 3 * 3.0 / 2),            # (p-1)(F+B+W)/v
    ("zb-h1", 1, 3 * (1.0 + 1.2 - 0.8)),        # (p-1)(F+B-W), Qi et al. 2023 table 2
    ("zb-h2", 1, 3 * (1.0 + 1.2 - 1.6)),        # (p-1)(F+B-2W), ibid.
    ("zb-v", 2, 3 * (1.2 - 0.8)),               # (p-1)(max(F,B)-W): zero at F = B = W
    ("dualpipe", 1, 1 * (1.0 + 2.4 - 0.8)),     # (p/2-1)(F+2B-W), DeepSeek-V3 table 2
    ("dualpipe-v", 2, 3 * (1.0 + 2.4 - 0.8) / 2),   # DualPipe README, PP = 2p half stages
])
def test_bubble_closed_forms(name, v, expected):
    assert _closed(name, v=v) == pytest.approx(expected)
    # as a fraction of the step's busy time m (F + B + W)
    fraction = _closed(name, v=v) / (M * (F + B + W))
    assert fraction == pytest.approx(expected / (M * 3.0))


def test_bubble_fraction_of_1f1b_and_interleaving_is_narayanan():
    for v in (1, 2, 3):
        name = "1f1b" if v == 1 else "interleaved"
        assert _closed(name, v=v) / (M * (F + B + W)) == pytest.approx(float(pl.bubble_fraction(P, v, M)))


def test_zero_bubble_readme_at_equal_times():
    """sail-sg README table (T_F = T_B = T_W): ZB1P one third of 1F1B's bubble, ZB2P and ZBV zero."""
    t = 1.0
    one_f_one_b = _closed("1f1b", f=t, b=t, w=t)
    assert _closed("zb-h1", f=t, b=t, w=t) == pytest.approx(one_f_one_b / 3)
    assert _closed("zb-h2", f=t, b=t, w=t) == 0.0
    assert _closed("zb-v", v=2, f=t, b=t, w=t) == 0.0


@pytest.mark.parametrize("p", [2, 4, 8, 16])
@pytest.mark.parametrize("w", [0.5, 0.8, 1.0])
def test_dualpipe_is_the_readme_form_where_f_equals_b(p, w):
    """DualPipe README: (PP/2 - 1)(F&B + B - 3W), B the full backward and F&B the overlapped
    pair, which computes F + B_full (the communication hides, not the compute)."""
    f = b = 1.0
    full = b + w
    readme = (p / 2 - 1) * ((f + full) + full - 3 * w)
    assert _closed("dualpipe", p=p, f=f, b=b, w=w) == pytest.approx(readme)
    readme_v = (2 * p / 2 - 1) * ((f + full) / 2 + full / 2 - 3 * w / 2)   # PP = 2p stages of half size
    assert _closed("dualpipe-v", p=p, v=2, f=f, b=b, w=w) == pytest.approx(readme_v)


def test_zb_h2_bubble_never_negative():
    assert _closed("zb-h2", f=1.0, b=1.0, w=1.5) == 0.0


def test_no_bubble_without_a_pipeline():
    for name in schedule_names():
        assert _closed(name, p=1) == 0.0
    assert float(pl.bubble_over_fill(pl.schedule_code("zb-h1"), 1, 1, F, B, W)) == 0.0


def test_uneven_stages_scale_the_fill_by_the_closed_form():
    """(sum - max) times the closed form per unit of fill: for equal stages the closed form."""
    t = F + B + W
    for name, v in (("1f1b", 1), ("interleaved", 2), ("zb-h1", 1), ("zb-h2", 1), ("zb-v", 2), ("dualpipe", 1)):
        code = pl.schedule_code(name)
        got = pl.bubble_from_stages_s(np.array([P * t]), np.array([t]), np.array([v]), np.array([code]),
                                      np.array([P]), (F, B, W))
        assert float(got[0]) == pytest.approx(_closed(name, v=v))


# ----------------------------------------------------------------- memory in flight
@pytest.mark.parametrize("name,v,chunks,stages", [
    ("1f1b", 1, 4, 4.0),            # p M_B (Narayanan et al. 2021; Qi et al. 2023 table 2)
    ("interleaved", 2, 11, 5.5),    # p (1 + (p-1)/(p v)) = 4 x 1.375 (Korthikanti et al. 2022 4.2.3)
    ("zb-h1", 1, 4, 4.0),           # p M_B (Qi et al. 2023 table 2)
    ("zb-h2", 1, 7, 7.0),           # (2p - 1) M_B (ibid.)
    ("zb-v", 2, 8, 4.0),            # 2p chunks of half a stage: 1F1B's p M_B (sail-sg README: 1x)
    ("dualpipe", 1, 5, 5.0),        # PP + 1 (DeepSeek-V3 table 2)
    ("dualpipe-v", 2, 9, 4.5),      # PP + 1 half stages, PP = 2p (DualPipe README)
])
def test_activations_in_flight_on_the_first_rank(name, v, chunks, stages):
    got = int(pl.chunks_in_flight(0, P, v, 16, pl.schedule_code(name)))
    assert got == chunks
    assert got / v == pytest.approx(stages)


def test_in_flight_never_exceeds_the_step():
    assert int(pl.chunks_in_flight(0, 8, 1, 5, pl.schedule_code("zb-h2"))) == 5


@pytest.mark.parametrize("name,v,m", [("1f1b", 1, 12), ("interleaved", 2, 12), ("zb-h1", 1, 12), ("zb-h2", 1, 12),
                                      ("zb-v", 2, 12), ("dualpipe", 1, 12), ("dualpipe-v", 2, 12)])
def test_orders_hold_what_the_memory_model_says(name, v, m):
    """The peak of forwards run and not yet back-propagated, rank by rank, in each order."""
    code = pl.schedule_code(name)
    for r, order in enumerate(rank_orders(code, P, v, m)):
        held = peak = 0
        for op in order:
            if op[0] == "F":
                held += 1
            elif op[0] in ("B", "I"):
                held -= 1
            elif op[0] == "FB":
                peak = max(peak, held + 1)     # the pair's forward before its backward frees
            peak = max(peak, held)
        assert peak == int(pl.chunks_in_flight(r, P, v, m, code)), (name, r)


def test_dualpipe_holds_two_stages_of_parameters():
    assert list(pl.parameter_copies(np.arange(len(schedule_names())))) == [1, 1, 1, 1, 1, 2, 1]


# ---------------------------------------------------------------- the simulation
REGIMES = {   # (F, B, W) where each closed form is its order's exact bubble
    "zb": [(1.0, 1.2, 0.8), (1.0, 1.0, 1.0), (0.9, 1.3, 0.5)],          # B >= F >= W
    "dualpipe": [(1.0, 1.0, 0.8), (1.0, 1.0, 1.0), (1.2, 1.2, 0.5)],    # F = B >= W
}


@pytest.mark.parametrize("name,v,regime", [("1f1b", 1, "zb"), ("interleaved", 2, "zb"), ("interleaved", 3, "zb"),
                                           ("zb-h1", 1, "zb"), ("zb-h2", 1, "zb"), ("zb-v", 2, "zb"),
                                           ("dualpipe", 1, "dualpipe"), ("dualpipe-v", 2, "dualpipe")])
@pytest.mark.parametrize("p", [2, 4, 6])
def test_simulated_bubble_is_the_closed_form(name, v, regime, p):
    for f, b, w in REGIMES[regime]:
        for m in (2 * p, 3 * p):
            tl = pipeline_timeline(p, v, m, fwd_s=f, bwd_s=b + w, wgrad_s=w, max_microbatches=None, schedule=name)
            assert tl.bubble_s == pytest.approx(_closed(name, p=p, v=v, f=f, b=b, w=w), abs=1e-9), (f, b, w, m)
            assert tl.busy_s == pytest.approx(p * m * (f + b + w))


@pytest.mark.parametrize("name,v", [("zb-h1", 1), ("zb-v", 2), ("dualpipe", 1), ("dualpipe-v", 2)])
def test_dependencies_hold_in_every_order(name, v):
    p, m, hop = 4, 8, 0.05
    tl = pipeline_timeline(p, v, m, fwd_s=1.0, bwd_s=2.0, wgrad_s=0.8, p2p_s=hop, max_microbatches=None,
                           schedule=name)
    place = Placement(pl.schedule_code(name), p, v, m)
    fwd = {}
    for r in tl.rows:
        if r["phase"] in ("forward", "forward + backward (paired)"):
            fwd.setdefault((r["microbatch"], r["stage"], r["chunk"]), r)
    for mb in range(m):
        for j in range(1, place.num_stages):
            a = fwd[(mb, place.rank(mb, j - 1), place.chunk(mb, j - 1))]
            b = fwd[(mb, place.rank(mb, j), place.chunk(mb, j))]
            assert b["start_s"] >= a["end_s"] + (hop if a["stage"] != b["stage"] else 0) - 1e-12
    for r in range(p):   # one operation at a time on every rank
        spans = sorted((x["start_s"], x["end_s"]) for x in tl.rows if x["stage"] == r)
        assert all(x[1] <= y[0] + 1e-12 for x, y in zip(spans, spans[1:]))


def test_timeline_refuses_too_few_microbatches():
    from perfmodel.spec.errors import InputError
    with pytest.raises(InputError, match="dualpipe needs at least 8 micro-batches"):
        pipeline_timeline(4, 1, 6, fwd_s=1.0, bwd_s=2.0, schedule="dualpipe")


# ------------------------------------------------------------- B and W of a layer
def test_weight_gradient_is_the_weight_gemms_backward():
    """W is the weight-gradient GEMM of each weight GEMM (k x n, reduce m: as many FLOPs as its
    forward, Qi et al. 2023 table 1); attention and memory-bound ops are input-gradient work."""
    model, hw = load_model("gpt3-175b"), load_hardware("h100-sxm")
    sw = SoftwareStack()
    L = layouts_from_arrays(tp=[8], pp=[1], vpp=[1], cp=[1], ep=[1], etp=[1], sp=[True], zero_stage=[0], mbs=[1],
                            dp=[1], num_mb=[1])
    ops = layer_ops(model, LayerKind.DENSE, sw)
    blk = block_time(ops, model, L, 2048, "bf16", hw, hw.efficiency, sw)
    expected = 0.0
    for op in ops:
        if op.kind is OpKind.GEMM:
            sh = gemm_shape(op, model, L, 2048, sw)
            expected = expected + gemm_time_s(sh.k, sh.n, sh.m, sh.count, gemm_precision(op, "bf16"), hw, hw.efficiency)
    assert float(blk.wgrad_s[0]) == pytest.approx(float(expected[0]), rel=1e-12)
    assert 0 < float(blk.wgrad_s[0]) < float(blk.gemm_bwd_s[0])
    assert all(float(np.asarray(t.wgrad_s).max()) == 0.0 for t in blk.ops if t.kind is not OpKind.GEMM)
