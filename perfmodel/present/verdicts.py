"""Verdicts in words: what the scaling sweep and the sizing study decided, and why, in one or two
sentences for the CLI and the app. The studies return typed verdicts (a rule and the points
behind it); only this module turns them into text."""

from __future__ import annotations

from perfmodel.present import fmt


def knee_text(knee) -> str:
    """Why the sweep's knee is where it is ('' when there is none)."""
    p, prev = knee.point, knee.previous
    if knee.rule == "efficiency":
        return (f"parallel efficiency {p.parallel_efficiency:.2f} < threshold {knee.efficiency_threshold:.2f} "
                f"at {p.num_gpus} GPUs")
    if knee.rule == "no_faster":
        return f"{p.num_gpus} GPUs are no faster than {prev.num_gpus}"
    if knee.rule == "value_of_time":
        return (f"from {prev.num_gpus} to {p.num_gpus} GPUs each hour saved costs "
                f"{fmt.usd(p.marginal_usd_per_hour_saved)} > value of time "
                f"{fmt.usd(knee.value_of_time_usd_per_hour)}/h")
    return ""


def scale_verdict_text(v) -> str:
    """The scaling verdict: the count recommended and the numbers behind it."""
    best, nxt = v.chosen, v.next_point
    if v.rule == "none_runs":
        return "no GPU count in the sweep has a layout that runs and fits"
    if v.rule == "deadline_missed":
        return (f"no count meets the {fmt.seconds(v.deadline_s)} deadline; the fastest is {best.num_gpus} GPUs at "
                f"{fmt.seconds(best.time_to_solution_s)} for {fmt.usd(best.cost_usd)}")
    if v.rule == "value_of_time":
        vot = v.value_of_time_usd_per_hour
        why = (f"{best.num_gpus} GPUs minimise cost + time x {fmt.usd(vot)}/h: "
               f"{fmt.seconds(best.time_to_solution_s)} for {fmt.usd(best.cost_usd)}")
        if nxt is None:
            return why + "; it is the largest count in the sweep, so try larger ones"
        if v.marginal_usd_per_hour_saved is not None:
            return why + (f"; beyond {best.num_gpus} GPUs each hour saved costs "
                          f"{fmt.usd(v.marginal_usd_per_hour_saved)} > your {fmt.usd(vot)}/h value of time")
        return why + f"; {nxt.num_gpus} GPUs are no faster"
    if v.rule == "cheapest_on_time":
        return (f"{best.num_gpus} GPUs are the cheapest count that meets the {fmt.seconds(v.deadline_s)} deadline: "
                f"{fmt.seconds(best.time_to_solution_s)} for {fmt.usd(best.cost_usd)}")
    why = (f"{best.num_gpus} GPUs are the largest count with parallel efficiency "
           f"{best.parallel_efficiency:.2f} >= {v.efficiency_threshold:.2f}: "
           f"{fmt.seconds(best.time_to_solution_s)} for {fmt.usd(best.cost_usd)}")
    if nxt is not None:
        why += f"; {nxt.num_gpus} GPUs drop to {nxt.parallel_efficiency:.2f}"
    return why


def sizing_reason_text(row) -> str:
    """Why a hardware type's sizing chose what it chose, or why nothing qualifies."""
    c, b = row.choice, row.binding
    if row.rule == "cheapest":
        why = f"cheapest count: {fmt.seconds(c.time_to_train_s)} for {fmt.usd(c.cost_usd)}"
        return why + (f" (deadline {fmt.seconds(row.deadline_s)})" if row.deadline_s is not None else "")
    if row.rule == "deadline_missed":
        return (f"fastest found: {fmt.seconds(b.time_to_train_s)} on {b.num_gpus} GPUs "
                f"> deadline {fmt.seconds(row.deadline_s)}")
    if row.rule == "over_budget":
        return f"cheapest found: {fmt.usd(b.cost_usd)} on {b.num_gpus} GPUs > budget {fmt.usd(row.budget_usd)}"
    if row.rule == "deadline_costs_more":
        return (f"meeting the {fmt.seconds(row.deadline_s)} deadline costs at least {fmt.usd(b.cost_usd)} "
                f"({b.num_gpus} GPUs) > budget {fmt.usd(row.budget_usd)}")
    counts = row.gpu_counts
    return f"no layout runs and fits at {counts[0]}-{counts[-1]} GPUs (e.g. {row.none_reason})"
