"""The constraints a sizing answers to beyond the deadline and the budget: the site's power
envelope (``facility.power_mw``), the network bought (``fabric``), and which of them binds.

A power envelope caps the GPU count of each hardware type at N_max (``formulas.power``), in whole
nodes (racks), counting the fabric's power per GPU where a fabric is given and the GPUs at their
power cap where one is set. Sizing then tries the counts up to N_max, N_max itself and the round
counts under it (``capped_counts``). Each row also prices its option on every capacity class
(``capacity_quotes``) and carries its fabric's bill of materials. The binding constraint of a row:

==========  ===============================================================================
power       nothing meets the deadline, the fastest option is the largest count under the envelope
            that runs, and the next count beyond the envelope is faster; or no count the
            envelope holds runs at all
deadline    nothing meets the deadline within the counts tried, or the cheapest count overall
            misses it (the deadline forces a larger, dearer count)
budget      what meets the deadline costs more than the budget
network     nothing meets the deadline, and the fastest option would on the same fabric at 1:1
batch       more GPUs are no faster at the largest batch allowed (``SizingRow.limited_by``)
none        the cheapest option overall meets both
==========  ===============================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.formulas.cost import (
    class_usd_per_gpu_hour,
    rental_usd_per_gpu_hour,
    reserved_break_even_utilisation,
    spot_break_even_price_ratio,
)
from perfmodel.formulas.fabric import FabricBom, bill_of_materials, host_gpus, with_fabric
from perfmodel.formulas.power import capped, facility_power_per_gpu_w, gpus_under_envelope, tokens_per_mwh
from perfmodel.spec.capacity import CAPACITY
from perfmodel.spec.cost import CostModel
from perfmodel.spec.errors import InputError
from perfmodel.spec.facility import Facility
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.scenario import Scenario
from perfmodel.spec.units import MEGA, SECONDS_PER_HOUR

FABRIC_POWER_ITERATIONS = 3
"""The fabric's power per GPU depends on the count it serves, and the count on the power: a few
fixed-point rounds, then a step down a node at a time until the count with its own fabric fits."""


@dataclass(frozen=True)
class PowerCap:
    """The GPUs of one hardware type a power envelope holds."""

    num_gpus: int
    power_mw: float | None
    pue: float
    per_gpu_facility_w: float
    """(node power per GPU + fabric power per GPU) x PUE."""
    fabric_w_per_gpu: float
    switch_power_known: bool
    """False when a fabric is given without its switches' power: only its optics are counted."""
    reason: str = ""
    """When it holds no GPU: why (no whole node fits, or the per-GPU power cap cannot be modelled)."""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def power_cap(hw: HardwareSpec, scenario: Scenario) -> PowerCap | None:
    """N_max for ``hw`` under the scenario's facility envelope; None without an envelope. A
    per-GPU power cap that cannot be modelled for ``hw`` holds no GPU (``reason``), envelope or not."""
    fac = scenario.facility
    fac = fac if fac.pue is not None else fac.model_copy(update={"pue": scenario.cost.pue})
    try:
        hw = capped(hw, fac.gpu_power_cap_w)
    except InputError as exc:
        return PowerCap(0, fac.power_mw, fac.pue, 0.0, 0.0, True, str(exc))
    if fac.power_mw is None:
        return None
    g = hw.power.gpus_per_node
    host = host_gpus(hw)
    fabric_w, known = 0.0, True
    n = gpus_under_envelope(fac.power_mw, facility_power_per_gpu_w(hw, fac.pue, 0.0), g)
    if scenario.fabric is not None:
        def fabric_at(count: int) -> tuple[float, bool]:
            bom = bill_of_materials(count, host, hw.scale_out.nics_per_gpu, scenario.fabric)
            return bom.power_w / count, bom.switch_power_w is not None

        for _ in range(FABRIC_POWER_ITERATIONS):
            if n < 1:
                break
            fabric_w, known = fabric_at(n)
            n = gpus_under_envelope(fac.power_mw, facility_power_per_gpu_w(hw, fac.pue, fabric_w), g)
        while n >= 1:         # the count's own fabric must fit too: step down a node while it does not
            fabric_w, known = fabric_at(n)
            if n * facility_power_per_gpu_w(hw, fac.pue, fabric_w) <= fac.power_mw * MEGA * (1 + 1e-12):
                break
            n -= g
    return PowerCap(n, fac.power_mw, fac.pue, facility_power_per_gpu_w(hw, fac.pue, fabric_w), fabric_w, known,
                    "" if n else f"facility.power_mw: {fac.power_mw:g} MW holds no whole node of {hw.id}")


@dataclass(frozen=True)
class RowConstraints:
    """What binds one hardware type's sizing, the envelope, and what relaxing the envelope buys."""

    binding: str
    """power, deadline, budget, batch or none (module table); '' when nothing ran for another reason."""
    power_cap: PowerCap | None = None
    relaxed: object | None = None
    """With power binding: the option (``SizingOption``) at the smallest count tried beyond the
    envelope, at the largest batch allowed; None when there is none."""
    tokens_per_mwh: float | None = None
    """Of the option shown (the choice, else the one that binds)."""
    nonblocking_time_s: float | None = None
    """With an oversubscribed fabric: the option shown, its time to train on the same fabric at
    1:1 (what relaxing the network buys); None otherwise."""
    capacity: tuple = ()
    """``CapacityQuote`` of the option shown on each capacity class (on demand, reserved, spot)."""
    fabric_bom: FabricBom | None = None
    """The bill of materials of the fabric the option shown needs (None without a fabric)."""

    def to_dict(self) -> dict:
        r = self.relaxed
        return {"binding_constraint": self.binding, "tokens_per_mwh": self.tokens_per_mwh,
                "nonblocking_time_s": self.nonblocking_time_s,
                "capacity": [q.to_dict() for q in self.capacity],
                "fabric_bom": self.fabric_bom.to_dict() if self.fabric_bom else None,
                "power_cap": self.power_cap.to_dict() if self.power_cap else None,
                "relaxed": None if r is None else {"num_gpus": r.num_gpus, "time_to_train_s": r.time_to_train_s,
                                                   "cost_usd": r.cost_usd, "energy_kwh": r.energy_kwh}}


def row_constraints(rule: str, limited_by: str | None, choice, binding, options, cap: PowerCap | None,
                    all_counts: tuple[int, ...], counts: tuple[int, ...], option_at, time_of,
                    deadline_s: float | None, hw: HardwareSpec, cost_model: CostModel) -> RowConstraints:
    """The row's ``RowConstraints``; ``option_at(n)`` sizes one more count (the relaxed one),
    ``time_of(scenario, cost_model)`` predicts one scenario's time to train (on a non-blocking
    fabric, on another capacity class)."""
    shown = choice or binding
    forced = choice is not None and min(options, key=lambda o: (o.cost_usd, o.time_to_train_s)) is not choice
    largest = max((o.num_gpus for o in options), default=None)
    bind = binding_constraint(rule, limited_by, shown.num_gpus if shown else None, largest, forced,
                              counts != all_counts)
    nonblocking = None
    fab = shown.candidate.scenario.fabric if shown else None
    if fab is not None and fab.oversubscription > 1:
        flat = fab.model_copy(update={"oversubscription": 1.0})
        nonblocking = time_of(shown.candidate.scenario.model_copy(update={"fabric": flat}))
        if rule == "deadline_missed" and bind != "power" and deadline_s is not None and nonblocking <= deadline_s:
            bind = "network"
    beyond = [n for n in all_counts if cap is not None and n > cap.num_gpus]
    relaxed = option_at(beyond[0]) if bind == "power" and beyond else None
    if bind == "power" and rule == "deadline_missed" and (relaxed is None or
                                                          relaxed.time_to_train_s >= shown.time_to_train_s):
        bind, relaxed = ("batch" if limited_by == "batch" else "deadline"), None   # more power buys no time
    quotes = () if shown is None else capacity_quotes(shown, hw, cost_model, time_of)
    bom = None if fab is None else bill_of_materials(shown.num_gpus, host_gpus(hw), hw.scale_out.nics_per_gpu, fab)
    return RowConstraints(bind, cap, relaxed, option_tokens_per_mwh(shown), nonblocking, quotes, bom)


@dataclass(frozen=True)
class CapacityQuote:
    """The option shown, held on one capacity class (``perfmodel.spec.capacity``)."""

    capacity: str
    usd_per_gpu_hour: float | None
    """None: no price of the class is sourced or given (``reason``)."""
    time_to_train_s: float
    """On spot, slower by its preemptions (``goodput.preempted``)."""
    cost_usd: float | None
    break_even: float | None
    """Reserved: the utilisation over the term above which reserving beats on demand
    (p_reserved / p_on_demand); spot: the spot / on-demand price ratio below which the preempted
    run costs less (W_on_demand / W_spot, known without a spot price); None on demand."""
    reason: str = ""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def capacity_quotes(option, hw: HardwareSpec, cost_model: CostModel, time_of) -> tuple[CapacityQuote, ...]:
    """The option on demand, reserved for 1 and 3 years and on spot: price, time, cost and the
    break-even of each (``formulas.cost``); a class with no price says so. The time on spot needs
    no price: it is predicted on a price of 1 USD per GPU-hour, which the time does not read."""
    n, sc = option.num_gpus, option.candidate.scenario
    on_demand = cost_model.model_copy(update={"mode": "cloud", "capacity": "on_demand"})
    try:
        p_od = rental_usd_per_gpu_hour(hw, on_demand)
    except InputError:
        p_od = None
    W = time_of(sc, on_demand)
    out = [CapacityQuote("on_demand", p_od, W, None if p_od is None else n * W * p_od / SECONDS_PER_HOUR, None,
                         "" if p_od is not None else "no on-demand price on this basis")]
    for name in ("reserved_1y", "reserved_3y", "spot"):
        p = class_usd_per_gpu_hour(hw, cost_model, name)
        t = W if not CAPACITY[name].preemptible else time_of(
            sc, cost_model.model_copy(update={"mode": "cloud", "capacity": name, "usd_per_gpu_hour": 1.0}))
        if CAPACITY[name].preemptible:
            even = spot_break_even_price_ratio(W, t)
        else:
            even = None if p is None or p_od is None else reserved_break_even_utilisation(p, p_od)
        out.append(CapacityQuote(name, p, t, None if p is None else n * t * p / SECONDS_PER_HOUR, even,
                                 "" if p is not None else f"{name} price unavailable: none is sourced for {hw.id}"))
    return tuple(out)


ROUND_COUNT_MIN = 1024
"""The smallest power of two whose multiples under N_max sizing also tries (``capped_counts``)."""


def capped_counts(counts: tuple[int, ...], cap: PowerCap | None) -> tuple[int, ...]:
    """The counts at most N_max; N_max itself (the most the site holds); and the largest
    multiples of 1,024, 2,048, 4,096, ... under it. N_max is a whole number of nodes, often with a
    large prime factor (12,064 = 32 x 13 x 29) that no layout can use with a power-of-two batch,
    so the round counts just under it are what a cluster at the envelope would run."""
    if cap is None:
        return counts
    kept = {n for n in counts if n <= cap.num_gpus}
    if cap.num_gpus >= 1:
        kept.add(cap.num_gpus)
    step = ROUND_COUNT_MIN
    while step <= cap.num_gpus:
        kept.add(cap.num_gpus // step * step)
        step *= 2
    return tuple(sorted(kept))


def binding_constraint(rule: str, limited_by: str | None, shown_num_gpus: int | None, largest_run: int | None,
                       deadline_forces_more: bool, capped: bool) -> str:
    """The constraint that binds a sizing row (module table), before the relaxed count is tried.
    ``capped``: the envelope removed counts the sizing would otherwise have tried;
    ``largest_run``: the largest count with a layout that runs."""
    if rule == "deadline_missed":
        if capped and shown_num_gpus == largest_run:
            return "power"
        return "batch" if limited_by == "batch" else "deadline"
    if rule in ("over_budget", "deadline_costs_more"):
        return "budget"
    if rule == "cheapest":
        return "deadline" if deadline_forces_more else "none"
    if rule == "none_runs" and capped:
        return "power"
    return ""


def bought(hw: HardwareSpec, scenario: Scenario) -> HardwareSpec:
    """``hw`` with the scenario's fabric (None: as it is): its power and, with prices, its capex
    enter the cost and energy of every option and of buy or rent (``formulas.cost.fabric_cost``)."""
    return with_fabric(hw, scenario.fabric)


def at_site(scenario: Scenario, cost_model: CostModel, facility: Facility | None) -> tuple[Scenario, CostModel]:
    """The scenario at ``facility`` (None: its own) and the cost model sizing prices with, sharing
    one PUE: the facility's where it gives one (the energy a run uses is the site's), else the
    cost model's (then the scenario's cost section is the cost model, so the envelope uses it)."""
    if facility is not None:
        scenario = scenario.model_copy(update={"facility": facility})
    if scenario.facility.pue is not None:
        cost_model = cost_model.model_copy(update={"pue": scenario.facility.pue})
    return scenario.model_copy(update={"cost": cost_model}), cost_model


def option_tokens_per_mwh(option) -> float | None:
    """Tokens trained per MWh of facility energy by a sizing option (``formulas.power``)."""
    if option is None:
        return None
    return tokens_per_mwh(option.candidate.scenario.training_tokens or 0.0, option.energy_kwh)
