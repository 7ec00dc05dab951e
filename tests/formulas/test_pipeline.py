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
