"""Buy or rent one sized option (``cost.buy_vs_rent_break_even_hours``): its cost rented and owned
(TCO) side by side, and where buying breaks even: after h GPU-hours of use per GPU, that is at a
utilisation of h / (Y x 8766 h) over the amortisation life Y, or after h / (u x 730.5 h) months at
the cost model's utilisation u. ``option`` is a ``sizing.SizingOption`` (its ``num_gpus`` and
``time_to_train_s``)."""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.formulas.cost import (
    HOURS_PER_YEAR,
    buy_vs_rent_break_even_hours,
    buy_vs_rent_break_even_months,
    job_cost,
)
from perfmodel.spec.cost import CostModel
from perfmodel.spec.errors import InputError


@dataclass(frozen=True)
class BuyVsRent:
    """One option of one hardware type, rented and owned."""

    num_gpus: int
    rent_usd: float
    """The run's cost at the cloud price."""
    tco_usd: float
    """The run's cost owning the hardware: capital over its life at the utilisation, networking, energy."""
    break_even_gpu_hours: float
    """GPU-hours of use per GPU after which buying is cheaper than renting (inf: never)."""
    break_even_utilisation_frac: float
    """The utilisation over the amortisation life at which owning costs what renting does (above
    it buying is cheaper; more than 1: never within the life)."""
    break_even_months: float
    """Calendar months to the break-even at the cost model's utilisation."""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def buy_vs_rent(option, hw, cost_model: CostModel) -> BuyVsRent:
    """The option's cost rented and owned, and where buying breaks even."""
    rent = job_cost(option.num_gpus, option.time_to_train_s, hw, cost_model.model_copy(update={"mode": "cloud"}))
    tco = job_cost(option.num_gpus, option.time_to_train_s, hw, cost_model.model_copy(update={"mode": "tco"}))
    hours = buy_vs_rent_break_even_hours(hw, cost_model)
    return BuyVsRent(option.num_gpus, float(rent.cost_usd), float(tco.cost_usd), hours,
                     hours / (cost_model.amortisation_years * HOURS_PER_YEAR),
                     buy_vs_rent_break_even_months(hw, cost_model))


def buy_vs_rent_or_none(option, hw, cost_model: CostModel) -> BuyVsRent | None:
    """``buy_vs_rent``, or None when the hardware has no rental price on the cost model's basis."""
    try:
        return buy_vs_rent(option, hw, cost_model)
    except InputError:
        return None
