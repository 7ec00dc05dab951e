"""Cluster sizing: for each hardware type, the cheapest GPU count and layout that trains the
given tokens within a deadline and a budget, or the reason none does; how likely that choice is
to meet them; and whether to buy the GPUs or rent them.

For one hardware type and GPU count the cost is proportional to the time (N GPUs x wall time
x price), so the fastest layout is also the cheapest; the search ranks by time. Across counts,
time to solution W = (tokens / throughput) / goodput + start-up (``predict``: failures,
checkpoints, restarts and start-up, ``goodput.py``) and cost = N W price (``cost.job_cost``).
Among the counts with W <= deadline and cost <= budget the cheapest wins (ties: the faster).

The global batch is the scenario's at every count first. With a batch limit (``max_batch_tokens``,
``perfmodel.studies.search.batch``), a hardware type on which no count meets both the deadline and the
budget at that batch is tried again at every count with the batch doubled, then doubled again, up
to the limit, and the cheapest option of any batch wins (ties: the smaller batch): the batch grows
where it, not the hardware, is what misses the targets, as real runs grow it with their GPUs.
Each option states its batch; the row states what the scenario's own batch alone gave
(``fixed_rule``), and, when nothing qualifies, whether the batch or the GPU counts tried are what
limits the deadline (``limited_by``).

The probability that an option meets the deadline and the budget comes from the prediction's
error band (``perfmodel.engine.band``): time and cost both scale with the same e^r, so
P(W <= D and C <= B) = P(r <= min(log(D / W), log(B / C))).

Buy or rent: ``studies.buy_rent`` prices the chosen option rented and owned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal

from perfmodel.engine.band import ErrorBand, band_for
from perfmodel.engine.prediction import predict as _predict
from perfmodel.formulas.cost import job_cost
from perfmodel.spec.cost import CostModel
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import InputError
from perfmodel.spec.facility import Facility
from perfmodel.spec.hardware import list_hardware_ids, load_hardware
from perfmodel.spec.limits import MAX_NUM_GPUS, MAX_SWEEP_POINTS
from perfmodel.spec.reliability import FailureModel
from perfmodel.spec.scenario import Scenario, hardware_of, model_of
from perfmodel.spec.studies import MAX_STUDY_HARDWARE
from perfmodel.studies.search.batch import batch_rungs
from perfmodel.studies.search.buy_rent import BuyVsRent, buy_vs_rent_or_none
from perfmodel.studies.search.constraints import (
    RowConstraints,
    at_site,
    bought,
    capped_counts,
    power_cap,
    row_constraints,
)
from perfmodel.studies.search.recommendable import placeholder_price, recommendable
from perfmodel.studies.search.search import Candidate, SearchOptions, SearchResult, best_by_count, search

GPU_COUNTS_DEFAULT = tuple(2 ** k for k in range(3, 15))
"""8 to 16,384 GPUs in powers of two (16,384 is the Llama 3 405B run; Llama Team 2024)."""


@dataclass(frozen=True)
class SizingOption:
    """One GPU count of one hardware type, with its best layout."""

    num_gpus: int
    candidate: Candidate
    time_to_train_s: float
    """Time to solution: ideal time / goodput, plus start-up."""
    goodput_frac: float
    """Useful FLOP/s over the cluster's peak (``Prediction.goodput_frac``)."""
    cost_usd: float
    gpu_hours: float
    energy_kwh: float
    training_time_frac: float = 1.0
    """Share of the wall time spent training (failures, checkpoints, restarts, start-up take the rest)."""
    band: dict | None = None
    """The prediction's error band: {figure: {p10, p50, p90}}."""
    probability_met: float | None = None
    """P(time <= deadline and cost <= budget) under the error band, held in [0.05, 0.95]; None
    without a deadline or a budget."""

    @property
    def global_batch_size(self) -> int:
        """Sequences per step of this option: the scenario's, or grown (``size_cluster``)."""
        return self.candidate.scenario.global_batch_size


SizingRule = Literal["cheapest", "deadline_missed", "over_budget", "deadline_costs_more", "none_runs", "no_price"]


@dataclass(frozen=True)
class SizingRow:
    hardware_id: str
    hardware_name: str
    choice: SizingOption | None
    """The cheapest option meeting the deadline and budget; None if there is none."""
    rule: SizingRule
    """cheapest: ``choice`` is the cheapest count meeting both; deadline_missed: even the fastest
    (``binding``) misses the deadline; over_budget: even the cheapest (``binding``) is over
    budget; deadline_costs_more: the cheapest count on time (``binding``) is over budget;
    none_runs: no count has a layout that runs and fits (``none_reason`` says why, mostly);
    no_price: the hardware has no price on the cost model's basis (``price_reason``)."""
    binding: SizingOption | None
    """The option that shows why nothing qualifies (see ``rule``)."""
    deadline_s: float | None
    budget_usd: float | None
    gpu_counts: tuple[int, ...]
    none_reason: str
    """With ``none_runs``: the most common reason a count had no layout."""
    options: tuple[SizingOption, ...]
    """Every count with a runnable layout (for charts): at the scenario's batch, and grown where
    that batch missed a target (so a count can appear twice, with two batches)."""
    buy_vs_rent: BuyVsRent | None = None
    """The choice (else the binding option) rented and owned; None when no count runs."""
    global_batch_size: int = 0
    """The scenario's global batch (sequences)."""
    seq_length: int = 0
    max_batch_tokens: float | None = None
    """The batch limit the sizing could grow to (None: the scenario's batch only)."""
    fixed_rule: SizingRule | None = None
    """What the scenario's batch alone gives (``rule``'s meanings); None without a batch limit."""
    fixed_binding: SizingOption | None = None
    """The option behind ``fixed_rule``: its choice, or the one that shows why nothing qualifies."""
    limited_by: Literal["batch", "gpu_counts"] | None = None
    """When no count meets the deadline: ``batch`` when the fastest option is below the largest
    count tried (more GPUs are no faster, or cannot split the batch, at the largest batch
    allowed), ``gpu_counts`` when it is the largest count tried (more GPUs may meet it)."""
    price_reason: str = ""
    """Why the hardware could not be priced on the cost model's basis ('' when it could)."""
    constraints: RowConstraints | None = None
    """What binds, the power envelope's cap and what relaxing it buys (``studies.constraints``)."""
    announced: bool = False
    """Announced, not shipped (``HardwareSpec.availability``); sized only when named."""
    placeholder_price: bool = False
    """Charged at the spec's placeholder price (``recommendable``); sized only when named."""

    @property
    def batch_grown(self) -> bool:
        """The choice uses a larger batch than the scenario's."""
        return self.choice is not None and self.choice.global_batch_size > self.global_batch_size

    def to_dict(self) -> dict:
        c, b = self.choice, self.binding
        out = {"hardware": self.hardware_id, "hardware_name": self.hardware_name, "rule": self.rule,
               "num_gpus": c.num_gpus if c else None,
               "binding_num_gpus": b.num_gpus if b else None,
               "global_batch_size": (c or b).global_batch_size if (c or b) else self.global_batch_size,
               "scenario_global_batch_size": self.global_batch_size, "batch_grown": self.batch_grown,
               "max_batch_tokens": self.max_batch_tokens, "fixed_rule": self.fixed_rule,
               "fixed_num_gpus": self.fixed_binding.num_gpus if self.fixed_binding else None,
               "limited_by": self.limited_by}
        out.update(announced=self.announced, placeholder_price=self.placeholder_price)
        if self.price_reason:
            out["price_reason"] = self.price_reason
        if self.none_reason:
            out["none_reason"] = self.none_reason
        if c:
            out.update(time_to_train_s=c.time_to_train_s, goodput_frac=c.goodput_frac,
                       training_time_frac=c.training_time_frac, cost_usd=c.cost_usd,
                       gpu_hours=c.gpu_hours, energy_kwh=c.energy_kwh, mfu=c.candidate.mfu,
                       tokens_per_s_per_gpu=c.candidate.tokens_per_s_per_gpu, layout=c.candidate.layout(),
                       band=c.band)
        shown = c or b
        out.update(self.constraints.to_dict() if self.constraints else {})
        out["probability_met"] = shown.probability_met if shown else None
        out["buy_vs_rent"] = self.buy_vs_rent.to_dict() if self.buy_vs_rent else None
        return out


def probability_met(band: ErrorBand | None, time_s: float, cost_usd: float, deadline_s: float | None,
                    budget_usd: float | None) -> float | None:
    """P(actual time <= deadline and actual cost <= budget): both scale with the same e^r."""
    margins = [math.log(limit / value) for limit, value in ((deadline_s, time_s), (budget_usd, cost_usd))
               if limit is not None]
    if band is None or not margins:
        return None
    return band.cdf(min(margins))


def _option(sc: Scenario, n: int, gbs: int, search_options, cost_model, efficiency, band, deadline_s,
            budget_usd) -> tuple[SizingOption | None, str]:
    """The best layout at ``n`` GPUs and batch ``gbs`` as an option, or (None, why none runs)."""
    res = search(sc.model_copy(update={"num_gpus": n, "global_batch_size": gbs}), search_options, cost_model,
                 efficiency=efficiency, best_only=True)
    return _option_of(res, n, cost_model, efficiency, band, deadline_s, budget_usd)


def _option_of(res: SearchResult, n: int, cost_model, efficiency, band, deadline_s,
               budget_usd) -> tuple[SizingOption | None, str]:
    """A best-only search's best layout at ``n`` GPUs as an option, or (None, why none runs)."""
    if res.best is None:
        return None, res.top_reason() or "no layout enumerated"
    p = _predict(res.best.scenario, efficiency or hardware_of(res.best.scenario).efficiency, cost_model)
    return SizingOption(n, res.best, p.time_to_train_s, p.goodput_frac, p.cost_usd, p.gpu_hours, p.energy_kwh,
                        training_time_frac=p.training_time_frac, band=p.band,
                        probability_met=probability_met(band, p.time_to_train_s, p.cost_usd, deadline_s,
                                                        budget_usd)), ""


def _options_for(scenario: Scenario, counts, rungs, search_options, cost_model, efficiency, deadline_s, budget_usd,
                 step=None):
    """Every count at the scenario's batch; when no count meets both targets at that batch, every
    count again at each larger rung. Returns (every option, the options at the scenario's batch,
    why a count had none at any batch)."""
    band = band_for(hardware_of(scenario), model_of(scenario))
    todo = len(counts) * len(rungs)
    out, reasons = [], {}
    for k, gbs in enumerate(rungs):
        if k == 1 and _choose(out, deadline_s, budget_usd)[1] == "cheapest":
            break           # the scenario's batch meets both: it is kept
        def counted(i: int, _: int, _k=k) -> None:
            if step is not None:
                step(_k * len(counts) + i, todo)

        # every count at once: the counts share the floor's per-shape parts (``best_by_count``)
        results = best_by_count(scenario.model_copy(update={"global_batch_size": gbs}), counts, search_options,
                                cost_model, efficiency=efficiency, progress=counted)
        for n, res in zip(counts, results):
            o, why = _option_of(res, n, cost_model, efficiency, band, deadline_s, budget_usd)
            if o is None:
                reasons.setdefault(n, why)
            else:
                out.append(o)
    ran = {o.num_gpus for o in out}
    fixed = [o for o in out if o.global_batch_size == rungs[0]]
    return out, fixed, {n: why for n, why in reasons.items() if n not in ran}


def _choose(opts, deadline_s, budget_usd) -> tuple[SizingOption | None, SizingRule, SizingOption | None]:
    """(choice, rule, the option that binds): see ``SizingRow.rule``; ties go to the smaller batch."""
    if not opts:
        return None, "none_runs", None
    on_time = [o for o in opts if deadline_s is None or o.time_to_train_s <= deadline_s]
    affordable = [o for o in opts if budget_usd is None or o.cost_usd <= budget_usd]
    both = [o for o in on_time if o in affordable]
    if both:
        return min(both, key=lambda o: (o.cost_usd, o.time_to_train_s, o.global_batch_size)), "cheapest", None
    if not on_time:
        return None, "deadline_missed", min(opts, key=lambda o: (o.time_to_train_s, o.global_batch_size))
    if not affordable:
        return None, "over_budget", min(opts, key=lambda o: o.cost_usd)
    return None, "deadline_costs_more", min(on_time, key=lambda o: o.cost_usd)


@dataclass(frozen=True)
class SizingResult:
    """One row per hardware type (``size_cluster``)."""

    tokens: float
    rows: tuple[SizingRow, ...]
    left_out: tuple[tuple[str, str], ...] = ()
    """(hardware id, why) of each type left out because no hardware was named
    (``not_recommended_reason``); name it to size it."""

    def to_dict(self) -> dict:
        """The CLI's JSON (``perfmodel size --format json``)."""
        return {"tokens": self.tokens, "rows": [r.to_dict() for r in self.rows], "left_out": dict(self.left_out)}


def _row(hw_id: str, eff: Efficiencies | None, scenario_like: Scenario, tokens: float, deadline_s, budget_usd,
         counts: tuple[int, ...], rungs, options: SearchOptions, cost_model: CostModel, common: dict,
         step=None) -> SizingRow:
    """One hardware type's row of ``size_cluster``."""
    hw = bought(load_hardware(hw_id), scenario_like)
    hw = load_hardware(hw_id)
    common = {**common, "announced": hw.availability == "announced",
              "placeholder_price": placeholder_price(hw, cost_model)}
    try:
        job_cost(1, 0.0, hw, cost_model)      # can it be priced on this basis at all?
    except InputError as exc:
        return SizingRow(hw.id, hw.name, None, "no_price", None, none_reason="", options=(), price_reason=str(exc),
                         **common)
    sc = scenario_like.model_copy(update={"hardware": hw_id, "training_tokens": tokens})
    cap = power_cap(hw, sc)
    all_counts, counts = counts, capped_counts(counts, cap)
    if not counts:
        return SizingRow(hw.id, hw.name, None, "none_runs", None, none_reason=cap.reason, options=(),
                         constraints=RowConstraints("power", cap), **common)
    opts, fixed, reasons = _options_for(sc, counts, rungs, options, cost_model, eff, deadline_s, budget_usd, step)
    choice, rule, binding = _choose(opts, deadline_s, budget_usd)
    reason = "" if opts else max(set(reasons.values()), key=list(reasons.values()).count)
    fixed_rule, fixed_binding = None, None
    if len(rungs) > 1:
        fc, fixed_rule, fb = _choose(fixed, deadline_s, budget_usd)
        fixed_binding = fc or fb
    limited_by = None
    if rule == "deadline_missed":
        limited_by = "batch" if binding.num_gpus < counts[-1] else "gpu_counts"
    shown = choice or binding
    cons = row_constraints(rule, limited_by, choice, binding, opts, cap, all_counts, counts, lambda n: _option(
        sc, n, rungs[-1], options, cost_model, eff, band_for(hw, model_of(sc)), deadline_s, budget_usd)[0],
        lambda s, c=cost_model: _predict(s, eff or hardware_of(s).efficiency, c).time_to_train_s, deadline_s, hw, cost_model)
    return SizingRow(hw.id, hw.name, choice, rule, binding, none_reason=reason, options=tuple(opts),
                     buy_vs_rent=None if shown is None else buy_vs_rent_or_none(shown, hw, cost_model),
                     fixed_rule=fixed_rule, fixed_binding=fixed_binding, limited_by=limited_by,
                     constraints=cons, **common)


def _row_task(task) -> SizingRow:
    (hw_id, eff), shared = task
    return _row(hw_id, eff, *shared)


def _rows_in_processes(tasks, shared, workers: int, progress, per_row: int, total: int) -> tuple[SizingRow, ...]:
    """``_row`` of every task in ``workers`` processes, in the order of ``tasks`` (the rows are the
    same as one process gives: each is a pure function of its task). Forked from a process that
    runs one thread (the CLI: the parent's imports and data come along), else started afresh
    (forking a process with other threads may copy a lock one of them holds)."""
    import multiprocessing
    import threading
    from concurrent.futures import ProcessPoolExecutor

    methods = multiprocessing.get_all_start_methods()
    method = "fork" if "fork" in methods and threading.active_count() == 1 else (
        "forkserver" if "forkserver" in methods else "spawn")
    rows = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(method)) as pool:
        for k, row in enumerate(pool.map(_row_task, [(t, shared) for t in tasks])):
            rows.append(row)
            if progress is not None:
                progress((k + 1) * per_row, total)
    return tuple(rows)


def size_cluster(scenario_like: Scenario, tokens: float, deadline_s: float | None = None,
                 budget_usd: float | None = None, hardware_ids=None, gpu_counts=None,
                 cost_model: CostModel | None = None, failure_model: FailureModel | None = None, *,
                 options: SearchOptions | None = None,
                 efficiency_lookup: Callable[[str], Efficiencies | None] | None = None,
                 max_batch_tokens: float | None = None, progress=None, workers: int = 1,
                 facility: Facility | None = None) -> SizingResult:
    """One row per hardware type: the cheapest (GPU count, layout, batch) that trains ``tokens``
    within ``deadline_s`` and ``budget_usd``, or why none does.

    ``scenario_like`` supplies the model, sequence length, global batch and precision; its
    hardware, GPU count and layout are replaced. ``max_batch_tokens`` (None: the scenario's batch
    only) lets a count that misses a target at the scenario's batch double it up to that many
    tokens. ``efficiency_lookup(hardware_id)`` may return a calibrated ``Efficiencies`` for a
    type (None: the spec's defaults), as ``predict`` uses. ``progress(done, total)`` counts
    (hardware, GPU count) pairs. ``workers`` > 1 sizes that many hardware types at a time, each
    in a process of its own (the same rows; the progress then moves a hardware type at a time).
    ``facility`` (None: the scenario's) caps each count at its power envelope (``studies.constraints``).
    common = {**common, "announced": hw.availability == "announced",
              "placeholder_price": placeholder_price(hw, cost_model)}
    """
    if not tokens or tokens <= 0:
        raise InputError("tokens", f"must be > 0, got {tokens}")
    for name, v in (("deadline", deadline_s), ("budget_usd", budget_usd)):
        if v is not None and not v > 0:
            raise InputError(name, f"must be > 0, got {v}")
    ids, left_out = (list(dict.fromkeys(hardware_ids)), {}) if hardware_ids else (list_hardware_ids(), None)
    counts = sorted(set(int(n) for n in (gpu_counts or GPU_COUNTS_DEFAULT)))
    if not counts or counts[0] < 1 or counts[-1] > MAX_NUM_GPUS:
        raise InputError("gpu_counts", f"give one or more GPU counts from 1 to {MAX_NUM_GPUS:,}")
    if len(counts) > MAX_SWEEP_POINTS:
        raise InputError("gpu_counts", f"{len(counts)} GPU counts; at most {MAX_SWEEP_POINTS}")
    if len(ids) > MAX_STUDY_HARDWARE:
        raise InputError("hardware", f"{len(ids)} hardware types; at most {MAX_STUDY_HARDWARE}")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError("workers", f"must be a whole number of processes >= 1, got {workers!r}")
    rungs = batch_rungs(scenario_like, max_batch_tokens)
    options = (options or SearchOptions()).model_copy(update={"objective": "time", "top_k": 1, "gpu_counts": None})
    if failure_model is not None:
        scenario_like = scenario_like.model_copy(update={"reliability": failure_model})
    cost_model = cost_model or scenario_like.cost
    scenario_like, cost_model = at_site(scenario_like, cost_model, facility)
    if left_out is None:
        ids, left_out = recommendable(ids, cost_model)
    common = dict(deadline_s=deadline_s, budget_usd=budget_usd, gpu_counts=tuple(counts),
                  global_batch_size=scenario_like.global_batch_size, seq_length=scenario_like.seq_length,
                  max_batch_tokens=max_batch_tokens if len(rungs) > 1 else None)
    tasks = [(hw_id, efficiency_lookup(hw_id) if efficiency_lookup else None) for hw_id in ids]
    shared = (scenario_like, float(tokens), deadline_s, budget_usd, tuple(counts), rungs, options, cost_model, common)
    total = len(ids) * len(counts)
    workers = min(int(workers), len(tasks))
    if workers > 1:
        return SizingResult(float(tokens), _rows_in_processes(tasks, shared, workers, progress, len(counts), total),
                            tuple(left_out.items()))
    rows = []
    for k, (hw_id, eff) in enumerate(tasks):
        def step(i: int, todo: int, _k=k) -> None:
            if progress is not None:     # this hardware's share of the bar, as far as its rungs go
                progress(_k * len(counts) + int(len(counts) * i / todo), total)

        rows.append(_row(hw_id, eff, *shared, step=step))
        if progress is not None:
            progress((k + 1) * len(counts), total)
    return SizingResult(float(tokens), tuple(rows), tuple(left_out.items()))
