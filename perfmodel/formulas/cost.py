"""Cost of GPU time: cloud rental or owned hardware (TCO), and energy.

Notation:

========  ==================================================  =================================
p         rental price of one GPU-hour                         ``usd_per_gpu_hour`` (cloud)
C         purchase price of one GPU (server share)             ``purchase_usd_per_gpu``
Y         amortisation life, years                             ``amortisation_years``
u         fraction of the life the GPU is in use               ``utilisation_frac``
o         cluster networking (+ ops) as a fraction of C        ``network_ops_overhead_frac``
P         node power per GPU at maximum, W                      ``hw.power.power_per_gpu_w``
a         average draw while training, fraction of P           ``avg_power_frac``
PUE       facility power / IT power                            ``pue``
e         electricity price, USD per kWh                       ``usd_per_kwh``
N, T      GPUs, wall-clock time of the job                     ``num_gpus``, ``wall_time_s``
========  ==================================================  =================================

Formulas (Cottier et al. 2024, "The rising costs of training frontier AI models",
arXiv 2405.21015, sec. 2.2-2.4 and app. A.1, A.4, use the same structure):

* cloud:  usd_per_gpu_hour = p (the capacity class's price: on demand by ``cloud_class``,
          reserved 1y/3y or spot where the spec sources one, ``perfmodel.spec.capacity``)
* TCO:    usd_per_gpu_hour = C (1 + o) / (Y * 8766 h * u)  +  P a PUE e / 1000
* job:    gpu_hours = N T / 3600;  cost = gpu_hours * usd_per_gpu_hour
* energy: energy_kwh = N P a PUE T / 3.6e6   -- **facility** energy, PUE included, in both modes
* a fabric (``fabric_cost``): + P_f PUE T / 3.6e6 kWh; with TCO and its prices, its capex K over
  the life, K T / (Y 8766 h u), replaces the networking share N C o T / (Y 8766 h u)
* buy vs rent: C (1 + o) + h P a PUE e / 1000 = h p   =>   h = C (1 + o) / (p - P a PUE e / 1000)
* reserve vs on demand: p_r x term = p x u x term   =>   u* = p_r / p
* spot vs on demand: N W_s p_s = N W p   =>   p_s / p = W / W_s (W_s: the slower, preempted run)

Every function broadcasts over numpy arrays of ``num_gpus`` and ``wall_time_s``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.formulas.fabric import job_fabric
from perfmodel.spec.capacity import CAPACITY
from perfmodel.spec.cost import CostModel
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.units import JOULES_PER_KWH, KILO, SECONDS_PER_HOUR

HOURS_PER_YEAR = 8766.0
"""Julian year, 365.25 days x 24 h."""
MONTHS_PER_YEAR = 12

@dataclass(frozen=True)
class GpuHourPrice:
    """One GPU-hour of use, split into what it pays for (USD per GPU-hour)."""

    rent_usd_per_hour: float
    capex_usd_per_hour: float
    network_ops_usd_per_hour: float
    energy_usd_per_hour: float
    """Electricity; zero in cloud mode, where the rental price already includes it."""

    @property
    def total_usd_per_hour(self) -> float:
        return (
            self.rent_usd_per_hour
            + self.capex_usd_per_hour
            + self.network_ops_usd_per_hour
            + self.energy_usd_per_hour
        )

    def rows(self) -> list[tuple[str, float]]:
        """Long-form (component, usd_per_hour) rows for charts."""
        return [
            ("rent", self.rent_usd_per_hour),
            ("capex", self.capex_usd_per_hour),
            ("network_ops", self.network_ops_usd_per_hour),
            ("energy", self.energy_usd_per_hour),
        ]


@dataclass(frozen=True)
class JobCost:
    """GPU time, money and energy of one job (scalars, or arrays when inputs were arrays)."""

    gpu_hours: float | np.ndarray
    usd_per_gpu_hour: float
    cost_usd: float | np.ndarray
    """gpu_hours * usd_per_gpu_hour."""
    energy_kwh: float | np.ndarray
    """Facility energy: node power x average-power fraction x PUE x time (PUE included)."""


def _scalar_or_array(x):
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x


def _check(field: str, values, *, positive: bool) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    bad = ~np.isfinite(arr) | ((arr <= 0) if positive else (arr < 0))
    if bad.any():
        first = arr[bad].flat[0] if arr.ndim else float(arr)
        rule = "> 0" if positive else ">= 0"
        raise InputError(field, f"must be finite and {rule}, got {first}")
    return arr


def rental_usd_per_gpu_hour(hw: HardwareSpec, cost_model: CostModel) -> float:
    """The cloud price p: your own price, else the hardware spec's price of the cost model's
    ``cloud_class`` (its listed price, or its hyperscaler or neocloud on-demand price); InputError
    when the spec has no sourced price of that class."""
    if cost_model.usd_per_gpu_hour is not None:
        return cost_model.usd_per_gpu_hour
    held = CAPACITY[cost_model.capacity]
    if held.price_field is not None:
        p = class_usd_per_gpu_hour(hw, cost_model, held.name)
        if p is None:
            raise InputError("cost.capacity", f"{held.name} price unavailable for {hw.id}: none is sourced; give "
                                              f"your own (cost.usd_per_gpu_hour, --price), or rent on demand")
        return p
    if cost_model.cloud_class == "listed":
        return hw.price.cloud_usd_per_gpu_hour
    p = hw.price.class_usd_per_gpu_hour(cost_model.cloud_class)
    if p is None:
        raise InputError("cost.cloud_class", f"no {cost_model.cloud_class} on-demand price is sourced for "
                                             f"{hw.id}; price it on another basis (listed, your own price, tco)")
    return p


def class_usd_per_gpu_hour(hw: HardwareSpec, cost_model: CostModel, capacity: str) -> float | None:
    """The price of a reserved or spot ``capacity``: yours (``cost.<class>_usd_per_gpu_hour``),
    else the spec's; None when neither is given (none is sourced in the specs)."""
    field = CAPACITY[capacity].price_field
    own = getattr(cost_model, field)
    return own if own is not None else getattr(hw.price, field)


def reserved_break_even_utilisation(reserved_usd_per_gpu_hour: float, on_demand_usd_per_gpu_hour: float) -> float:
    """u* = p_reserved / p_on_demand: reserving (paid for every hour of the term) beats renting on
    demand (paid per hour used) when the GPUs are busy more than u* of the term."""
    return reserved_usd_per_gpu_hour / on_demand_usd_per_gpu_hour


def spot_break_even_price_ratio(on_demand_wall_s: float, spot_wall_s: float) -> float:
    """r* = W_on_demand / W_spot: a run on spot (slower by its preemptions) costs less than on
    demand when p_spot / p_on_demand < r*."""
    return on_demand_wall_s / spot_wall_s


@dataclass(frozen=True)
class PriceQuote:
    """What one GPU-hour costs on the cost model's basis, and where the number comes from."""

    usd_per_gpu_hour: float
    basis: str
    """``own`` (your price), ``listed``, ``hyperscaler``, ``neocloud`` (a rental price of the
    spec), a capacity class (``reserved_1y``, ``reserved_3y``, ``spot``) or ``tco`` (owning:
    capital, networking and energy)."""
    source: str
    """The citation of the price (the hardware spec's ``sources`` entry), or what it is made of."""
    purchase_usd_per_gpu: float | None = None
    """With ``tco``: the purchase price per GPU the capital share is paid off from."""


def price_quote(hw: HardwareSpec, cost_model: CostModel) -> PriceQuote:
    """The price of one GPU-hour (``effective_usd_per_gpu_hour``) with its basis and source."""
    total = effective_usd_per_gpu_hour(hw, cost_model)
    if cost_model.mode == "tco":
        own = cost_model.purchase_usd_per_gpu is not None
        C = cost_model.purchase_usd_per_gpu if own else hw.price.purchase_usd_per_gpu
        src = "your purchase price" if own else hw.sources.get("price.purchase_usd_per_gpu", "the hardware spec")
        return PriceQuote(total, "tco", src, C)
    if cost_model.usd_per_gpu_hour is not None:
        return PriceQuote(total, "own", "your price")
    held = CAPACITY[cost_model.capacity]
    if held.price_field is not None:
        own = getattr(cost_model, held.price_field) is not None
        src = f"your {held.name} price" if own else hw.sources.get(f"price.{held.price_field}", "the hardware spec")
        return PriceQuote(total, held.name, src)
    if cost_model.cloud_class == "listed":
        key = "price.cloud_usd_per_gpu_hour"
        return PriceQuote(total, "listed", hw.sources.get(key) or f"{hw.price.cloud_provider}, {hw.price.cloud_date}")
    key = f"price.{cost_model.cloud_class}_usd_per_gpu_hour"
    return PriceQuote(total, cost_model.cloud_class, hw.sources.get(key, "the hardware spec"))


def energy_usd_per_gpu_hour(hw: HardwareSpec, cost_model: CostModel) -> float:
    """Electricity for one GPU-hour of use: P a PUE e / 1000 (P in W, e in USD/kWh)."""
    P, a, pue, e = hw.power.power_per_gpu_w, cost_model.avg_power_frac, cost_model.pue, cost_model.usd_per_kwh
    return P * a * pue * e / KILO


def gpu_hour_price(hw: HardwareSpec, cost_model: CostModel) -> GpuHourPrice:
    """Price of one GPU-hour of use, by component (see the module formulas)."""
    if cost_model.mode == "cloud":
        return GpuHourPrice(rental_usd_per_gpu_hour(hw, cost_model), 0.0, 0.0, 0.0)
    C = cost_model.purchase_usd_per_gpu or hw.price.purchase_usd_per_gpu
    Y, u, o = cost_model.amortisation_years, cost_model.utilisation_frac, cost_model.network_ops_overhead_frac
    used_hours = Y * HOURS_PER_YEAR * u
    return GpuHourPrice(
        rent_usd_per_hour=0.0,
        capex_usd_per_hour=C / used_hours,
        network_ops_usd_per_hour=C * o / used_hours,
        energy_usd_per_hour=energy_usd_per_gpu_hour(hw, cost_model),
    )


def effective_usd_per_gpu_hour(hw: HardwareSpec, cost_model: CostModel) -> float:
    """USD per GPU-hour of use: the cloud price, or C(1+o)/(Y*8766*u) + P a PUE e/1000."""
    return gpu_hour_price(hw, cost_model).total_usd_per_hour


def job_cost(num_gpus, wall_time_s, hw: HardwareSpec, cost_model: CostModel) -> JobCost:
    """GPU-hours, cost and facility energy of ``num_gpus`` GPUs held for ``wall_time_s``; with a
    fabric bound to ``hw`` (a scenario's ``fabric``), its share too (``fabric_cost``)."""
    N = _check("num_gpus", num_gpus, positive=True)
    T = _check("wall_time_s", wall_time_s, positive=False)
    price = effective_usd_per_gpu_hour(hw, cost_model)
    gpu_hours = N * T / SECONDS_PER_HOUR
    P, a, pue = hw.power.power_per_gpu_w, cost_model.avg_power_frac, cost_model.pue
    energy_kwh = N * P * a * pue * T / JOULES_PER_KWH
    cost_usd = gpu_hours * price
    if hw.scale_out.fabric is not None:
        extra_usd, extra_kwh = fabric_cost(N, T, hw, cost_model)
        cost_usd, energy_kwh = cost_usd + extra_usd, energy_kwh + extra_kwh
    return JobCost(
        gpu_hours=_scalar_or_array(gpu_hours),
        usd_per_gpu_hour=price,
        cost_usd=_scalar_or_array(cost_usd),
        energy_kwh=_scalar_or_array(energy_kwh),
    )


def fabric_cost(num_gpus, wall_time_s, hw: HardwareSpec, cost_model: CostModel):
    """(extra USD, extra kWh) of the job's fabric (``perfmodel.formulas.fabric.job_fabric``) over
    the per-GPU price: its power P_f x PUE x T in facility energy (both modes; optics draw the same
    at any load, MMA4Z00-NS: 15 W in every configuration), paid at the electricity price with TCO;
    with TCO and every fabric price given, its capex over the life at the utilisation,
    K T / (Y 8766 h u), in place of the networking share C o of the GPUs'
    (``network_ops_overhead_frac``). A rental price already holds the network and its power.
    Without a fabric price the networking share stays, and the capex is unavailable."""
    N = np.asarray(num_gpus, dtype=float)
    T = np.asarray(wall_time_s, dtype=float)
    shares = [job_fabric(int(n), hw) for n in np.atleast_1d(N).ravel()]
    power_w = np.reshape([s.power_w for s in shares], N.shape)
    extra_kwh = power_w * cost_model.pue * T / JOULES_PER_KWH
    if cost_model.mode != "tco":
        return np.zeros_like(extra_kwh), extra_kwh
    hours = T / SECONDS_PER_HOUR
    extra_usd = power_w * cost_model.pue * cost_model.usd_per_kwh / KILO * hours
    if all(s.capex_usd is not None for s in shares):
        capex = np.reshape([s.capex_usd for s in shares], N.shape)
        used_hours = cost_model.amortisation_years * HOURS_PER_YEAR * cost_model.utilisation_frac
        network = N * gpu_hour_price(hw, cost_model).network_ops_usd_per_hour
        extra_usd = extra_usd + (capex / used_hours - network) * hours
    return extra_usd, extra_kwh


def buy_vs_rent_break_even_hours(hw: HardwareSpec, cost_model: CostModel) -> float:
    """GPU-hours of use after which buying (capex + networking + energy) beats renting.

    h = C (1 + o) / (p - P a PUE e / 1000); ``inf`` when the rental price does not exceed
    the electricity cost. Ignores resale value and the time value of money. ``mode`` is
    ignored: both prices are read from ``cost_model`` and ``hw``.
    """
    C = cost_model.purchase_usd_per_gpu or hw.price.purchase_usd_per_gpu
    o = cost_model.network_ops_overhead_frac
    p = rental_usd_per_gpu_hour(hw, cost_model)
    margin = p - energy_usd_per_gpu_hour(hw, cost_model)
    return float(C * (1 + o) / margin) if margin > 0 else float("inf")


def buy_vs_rent_break_even_months(
    hw: HardwareSpec, cost_model: CostModel, utilisation_frac: float | None = None
) -> float:
    """Calendar months to reach the break-even when the GPU is busy ``utilisation_frac``
    of the time (default: ``cost_model.utilisation_frac``)."""
    u = cost_model.utilisation_frac if utilisation_frac is None else utilisation_frac
    if not 0 < u <= 1:
        raise InputError("utilisation_frac", f"must be in (0, 1], got {u}")
    hours_per_month = HOURS_PER_YEAR / MONTHS_PER_YEAR
    return buy_vs_rent_break_even_hours(hw, cost_model) / (u * hours_per_month)


def marginal_usd_per_hour_saved(cost_a_usd, time_a_s, cost_b_usd, time_b_s):
    """Extra dollars paid per hour of wall time saved by choosing b over a.

    (cost_b - cost_a) / ((time_a - time_b) / 3600). Negative when b is both faster and
    cheaper (a pure win) or slower and cheaper; ``nan`` where the times are equal.
    Broadcasts over arrays (e.g. consecutive points of a GPU-count sweep).
    """
    d_cost = np.asarray(cost_b_usd, dtype=float) - np.asarray(cost_a_usd, dtype=float)
    d_hours = (np.asarray(time_a_s, dtype=float) - np.asarray(time_b_s, dtype=float)) / SECONDS_PER_HOUR
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(d_hours != 0, d_cost / np.where(d_hours != 0, d_hours, 1.0), np.nan)
    return _scalar_or_array(out)
