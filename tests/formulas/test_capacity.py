"""Capacity classes: spot preemption in goodput against Young/Daly by hand, and prices that are
unavailable rather than invented."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.formulas.cost import price_quote, rental_usd_per_gpu_hour
from perfmodel.formulas.goodput import (
    daly_wall_time_s,
    goodput_fraction,
    preempted,
    preemption_rate_per_s,
)
from perfmodel.spec.capacity import CAPACITY, CAPACITY_CLASSES, SPOT_NOTICE_S_DEFAULT
from perfmodel.spec.cost import CostModel, parse_cost_model
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.reliability import FailureModel

# 1,024 GPUs in 128 nodes; failures 1e-5 per GPU-hour (M = 1 / (1,024e-5 / 3,600 s)); a 1 TB
# checkpoint at 10 GB/s (delta = 100 s, read back the same: R = 300 + 100 s); spot preemptions
# 2e-4 per node-hour (M_p = 1 / (128 x 2e-4 / 3,600 s)).
N, NODES = 1024, 128
FM = FailureModel(gpu_failures_per_gpu_hour=1e-5, storage_write_bandwidth_bytes_per_s=10e9,
                  storage_read_bandwidth_bytes_per_s=10e9)
STATE = 1e12
DELTA, R = 100.0, 300.0 + 100.0
M = 3600.0 / (N * 1e-5)
MP = 3600.0 / (NODES * 2e-4)


def test_preemption_rate_by_hand():
    assert preemption_rate_per_s(N, 8, 2e-4) == pytest.approx(1 / MP)
    assert preemption_rate_per_s(1000, 8, 2e-4) == pytest.approx(125 * 2e-4 / 3600)   # ceil(1000/8)


def test_spot_without_enough_notice_is_young_with_the_summed_rate():
    """Notice 60 s < delta 100 s: a preemption loses work like a failure. Young with
    1/M_tot = 1/M + 1/M_p: tau* = sqrt(2 delta M_tot), goodput = 1 / (1 + delta/tau + tau/(2 M_tot)
    + R/M_tot); and Daly's complete model at that tau agrees to first order."""
    base = goodput_fraction(N, STATE, FM)
    assert float(base.checkpoint_write_s) == pytest.approx(DELTA) and float(base.restart_s) == pytest.approx(R)
    assert float(base.mtbf_s) == pytest.approx(M)
    g = preempted(base, N, 8, 2e-4, 60.0, None)
    M_tot = 1 / (1 / M + 1 / MP)
    tau = math.sqrt(2 * DELTA * M_tot)
    assert float(g.checkpoint_interval_s) == pytest.approx(tau)
    by_hand = 1 / (1 + DELTA / tau + tau / (2 * M_tot) + R / M_tot)
    assert float(g.fraction) == pytest.approx(by_hand, rel=1e-12)
    assert by_hand < float(base.fraction)          # preemptions cost goodput
    daly = 1 / float(daly_wall_time_s(1.0, tau, DELTA, R, M_tot))
    assert float(g.fraction) == pytest.approx(daly, rel=0.02)


def test_spot_notice_that_covers_a_checkpoint_loses_no_work():
    """Notice 120 s >= delta 100 s: each preemption costs delta + R; only failures lose work, so
    tau* = sqrt(2 delta M) (Young on failures alone) and
    goodput = 1 / (1 + delta/tau + tau/(2M) + R/M + (delta + R)/M_p)."""
    base = goodput_fraction(N, STATE, FM)
    g = preempted(base, N, 8, 2e-4, SPOT_NOTICE_S_DEFAULT, None)
    tau = math.sqrt(2 * DELTA * M)
    assert float(g.checkpoint_interval_s) == pytest.approx(tau)
    by_hand = 1 / (1 + DELTA / tau + tau / (2 * M) + R / M + (DELTA + R) / MP)
    assert float(g.fraction) == pytest.approx(by_hand, rel=1e-12)
    shares = g.wall_time_fractions()
    assert sum(float(v) for v in shares.values()) == pytest.approx(1.0)
    # saving on notice beats losing the work
    assert float(g.fraction) > float(preempted(base, N, 8, 2e-4, 60.0, None).fraction)


def test_a_fixed_interval_is_kept_and_no_preemption_changes_nothing():
    fixed = goodput_fraction(N, STATE, FM, checkpoint_interval_s=3600.0)
    assert float(preempted(fixed, N, 8, 2e-4, 60.0, 3600.0).checkpoint_interval_s) == 3600.0
    base = goodput_fraction(N, STATE, FM)
    none = preempted(base, N, 8, 0.0, 60.0, None)
    assert float(none.fraction) == pytest.approx(float(base.fraction), rel=1e-12)


def test_capacity_classes_are_records():
    assert CAPACITY_CLASSES == ("on_demand", "reserved_1y", "reserved_3y", "spot")
    assert [c for c in CAPACITY_CLASSES if CAPACITY[c].preemptible] == ["spot"]


@pytest.mark.parametrize("capacity", ["reserved_1y", "reserved_3y", "spot"])
def test_an_unsourced_class_price_is_unavailable_not_invented(capacity):
    hw = load_hardware("h100-sxm")
    with pytest.raises(InputError, match=f"^cost.capacity: {capacity} price unavailable for h100-sxm"):
        rental_usd_per_gpu_hour(hw, CostModel(capacity=capacity))
    own = CostModel(capacity=capacity, usd_per_gpu_hour=2.0)
    assert rental_usd_per_gpu_hour(hw, own) == 2.0 and price_quote(hw, own).basis == "own"
    yours = CostModel(capacity=capacity, **{f"{capacity}_usd_per_gpu_hour": 1.5})
    assert rental_usd_per_gpu_hour(hw, yours) == 1.5
    assert (price_quote(hw, yours).basis, price_quote(hw, yours).source) == (capacity, f"your {capacity} price")


def test_on_demand_is_the_default_and_keeps_the_price():
    hw = load_hardware("h100-sxm")
    assert rental_usd_per_gpu_hour(hw, CostModel()) == rental_usd_per_gpu_hour(hw, CostModel(capacity="on_demand"))
    with pytest.raises(InputError, match="^cost: .*capacity"):
        parse_cost_model({"capacity": "monthly"})


@settings(max_examples=60, deadline=None)
@given(rate=st.floats(0, 1e-2), notice=st.floats(0, 600), n=st.integers(8, 100_000))
def test_preemption_never_raises_goodput_and_it_stays_in_0_1(rate, notice, n):
    base = goodput_fraction(n, STATE, FM)
    g = float(preempted(base, n, 8, rate, notice, None).fraction)
    assert 0 < g <= float(base.fraction) * (1 + 1e-12)
