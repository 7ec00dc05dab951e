"""Sizing's constraints in words: the power envelope, the constraint that binds and what relaxing
it buys (``perfmodel.studies.search.constraints``), for the CLI and the app."""

from __future__ import annotations

from perfmodel.present import fmt

BINDING_TEXT = {
    "power": "the power envelope",
    "deadline": "the deadline",
    "budget": "the budget",
    "batch": "the global batch",
    "network": "the network (its oversubscription)",
    "none": "nothing: the cheapest count meets the deadline and the budget",
}


def power_cap_text(hardware_id: str, cap) -> str:
    """'h100-sxm: 20 MW at PUE 1.3 holds 12,064 GPUs (1,658 W each at the facility)'."""
    if cap is None:
        return ""
    if cap.reason:
        return f"{hardware_id}: {cap.reason}"
    fabric = ""
    if cap.fabric_w_per_gpu:
        fabric = f", {cap.fabric_w_per_gpu:.0f} W of it the fabric's" + (
            "" if cap.switch_power_known else " optics (switch power unknown)")
    return (f"{hardware_id}: {cap.power_mw:g} MW at PUE {cap.pue:g} holds {cap.num_gpus:,} GPUs "
            f"({cap.per_gpu_facility_w:,.0f} W each at the facility{fabric})")


def binding_text(hardware_id: str, constraints, tokens: float) -> str:
    """'h100-sxm binds: the power envelope; relaxing it to 16,384 GPUs: 30 d for $40M' (and tokens
    per MWh of the option shown)."""
    if constraints is None or not constraints.binding:
        return ""
    out = f"{hardware_id} binds: {BINDING_TEXT.get(constraints.binding, constraints.binding)}"
    r = constraints.relaxed
    if r is not None:
        out += (f"; relaxing it to {r.num_gpus:,} GPUs: {fmt.seconds(r.time_to_train_s)} for "
                f"{fmt.usd(r.cost_usd)}")
    if constraints.nonblocking_time_s is not None:
        out += f"; on a non-blocking (1:1) fabric: {fmt.seconds(constraints.nonblocking_time_s)}"
    if constraints.tokens_per_mwh is not None:
        out += f"; {fmt.compact(constraints.tokens_per_mwh)} tokens per MWh"
    return out


CAPACITY_WORDS = {"on_demand": "on demand", "reserved_1y": "reserved 1 y", "reserved_3y": "reserved 3 y",
                  "spot": "spot"}


def capacity_text(hardware_id: str, constraints) -> str:
    """'h100-sxm rent, reserve or spot: on demand $6.88/GPU-h, $1.2M; reserved 1 y unavailable (no
    sourced price); ...; spot unavailable (no sourced price), pays below 97% of on demand'."""
    if constraints is None or not constraints.capacity:
        return ""
    parts = []
    for q in constraints.capacity:
        words = CAPACITY_WORDS.get(q.capacity, q.capacity)
        if q.usd_per_gpu_hour is None:
            text = f"{words} unavailable (no sourced price)"
        else:
            text = f"{words} {fmt.usd_per_gpu_hour(q.usd_per_gpu_hour)}, {fmt.usd(q.cost_usd)}"
        if q.break_even is not None and q.capacity == "spot":
            text += (f", pays below {fmt.percent(q.break_even)} of the on-demand price "
                     f"({fmt.seconds(q.time_to_train_s)} with preemptions)")
        elif q.break_even is not None:
            text += f", beats on demand above {fmt.percent(q.break_even)} utilisation over the term"
        parts.append(text)
    return f"{hardware_id} rent, reserve or spot: " + "; ".join(parts)


def fabric_text(hardware_id: str, constraints) -> str:
    """'h100-sxm fabric for 1,024 GPUs: 48 switches (32 leaf, 16 spine), 2,048 cables, 2,560
    transceivers, 31.2 kW (optics; switch power unknown); capex unavailable (no sourced prices)'."""
    bom = None if constraints is None else constraints.fabric_bom
    if bom is None:
        return ""
    tiers = f"{bom.num_leaf_switches:,} leaf, {bom.num_spine_switches:,} spine" + (
        f", {bom.num_core_switches:,} core" if bom.num_core_switches else "")
    power = fmt.si(bom.power_w, "W") + ("" if bom.switch_power_w is not None else " (optics; switch power unknown)")
    capex = fmt.usd(bom.capex_usd) if bom.capex_usd is not None else "capex unavailable (no sourced prices)"
    return (f"{hardware_id} fabric for {bom.num_endpoints:,} NIC ports: {bom.num_switches:,} switches ({tiers}), "
            f"{bom.num_cables:,} cables, {bom.num_transceivers:,} transceivers, {power}; {capex}")
