"""The clock of a long attention phase under the power limit (perfmodel.formulas.clocks), by hand."""

import numpy as np
import pytest

from perfmodel.formulas.clocks import ATTENTION_OWN_POWER_W, POWER_CONTROL_RESPONSE_S, attention_phase_s
from perfmodel.spec.hardware import load_hardware

H100 = load_hardware("h100-sxm")                 # 700 W limit
H100_500W = load_hardware("h100-sxm-hbm2e-500w")  # 500 W limit, below the attention kernels' own draw
EFF = H100.efficiency.model_copy(update={"attention_clock_ratio": 0.887})


def test_a_phase_shorter_than_the_response_stays_at_the_capped_clock():
    assert float(attention_phase_s(0.05, EFF, H100)) == pytest.approx(0.05)
    assert float(attention_phase_s(POWER_CONTROL_RESPONSE_S, EFF, H100)) == pytest.approx(0.1)


def test_a_long_phase_runs_the_work_after_the_response_at_its_own_clock():
    # 0.3 s at the capped clock: 0.1 s capped, then the remaining 0.2 s of capped-clock work takes 0.887 of it
    assert float(attention_phase_s(0.3, EFF, H100)) == pytest.approx(0.1 + 0.2 * 0.887)
    t = attention_phase_s(np.array([0.02, 0.1, 1.0]), EFF, H100)
    assert t == pytest.approx([0.02, 0.1, 0.1 + 0.9 * 0.887])


def test_a_tighter_power_limit_or_no_capped_clock_changes_nothing():
    assert H100_500W.gpu.tdp_w < ATTENTION_OWN_POWER_W <= H100.gpu.tdp_w
    assert float(attention_phase_s(0.3, EFF, H100_500W)) == pytest.approx(0.3)
    unmeasured = EFF.model_copy(update={"attention_clock_ratio": 1.0})
    assert float(attention_phase_s(0.3, unmeasured, H100)) == pytest.approx(0.3)
    no_limit = H100.model_copy(update={"gpu": H100.gpu.model_copy(update={"tdp_w": None})})
    assert float(attention_phase_s(0.3, EFF, no_limit)) == pytest.approx(0.3)


def test_the_phase_is_never_slower_than_capped_nor_faster_than_its_own_clock():
    T_c = np.linspace(0.0, 2.0, 41)
    t = attention_phase_s(T_c, EFF, H100)
    assert np.all(t <= T_c + 1e-15) and np.all(t >= 0.887 * T_c - 1e-15)
