import numpy as np
import pytest

from perfmodel.formulas.pipeline import StageTimes, bubble_fraction, bubble_s, slowest_stage_s


def _equal(t, n=1):
    a = np.full(n, t)
    return StageTimes(a, a, a)


@pytest.mark.parametrize("pp,vpp", [(2, 1), (4, 1), (8, 2), (16, 4)])
def test_equal_stages_reproduce_narayanan_bubble(pp, vpp):
    t, m = 0.5, 64
    b = float(bubble_s(_equal(t), np.array([pp]), np.array([vpp]))[0])
    assert b == pytest.approx((pp - 1) * t / vpp)
    assert b / (m * t) == pytest.approx(float(bubble_fraction(pp, vpp, m)))


def test_no_bubble_when_pp_is_one():
    assert float(bubble_s(_equal(1.0), np.array([1]), np.array([1]))[0]) == 0.0


def test_slowest_stage_sets_the_pace():
    st = StageTimes(np.array([1.0]), np.array([1.0]), np.array([1.5]))
    assert float(slowest_stage_s(st, np.array([4]))[0]) == 1.5
    # bubble = sum - max = 1 + 2*1 + 1.5 - 1.5 = 3
    assert float(bubble_s(st, np.array([4]), np.array([1]))[0]) == pytest.approx(3.0)


def test_combined_1f1b_pairs_the_steady_state_only():
    """Megatron-Core's combined 1F1B runs warmup forwards and cooldown backwards alone: rank 0 of
    an interleaved pipeline warms up with 2(p - 1) + (v - 1)p + 1 chunks (one more micro-batch than
    without the overlap); without pipelining only the first forward and the last backward."""
    from perfmodel.formulas.pipeline import combined_1f1b_paired_frac
    assert float(combined_1f1b_paired_frac(8, 4, 128)) == pytest.approx(1 - (14 + 24 + 1) / 512)
    assert float(combined_1f1b_paired_frac(1, 1, 16)) == pytest.approx(15 / 16)
    assert float(combined_1f1b_paired_frac(8, 4, 4)) == 0.0
