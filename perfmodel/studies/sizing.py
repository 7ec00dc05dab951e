"""Cluster sizing: for each hardware type, the cheapest GPU count and layout that trains the
given tokens within a deadline and a budget, or the reason none does.

For one hardware type and GPU count the cost is proportional to the time (N GPUs x wall time
x price), so the fastest layout is also the cheapest; the search ranks by time. Across counts,
time to solution W = (tokens / throughput) / goodput (``goodput.py``) and cost = N W price
(``cost.job_cost``). Among the counts with W <= deadline and cost <= budget the cheapest wins
(ties: the faster). The global batch is the scenario's at every count (strong scaling).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from perfmodel.present import fmt
from perfmodel.formulas.cost import CostModel, job_cost
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import InputError
from perfmodel.formulas.goodput import FailureModel, checkpoint_state_bytes, goodput_fraction
from perfmodel.spec.hardware import list_hardware_ids, load_hardware
from perfmodel.formulas.overlap import Overlap
from perfmodel.spec.scenario import Scenario
from perfmodel.studies.search import Candidate, SearchOptions, bind, search
from perfmodel.formulas.counts import param_count

GPU_COUNTS_DEFAULT = tuple(2 ** k for k in range(3, 15))
"""8 to 16,384 GPUs in powers of two (16,384 is the Llama 3 405B run; Llama Team 2024)."""


@dataclass(frozen=True)
class SizingOption:
    """One GPU count of one hardware type, with its best layout."""

    num_gpus: int
    candidate: Candidate
    time_to_train_s: float
    """Time to solution: ideal time / goodput."""
    goodput_frac: float
    cost_usd: float
    gpu_hours: float
    energy_kwh: float


@dataclass(frozen=True)
class SizingRow:
    hardware_id: str
    hardware_name: str
    choice: SizingOption | None
    """The cheapest option meeting the deadline and budget; None if there is none."""
    reason: str
    """Why this choice, or why none meets the constraints."""
    options: tuple[SizingOption, ...]
    """Every count with a runnable layout (for charts)."""

    def to_dict(self) -> dict:
        c = self.choice
        out = {"hardware": self.hardware_id, "hardware_name": self.hardware_name, "reason": self.reason,
               "num_gpus": c.num_gpus if c else None}
        if c:
            out.update(time_to_train_s=c.time_to_train_s, goodput_frac=c.goodput_frac, cost_usd=c.cost_usd,
                       gpu_hours=c.gpu_hours, energy_kwh=c.energy_kwh, mfu=c.candidate.mfu,
                       tokens_per_s_per_gpu=c.candidate.tokens_per_s_per_gpu, layout=c.candidate.layout())
        return out


def _options_for(scenario: Scenario, counts, search_options, cost_model, fm, efficiency, overlap):
    m, hw = bind(scenario)
    state_bytes = checkpoint_state_bytes(param_count(m).total)
    out, reasons = [], {}
    for n in counts:
        res = search(scenario.model_copy(update={"num_gpus": n}), search_options, cost_model,
                     efficiency=efficiency, overlap=overlap)
        if res.best is None:
            reasons[n] = res.top_reason() or "no layout enumerated"
            continue
        c = res.best
        g = float(goodput_fraction(n, state_bytes, fm).fraction)
        wall = scenario.training_tokens / c.tokens_per_s / g
        jc = job_cost(n, wall, hw, cost_model)
        out.append(SizingOption(n, c, wall, g, float(jc.cost_usd), float(jc.gpu_hours), float(jc.energy_kwh)))
    return out, reasons


def _choose(opts, deadline_s, budget_usd) -> tuple[SizingOption | None, str]:
    if not opts:
        return None, ""
    on_time = [o for o in opts if deadline_s is None or o.time_to_train_s <= deadline_s]
    affordable = [o for o in opts if budget_usd is None or o.cost_usd <= budget_usd]
    both = [o for o in on_time if o in affordable]
    if both:
        best = min(both, key=lambda o: (o.cost_usd, o.time_to_train_s))
        why = f"cheapest count: {fmt.seconds(best.time_to_train_s)} for {fmt.usd(best.cost_usd)}"
        if deadline_s is not None:
            why += f" (deadline {fmt.seconds(deadline_s)})"
        return best, why
    fastest = min(opts, key=lambda o: o.time_to_train_s)
    cheapest = min(opts, key=lambda o: o.cost_usd)
    if not on_time:
        return None, (f"fastest found: {fmt.seconds(fastest.time_to_train_s)} on {fastest.num_gpus} GPUs "
                      f"> deadline {fmt.seconds(deadline_s)}")
    if not affordable:
        return None, (f"cheapest found: {fmt.usd(cheapest.cost_usd)} on {cheapest.num_gpus} GPUs "
                      f"> budget {fmt.usd(budget_usd)}")
    c = min(on_time, key=lambda o: o.cost_usd)
    return None, (f"meeting the {fmt.seconds(deadline_s)} deadline costs at least {fmt.usd(c.cost_usd)} "
                  f"({c.num_gpus} GPUs) > budget {fmt.usd(budget_usd)}")


def size_cluster(scenario_like: Scenario, tokens: float, deadline_s: float | None = None,
                 budget_usd: float | None = None, hardware_ids=None, gpu_counts=None,
                 cost_model: CostModel | None = None, failure_model: FailureModel | None = None, *,
                 options: SearchOptions | None = None,
                 efficiency_lookup: Callable[[str], Efficiencies | None] | None = None,
                 overlap: Overlap | None = None, progress=None) -> list[SizingRow]:
    """One row per hardware type: the cheapest (GPU count, layout) that trains ``tokens``
    within ``deadline_s`` and ``budget_usd``, or why none does.

    ``scenario_like`` supplies the model, sequence length, global batch and precision; its
    hardware, GPU count and layout are replaced. ``efficiency_lookup(hardware_id)`` may return
    a calibrated ``Efficiencies`` for a type (None: the spec's defaults), as ``predict`` uses.
    """
    if not tokens or tokens <= 0:
        raise InputError("tokens", f"must be > 0, got {tokens}")
    for name, v in (("deadline", deadline_s), ("budget_usd", budget_usd)):
        if v is not None and not v > 0:
            raise InputError(name, f"must be > 0, got {v}")
    ids = list(hardware_ids) if hardware_ids else list_hardware_ids()
    counts = sorted(set(int(n) for n in (gpu_counts or GPU_COUNTS_DEFAULT)))
    if not counts or counts[0] < 1:
        raise InputError("gpu_counts", "give one or more positive GPU counts")
    options = (options or SearchOptions()).model_copy(update={"objective": "time", "top_k": 1, "gpu_counts": None})
    cost_model, fm = cost_model or CostModel(), failure_model or FailureModel()
    rows = []
    for k, hw_id in enumerate(ids):
        hw = load_hardware(hw_id)
        sc = scenario_like.model_copy(update={"hardware": hw_id, "training_tokens": float(tokens)})
        eff = efficiency_lookup(hw_id) if efficiency_lookup else None
        opts, reasons = _options_for(sc, counts, options, cost_model, fm, eff, overlap)
        choice, why = _choose(opts, deadline_s, budget_usd)
        if not opts:
            common = max(set(reasons.values()), key=list(reasons.values()).count)
            why = f"no layout runs and fits at {counts[0]}-{counts[-1]} GPUs (e.g. {common})"
        rows.append(SizingRow(hw.id, hw.name, choice, why, tuple(opts)))
        if progress is not None:
            progress(k + 1, len(ids))
    return rows
