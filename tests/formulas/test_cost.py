"""Cost model: hand-computed cases, a published anchor, properties and input errors."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from perfmodel.formulas.cost import (
    buy_vs_rent_break_even_hours,
    buy_vs_rent_break_even_months,
    effective_usd_per_gpu_hour,
    gpu_hour_price,
    job_cost,
    marginal_usd_per_hour_saved,
)
from perfmodel.spec.cost import CostModel, parse_cost_model
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import load_hardware


@pytest.fixture(scope="module")
def h100():
    # h100-sxm.yaml: cloud $6.88/GPU-h, purchase $33,750/GPU, node 10,200 W / 8 GPUs = 1,275 W/GPU
    return load_hardware("h100-sxm")


# --- formula tests (hand-computed) ---------------------------------------------------------


def test_cloud_job_hand_computed(h100):
    cost = job_cost(8, 2 * 3600, h100, CostModel())
    # 8 GPUs x 2 h = 16 GPU-h; 16 x $6.88 = $110.08
    assert cost.gpu_hours == pytest.approx(16.0)
    assert cost.usd_per_gpu_hour == pytest.approx(6.88)
    assert cost.cost_usd == pytest.approx(110.08)
    # facility energy: 8 x 1275 W x 0.75 (avg/max) x 1.25 (PUE) = 9562.5 W; x 2 h = 19.125 kWh
    assert cost.energy_kwh == pytest.approx(19.125)


def test_tco_price_hand_computed(h100):
    price = gpu_hour_price(h100, CostModel(mode="tco"))
    used_hours = 4 * 8766 * 0.8  # 4 years x 8766 h x 80% utilisation = 28,051.2 h
    # capex 33,750 / 28,051.2 = 1.203157; networking 0.23 x that = 0.276726
    assert price.capex_usd_per_hour == pytest.approx(33750 / used_hours)
    assert price.network_ops_usd_per_hour == pytest.approx(0.23 * 33750 / used_hours)
    # energy 1275 W x 0.75 x 1.25 x $0.08/kWh / 1000 = $0.095625 per GPU-h
    assert price.energy_usd_per_hour == pytest.approx(0.095625)
    # total 41,512.5 / 28,051.2 + 0.095625 = 1.479883 + 0.095625 = 1.575508
    assert effective_usd_per_gpu_hour(h100, CostModel(mode="tco")) == pytest.approx(1.575508, rel=1e-6)
    assert sum(v for _, v in price.rows()) == pytest.approx(price.total_usd_per_hour)


def test_overrides(h100):
    assert effective_usd_per_gpu_hour(h100, CostModel(usd_per_gpu_hour=2.0)) == 2.0
    tco = CostModel(mode="tco", purchase_usd_per_gpu=25_000, pue=1.1, usd_per_kwh=0.0, network_ops_overhead_frac=0)
    # 25,000 / (4 x 8766 x 0.8) = 0.891229; no energy cost
    assert effective_usd_per_gpu_hour(h100, tco) == pytest.approx(25_000 / 28_051.2)


def test_break_even_hand_computed(h100):
    cm = CostModel()
    # buy: 33,750 x 1.23 = $41,512.5 up front; each hour saves 6.88 - 0.095625 = $6.784375
    # 41,512.5 / 6.784375 = 6,118.84 GPU-hours
    assert buy_vs_rent_break_even_hours(h100, cm) == pytest.approx(6118.84, rel=1e-5)
    # at 80% busy: 0.8 x 8766/12 = 584.4 h per month; 6,118.84 / 584.4 = 10.47 months
    assert buy_vs_rent_break_even_months(h100, cm) == pytest.approx(10.4703, rel=1e-4)
    # at 50% busy: 6,118.84 / 365.25 = 16.75 months
    assert buy_vs_rent_break_even_months(h100, cm, 0.5) == pytest.approx(16.7525, rel=1e-4)
    # renting below the electricity price never breaks even
    assert math.isinf(buy_vs_rent_break_even_hours(h100, CostModel(usd_per_gpu_hour=0.05)))


def test_marginal_usd_per_hour_saved():
    # a: $1,000 over 10 h; b: $1,500 over 6 h -> $500 for 4 h saved = $125 per hour saved
    assert marginal_usd_per_hour_saved(1000, 10 * 3600, 1500, 6 * 3600) == pytest.approx(125.0)
    out = marginal_usd_per_hour_saved(np.array([1000, 1000]), np.array([36000, 36000]),
                                      np.array([900, 1200]), np.array([18000, 36000]))
    # first: -$100 for 5 h saved = -20 (faster and cheaper); second: equal times -> nan
    assert out[0] == pytest.approx(-20.0)
    assert np.isnan(out[1])


def test_broadcasts_over_arrays(h100):
    n = np.array([8, 64, 512])
    t = np.array([3600.0, 7200.0, 36000.0])
    cost = job_cost(n, t, h100, CostModel())
    assert cost.gpu_hours.shape == (3,)
    np.testing.assert_allclose(cost.gpu_hours, [8, 128, 5120])
    np.testing.assert_allclose(cost.cost_usd, np.array([8, 128, 5120]) * 6.88)
    grid = job_cost(n[:, None], t[None, :], h100, CostModel(mode="tco"))
    assert grid.cost_usd.shape == (3, 3)


# --- anchor ----------------------------------------------------------------------------------


def test_deepseek_v3_cost_anchor(h100):
    # DeepSeek-V3 technical report, table 1: 2.788M H800 GPU-hours at $2/GPU-h = $5.576M.
    num_gpus = 2048
    wall_time_s = 2.788e6 / num_gpus * 3600
    cost = job_cost(num_gpus, wall_time_s, h100, CostModel(usd_per_gpu_hour=2.0))
    assert cost.gpu_hours == pytest.approx(2.788e6, rel=1e-9)
    assert cost.cost_usd == pytest.approx(5.576e6, rel=1e-9)


# --- properties ------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    num_gpus=st.integers(1, 200_000),
    wall_time_s=st.floats(0, 1e8, allow_nan=False),
    price=st.floats(0.01, 100, allow_nan=False),
)
def test_cloud_cost_is_gpu_hours_times_price(h100, num_gpus, wall_time_s, price):
    cost = job_cost(num_gpus, wall_time_s, h100, CostModel(usd_per_gpu_hour=price))
    assert cost.gpu_hours == pytest.approx(num_gpus * wall_time_s / 3600, rel=1e-12, abs=1e-12)
    assert cost.cost_usd == pytest.approx(cost.gpu_hours * price, rel=1e-12, abs=1e-12)
    assert cost.energy_kwh >= 0


@settings(max_examples=100, deadline=None)
@given(
    years=st.floats(1, 10),
    util=st.floats(0.05, 1.0),
    pue=st.floats(1.0, 2.0),
)
def test_tco_price_falls_with_life_and_utilisation(h100, years, util, pue):
    base = CostModel(mode="tco", amortisation_years=years, utilisation_frac=util, pue=pue)
    price = effective_usd_per_gpu_hour(h100, base)
    assert price > 0
    longer = base.model_copy(update={"amortisation_years": years * 1.5})
    assert effective_usd_per_gpu_hour(h100, longer) < price
    worse_pue = base.model_copy(update={"pue": pue + 0.1})
    assert effective_usd_per_gpu_hour(h100, worse_pue) > price


# --- input errors ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        {"usd_per_gpu_hour": -1.0},
        {"purchase_usd_per_gpu": 0.0},
        {"pue": 0.9},
        {"utilisation_frac": 1.5},
        {"avg_power_frac": 0.0},
        {"amortisation_years": 0},
        {"mode": "lease"},
        {"usd_per_kwh_typo": 0.1},
    ],
)
def test_bad_cost_model_rejected(bad):
    with pytest.raises(ValidationError):
        CostModel(**bad)
    with pytest.raises(InputError) as err:
        parse_cost_model(bad)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("cost: ")
    assert next(iter(bad)).split("_typo")[0] in message


@pytest.mark.parametrize(
    "num_gpus, wall_time_s, field",
    [(0, 3600, "num_gpus"), (-8, 3600, "num_gpus"), (8, -1.0, "wall_time_s"), ([8, 0], 3600, "num_gpus")],
)
def test_bad_job_inputs(h100, num_gpus, wall_time_s, field):
    with pytest.raises(InputError) as err:
        job_cost(num_gpus, wall_time_s, h100, CostModel())
    assert str(err.value).startswith(f"{field}: ")
    assert "\n" not in str(err.value)


def test_break_even_months_rejects_bad_utilisation(h100):
    with pytest.raises(InputError, match="utilisation_frac"):
        buy_vs_rent_break_even_months(h100, CostModel(), 1.2)


def test_mixed_listed_classes_are_named_with_their_hardware():
    from perfmodel.present.money import mixed_classes_text
    assert mixed_classes_text({"b200": "hyperscaler", "h100-sxm": "hyperscaler"}) == ""
    text = mixed_classes_text({"gb200-nvl72": "neocloud", "b200": "hyperscaler", "h100-sxm": "hyperscaler"})
    assert text.startswith("The listed prices are of different kinds (a hyperscaler's for b200, h100-sxm; "
                           "a neocloud's for gb200-nvl72)")
