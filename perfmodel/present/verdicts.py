"""Verdicts in words: what the scaling sweep and the sizing study decided, and why, in one or two
sentences for the CLI and the app. The studies return typed verdicts (a rule and the points
behind it); only this module turns them into text."""

from __future__ import annotations

from perfmodel.present import fmt


def knee_text(knee) -> str:
    """Why the sweep's knee is where it is ('' when there is none)."""
    p, prev, best = knee.point, knee.previous, knee.best
    if knee.rule == "tokens_per_usd":
        return (f"useful tokens per dollar at {p.num_gpus} GPUs are "
                f"{p.useful_tokens_per_usd / best.useful_tokens_per_usd:.2f} of the best ({best.num_gpus} GPUs) "
                f"< threshold {knee.efficiency_threshold:.2f}")
    if knee.rule == "no_faster":
        return f"{p.num_gpus} GPUs are no faster than {prev.num_gpus}"
    if knee.rule == "value_of_time":
        return (f"from {prev.num_gpus} to {p.num_gpus} GPUs each hour saved costs "
                f"{fmt.usd(p.marginal_usd_per_hour_saved)} > value of time "
                f"{fmt.usd(knee.value_of_time_usd_per_hour)}/h")
    return ""


def _run(p) -> str:
    return (f"{fmt.seconds(p.time_to_solution_s)} for {fmt.usd(p.cost_usd)} at "
            f"{fmt.percent(p.goodput_frac)} goodput")


def scale_verdict_text(v) -> str:
    """The scaling verdict: the count recommended, or why none serves, and the numbers behind it."""
    best, nxt = v.chosen, v.next_point
    vot = v.value_of_time_usd_per_hour
    if v.rule == "none_runs":
        return "no GPU count in the sweep has a layout that runs and fits"
    if v.rule == "deadline_missed":
        return (f"no count serves: none meets the {fmt.seconds(v.deadline_s)} deadline; the fastest, "
                f"{best.num_gpus} GPUs, takes {_run(best)}")
    if v.rule == "deadline_not_worth":
        return (f"no count serves both the deadline and the value of time: meeting the "
                f"{fmt.seconds(v.deadline_s)} deadline takes {best.num_gpus} GPUs ({_run(best)}), and each hour "
                f"it saves over {v.previous_point.num_gpus} GPUs costs "
                f"{fmt.usd(v.marginal_from_previous_usd_per_hour)} > your {fmt.usd(vot)}/h")
    if v.rule == "value_of_time":
        why = f"{best.num_gpus} GPUs: {_run(best)}"
        mp = v.marginal_from_previous_usd_per_hour
        if v.previous_point is not None:
            why += ("; faster and cheaper than every smaller count" if mp <= 0 else
                    f"; each hour saved over {v.previous_point.num_gpus} GPUs costs {fmt.usd(mp)} "
                    f"<= your {fmt.usd(vot)}/h")
        if nxt is None:
            return why + "; no count in the sweep is faster, so try larger ones"
        if v.marginal_usd_per_hour_saved is None:
            return why + f"; {nxt.num_gpus} GPUs are no faster"
        return why + (f"; going on to {nxt.num_gpus} GPUs, each hour saved would cost "
                      f"{fmt.usd(v.marginal_usd_per_hour_saved)} > {fmt.usd(vot)}/h")
    if v.rule == "cheapest_on_time":
        return (f"{best.num_gpus} GPUs are the cheapest count that meets the {fmt.seconds(v.deadline_s)} deadline: "
                f"{_run(best)}")
    ref = v.reference
    why = (f"{best.num_gpus} GPUs are the largest count whose goodput per GPU stays at "
           f"{best.parallel_efficiency:.2f} >= {v.efficiency_threshold:.2f} of the best "
           f"({ref.num_gpus} GPUs): {_run(best)}")
    if nxt is not None:
        why += f"; {nxt.num_gpus} GPUs drop to {nxt.parallel_efficiency:.2f}"
    return why


def batch_text(sequences: int, seq_length: int) -> str:
    """A global batch in tokens and sequences: '16.8M tokens (2,048 x 8,192)'."""
    return f"{fmt.compact(sequences * seq_length)} tokens ({sequences:,} x {seq_length:,})"


def _sizing_rule_text(rule, b, row) -> str:
    if rule == "deadline_missed":
        return (f"fastest found: {fmt.seconds(b.time_to_train_s)} on {b.num_gpus} GPUs "
                f"> deadline {fmt.seconds(row.deadline_s)}")
    if rule == "over_budget":
        return f"cheapest found: {fmt.usd(b.cost_usd)} on {b.num_gpus} GPUs > budget {fmt.usd(row.budget_usd)}"
    if rule == "deadline_costs_more":
        return (f"meeting the {fmt.seconds(row.deadline_s)} deadline costs at least {fmt.usd(b.cost_usd)} "
                f"({b.num_gpus} GPUs) > budget {fmt.usd(row.budget_usd)}")
    if rule == "cheapest":
        return f"{b.num_gpus} GPUs meet both: {fmt.seconds(b.time_to_train_s)} for {fmt.usd(b.cost_usd)}"
    counts = row.gpu_counts
    return f"no layout runs and fits at {counts[0]}-{counts[-1]} GPUs (e.g. {row.none_reason})"


def sizing_reason_text(row) -> str:
    """Why a hardware type's sizing chose what it chose, or why nothing qualifies; when the batch
    grew, from what to what and what the scenario's batch alone gave; when the batch, not the
    hardware, limits the deadline, that."""
    c, b = row.choice, row.binding
    if row.rule == "no_price":
        return row.price_reason
    own = batch_text(row.global_batch_size, row.seq_length) if row.seq_length else ""
    if row.rule == "cheapest":
        why = f"cheapest count: {fmt.seconds(c.time_to_train_s)} for {fmt.usd(c.cost_usd)}"
        why += f" (deadline {fmt.seconds(row.deadline_s)})" if row.deadline_s is not None else ""
        if row.batch_grown:
            why += (f"; the global batch grown to {batch_text(c.global_batch_size, row.seq_length)} from {own}: "
                    f"the batch, not the hardware, limited it (at {own}, "
                    f"{_sizing_rule_text(row.fixed_rule, row.fixed_binding, row)})")
        return why
    why = _sizing_rule_text(row.rule, b, row)
    if b is not None and b.global_batch_size > row.global_batch_size:
        why += f" (batch grown to {batch_text(b.global_batch_size, row.seq_length)})"
    if row.limited_by == "batch":
        limit = (f"the batch limit of {fmt.compact(row.max_batch_tokens)} tokens" if row.max_batch_tokens
                 else f"the batch of {own}")
        why += (f"; {limit}, not the hardware, limits the deadline: more GPUs than {b.num_gpus} are no faster "
                f"or cannot split the batch" + ("" if row.max_batch_tokens else "; let the batch grow"))
    elif row.limited_by == "gpu_counts":
        why += f"; {b.num_gpus} GPUs is the largest count tried: try more" + (
            "" if row.max_batch_tokens else " GPUs, or let the global batch grow")
    return why
