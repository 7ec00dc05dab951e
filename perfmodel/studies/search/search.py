"""Layout search: every parallel layout of a job, evaluated chunk by chunk, ranked by an objective.

The scenario fixes the job (model, hardware, GPUs, sequence length, global batch, training
tokens, software stack); its ``parallelism``, ``micro_batch_size`` and ``recompute`` are searched
over (``perfmodel.engine.enumerate``), unless pinned, along with the pipeline schedules (a column
of the layout), precisions, overlap settings (``perfmodel.studies.search.job_variants``) and GPU counts
the options name. The rules every entry point
applies (``perfmodel.engine.rules``) drop the layouts that cannot run, the memory model those
that do not fit, and the engine times the rest, one call per chunk of about ``CHUNK`` layouts
and job (GPU count, precision, recompute, overlap settings); every figure of a row comes from
``perfmodel.engine.prediction.measure``, so a candidate has exactly the numbers ``predict``
gives its scenario. No Python runs per candidate except for the ones kept.

The layouts stream through: the search keeps the best ``top_k``, the time-cost front, the count
of layouts rejected for each reason and a bounded sample of those that fit
(``perfmodel.studies.search.layout_table``), so its memory does not grow with the number of layouts.
``search`` fixes the search's ``Plan`` and ``Tally`` and streams the enumeration's blocks through
the named steps of ``perfmodel.studies.search.stream`` (the rules, one chunk's fit and time).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Callable, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from perfmodel.engine.enumerate import Bounds, enumeration
from perfmodel.engine.rules import check_job, layout_rule_fields, recompute_violation, with_recompute
from perfmodel.formulas import pipeline
from perfmodel.spec import limits
from perfmodel.spec.cost import CostModel
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import validated
from perfmodel.spec.scenario import (
    PIPELINE_SCHEDULES,
    RECOMPUTE_CHOICES,
    PipelineSchedule,
    Precision,
    Recompute,
    Scenario,
    hardware_of,
    model_of,
)
from perfmodel.studies.search.job_variants import OVERLAP_KINDS, OverlapKind, applies, variants
from perfmodel.studies.search.layout_table import (  # noqa: F401  (Candidate, LayoutTable, pareto_front: public here)
    Candidate,
    LayoutTable,
    empty_table,
    pareto_front,
)
from perfmodel.studies.search.pruned import Unprunable
from perfmodel.studies.search.pruned_timing import best_per_count
from perfmodel.studies.search.stream import (  # noqa: F401  (DOES_NOT_FIT, Kept, kept_with: public here)
    DOES_NOT_FIT,
    Kept,
    Plan,
    Tally,
    kept_with,
    run_chunk,
    tally_block,
    valid_part,
)

Objective = Literal["time", "cost", "tokens_per_usd"]
Pinnable = Literal["tp", "pp", "vpp", "cp", "ep", "etp", "sequence_parallel", "zero_stage", "micro_batch_size",
                   "recompute", "precision", "overlap", "pipeline_schedule"]
PINNABLE: tuple[str, ...] = get_args(Pinnable)
CHUNK = 16_384
"""Layouts per ``evaluate`` call: large enough to amortise numpy's per-call overhead (about 2
ms), small enough that the temporaries of one call stay near 1 KB per layout. Measured for
DeepSeek-V3 on 2,048 GB200s, bf16 + fp8 (2.8M candidates), peak resident memory and CPU time
of the search: 105 MB and 3.5 s at 8,192 layouts a call, 132 MB and 3.0 s at 16,384, 194 MB
and 2.8 s at 32,768."""
PRUNED_CHUNK = 4 * CHUNK
"""Layouts per chunk of a search that prunes by the floor: most are skipped before their memory
is checked, so a larger chunk costs little memory and saves per-call work (floors, memory, timing)."""
Progress = Callable[[int, int], None]
"""progress(done, total): how much of the enumeration has been gone through (its blocks of
parallel degrees, each crossed with every zero stage and micro-batch size), out of ``total``."""


class SearchOptions(BaseModel):
    """What to search over and how to rank. Unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    objective: Objective = "time"
    """time: shortest step; cost: fewest dollars; tokens_per_usd: most tokens per dollar."""
    top_k: limits.int_field(limits.MAX_TOP_K) = 10
    precisions: Annotated[tuple[Precision, ...], Field(max_length=len(get_args(Precision)))] | None = None
    """None = the scenario's precision only (other precisions change the numerics)."""
    recompute: Annotated[tuple[Recompute, ...], Field(max_length=len(RECOMPUTE_CHOICES))] = RECOMPUTE_CHOICES
    zero_stages: Annotated[tuple[limits.int_choice(0, 1, 2, 3), ...], Field(max_length=4)] = (0, 1, 2, 3)
    max_micro_batch_size: limits.int_field(limits.MAX_SEARCH_MICRO_BATCH_SIZE) = 8
    """A search bound, not a physical limit: recipes at scale use 1-4, larger rarely fits."""
    max_tp: limits.int_field(limits.MAX_NUM_GPUS) | None = None
    """None = the hardware's scale-up domain size."""
    max_cp: limits.int_field(limits.MAX_NUM_GPUS) | None = None
    max_vpp: limits.int_field(limits.MAX_VIRTUAL_STAGES) | None = None
    gpu_counts: Annotated[tuple[limits.int_field(limits.MAX_NUM_GPUS), ...],
                          Field(min_length=1, max_length=limits.MAX_SWEEP_POINTS)] | None = None
    """None = the scenario's num_gpus; several counts make the time-cost front non-trivial."""
    overlap: Annotated[tuple[OverlapKind, ...], Field(max_length=len(OVERLAP_KINDS))] = ()
    """Communication kinds (tp, cp, ep, pp, dp, fsdp) whose overlap with compute is searched,
    switched off and on (``perfmodel.studies.search.job_variants``); the others keep the scenario's
    settings. () = the scenario's settings only."""
    schedules: Annotated[tuple[PipelineSchedule, ...], Field(max_length=len(PIPELINE_SCHEDULES))] | None = None
    """Pipeline schedules to try on every layout with pp > 1 (``perfmodel.formulas.pipeline``); the
    rules reject those a layout cannot run (vpp, pp, micro-batches). None = the scenario's own
    (``parallelism.pipeline_schedule``, or 1f1b / interleaved by vpp where it names none)."""
    sequence_parallel: Annotated[tuple[StrictBool, ...], Field(min_length=1, max_length=2)] | None = None
    """Sequence-parallel settings to try on every layout with tp > 1 ((true, false): both, on and
    off; Megatron's ``--sequence-parallel``). None = on wherever tp > 1 (Korthikanti et al. 2022)."""
    pin: Annotated[tuple[Pinnable, ...], Field(max_length=len(PINNABLE))] = ()
    """Dimensions held at the scenario's own values instead of searched (``PINNABLE``): pin them
    all to evaluate exactly the scenario's job, as ``predict`` does."""


def parse_search_options(data: dict) -> SearchOptions:
    return validated(SearchOptions, data, "search", "must be a mapping")



@dataclass(frozen=True)
class SearchResult:
    scenario: Scenario
    options: SearchOptions
    candidates: tuple[Candidate, ...]
    """The top-k, best first."""
    pareto: tuple[Candidate, ...]
    """Non-dominated in (time, cost), fastest first."""
    table: LayoutTable
    """A sample of the layouts that fit, every ``num_fit / len(table)``-th or so, at most
    ``perfmodel.studies.search.layout_table.SAMPLE_ROWS`` (all of them when that many or fewer fit)."""
    num_enumerated: int
    """(layout, pipeline schedule, recompute, precision, overlap settings) combinations generated."""
    num_valid: int
    """... that pass the layout rules."""
    num_fit: int
    """... that fit in memory."""
    num_evaluated: int
    """... timed: all that fit (a ``best_only`` search times only those that could be among the
    best, and checks the memory of no others: its ``num_fit`` and its count of layouts that do
    not fit cover only the layouts it checked)."""
    rejected: dict
    """reason -> count: broken rules, and 'does not fit in memory'."""
    cost_basis: str
    """'training_tokens' or 'step': what ``cost_usd`` pays for."""
    elapsed_s: float
    evaluate_s: float
    """Time spent in ``evaluate`` (the vectorised model)."""

    @property
    def best(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None

    def to_dict(self) -> dict:
        """The CLI's JSON (``perfmodel search --format json``)."""
        return {"candidates": [c.to_dict() for c in self.candidates], "pareto": [c.to_dict() for c in self.pareto],
                "num_enumerated": self.num_enumerated, "num_valid": self.num_valid,
                "num_evaluated": self.num_evaluated, "num_fit": self.num_fit, "rejected": dict(self.rejected),
                "cost_basis": self.cost_basis, "objective": self.options.objective, "elapsed_s": self.elapsed_s}

    def top_reason(self) -> str:
        """The most common reason a layout was rejected ('' if none was)."""
        return next(iter(self.rejected), "")


# --------------------------------------------------------------------------- search
def bounds_for(scenario: Scenario, options: SearchOptions) -> Bounds:
    """The enumeration bounds the options set, with pinned dimensions at the scenario's values."""
    p = scenario.parallelism
    own = {"tp": p.tp, "pp": p.pp, "vpp": p.vpp, "cp": p.cp, "ep": p.ep, "etp": p.etp, "sp": p.sp,
           "zero_stage": p.zero_stage, "mbs": scenario.micro_batch_size}
    column = {"sequence_parallel": "sp", "micro_batch_size": "mbs"}
    pinned = {column.get(k, k): own[column.get(k, k)] for k in options.pin if column.get(k, k) in own}
    # The scenario's own schedule: the one it names, else each layout's default (by vpp).
    named = None if p.pipeline_schedule is None else (pipeline.schedule_code(p.pipeline_schedule),)
    if "pipeline_schedule" in options.pin and named is not None:
        pinned["schedule"] = named[0]
    searched = options.schedules is not None and "pipeline_schedule" not in options.pin
    schedules = tuple(dict.fromkeys(pipeline.schedule_code(x) for x in options.schedules)) if searched else named
    return Bounds(zero_stages=tuple(options.zero_stages), max_micro_batch_size=options.max_micro_batch_size,
                  max_tp=options.max_tp, max_cp=options.max_cp, max_vpp=options.max_vpp, pinned=pinned,
                  schedules=schedules, sequence_parallel=options.sequence_parallel)


def search(scenario: Scenario, options: SearchOptions | None = None, cost_model: CostModel | None = None,
           progress: Progress | None = None, *, efficiency: Efficiencies | None = None,
           best_only: bool = False) -> SearchResult:
    """Enumerate, check, fit and time every layout of the job; rank by ``options.objective``.
    ``efficiency``: the efficiencies in force (None: the hardware spec's own). ``best_only``:
    only the top-k is wanted (``scale``, ``size``): no Pareto front and no sample, and with the
    time objective a layout whose step cannot be shorter than the k-th best so far
    (``perfmodel.engine.floor.step_time_floor_s``) is neither checked for memory nor timed, and
    the layouts are checked and timed lowest floor first: of one GPU count and overlap setting,
    pruned before they are crossed with their zero stages (``perfmodel.studies.search.pruned``),
    else streamed in chunks of ``PRUNED_CHUNK`` (``perfmodel.engine.floor.by_floor``); the top-k
    and the counts of broken rules are the same (the ranking does not depend on the order;
    ``num_fit`` and the count of layouts that do not fit cover the layouts checked)."""
    t0 = time.perf_counter()
    options = options or SearchOptions()
    plan = _plan(scenario, options, cost_model or scenario.cost, efficiency, best_only)
    tally = _tally(scenario)
    if _prunable(plan):
        try:
            best_per_count([plan], [tally])
        except Unprunable:
            tally = _tally(scenario)
            _stream(plan, tally, progress)
        else:
            if progress is not None:
                progress(1, 1)
    else:
        _stream(plan, tally, progress)
    return _result(plan, options, tally, time.perf_counter() - t0)


def best_by_count(scenario: Scenario, counts, options: SearchOptions | None = None,
                  cost_model: CostModel | None = None, *, efficiency: Efficiencies | None = None,
                  progress: Progress | None = None) -> list[SearchResult]:
    """``search(scenario at n GPUs, options, cost_model, efficiency=efficiency, best_only=True)``
    for each n of ``counts`` (``options.gpu_counts`` aside), with the same top k and counts of
    broken rules: a search by time shares the floor's per-shape parts between the counts
    (``perfmodel.studies.search.pruned``). ``progress(done, total)`` counts the counts."""
    options = (options or SearchOptions()).model_copy(update={"gpu_counts": None})
    cost_model = cost_model or scenario.cost
    scenarios = [scenario.model_copy(update={"num_gpus": int(n)}) for n in counts]
    plans = [_plan(s, options, cost_model, efficiency, True) for s in scenarios]
    if plans and all(_prunable(p) for p in plans):
        tallies = [_tally(s) for s in scenarios]
        try:
            seconds = best_per_count(plans, tallies, progress)
        except Unprunable:
            pass
        else:
            return [_result(p, options, t, s) for p, t, s in zip(plans, tallies, seconds)]
    out = []
    for k, s in enumerate(scenarios):
        out.append(search(s, options, cost_model, efficiency=efficiency, best_only=True))
        if progress is not None:
            progress(k + 1, len(scenarios))
    return out


def _tally(scenario: Scenario) -> Tally:
    empty = empty_table(scenario)
    return Tally(Kept(empty, empty, empty, 1, 0))


def _prunable(plan: Plan) -> bool:
    """Searched by ``perfmodel.studies.search.pruned``: a pruned search of one GPU count and one
    overlap setting."""
    return plan.prune and len(plan.counts) == 1 and len(plan.variants) == 1


def _stream(plan: Plan, tally: Tally, progress: Progress | None) -> None:
    """Stream every layout of the plan through the rules, the memory check and the timing
    (``perfmodel.studies.search.stream``), block by block."""
    scenario = plan.scenario
    enumerations = [enumeration(plan.model, plan.hardware, N, scenario.global_batch_size, scenario.seq_length,
                                plan.bounds) for N in plan.counts]
    total, done = sum(len(e) for e in enumerations), 0
    for ni, enum in enumerate(enumerations):
        pending = {pi: [] for pi in range(len(plan.precisions))}   # valid layouts not yet evaluated
        offset = 0                                                  # enumeration position of the block
        for cols, _, prefix_rows in enum.blocks(CHUNK):
            wanted = applies(plan.variants, cols, plan.model, plan.counts[ni])
            per_layout = wanted.sum(axis=0)                         # candidates each layout stands for
            for pi in pending:
                ok = tally_block(plan, tally, ni, pi, cols, per_layout)
                if ok.any():
                    pending[pi].append(valid_part(cols, ok, offset, wanted))
                    if sum(len(p[1]) for p in pending[pi]) >= plan.chunk:
                        run_chunk(plan, tally, ni, pi, pending[pi])
                        pending[pi] = []
            offset += len(cols["tp"])
            done += prefix_rows
            if progress is not None:
                progress(done, total)
        for pi, parts in pending.items():
            if parts:
                run_chunk(plan, tally, ni, pi, parts)
    if progress is not None and done < total:
        progress(total, total)


def _plan(scenario: Scenario, options: SearchOptions, cost_model: CostModel, efficiency: Efficiencies | None,
          best_only: bool) -> Plan:
    """What the search of ``scenario`` under ``options`` does (``search``'s arguments)."""
    hw, m = hardware_of(scenario), model_of(scenario)
    check_job(scenario, m)
    pin = set(options.pin)
    precisions = tuple(dict.fromkeys((scenario.precision,) if "precision" in pin or not options.precisions
                                     else options.precisions))
    # Recompute modes the job's own fields rule out (rules.recompute_violation): every layout
    # of such a mode is rejected for that reason, as predict would reject it.
    modes = (scenario.recompute,) if "recompute" in pin else options.recompute
    allowed, ruled_out = [], []
    for rc in dict.fromkeys(modes):
        bad = recompute_violation(with_recompute(scenario, rc), rc)
        (ruled_out if bad else allowed).append((rc, bad))
    prune = best_only and options.objective == "time"
    return Plan(scenario=scenario, model=m, hardware=hw, efficiency=efficiency or hw.efficiency,
                cost_model=cost_model, objective=options.objective, top_k=options.top_k, best_only=best_only,
                counts=tuple(dict.fromkeys(options.gpu_counts or (scenario.num_gpus,))), precisions=precisions,
                recompute=tuple(rc for rc, _ in allowed), ruled_out=tuple(ruled_out),
                variants=variants(scenario.software.overlap, () if "overlap" in pin else options.overlap),
                bounds=bounds_for(scenario, options), rule_fields=layout_rule_fields(scenario), prune=prune,
                chunk=PRUNED_CHUNK if prune else CHUNK)


def _result(plan: Plan, options: SearchOptions, tally: Tally, elapsed_s: float) -> SearchResult:
    """The search's result from what it kept and counted."""
    kept, rejected = tally.kept, tally.rejected
    return SearchResult(
        scenario=plan.scenario, options=options,
        candidates=tuple(kept.best.candidate(i) for i in range(len(kept.best))),
        pareto=tuple(kept.front.candidate(i) for i in range(len(kept.front))), table=kept.sample,
        num_enumerated=tally.num_enumerated, num_valid=tally.num_valid, num_fit=tally.num_fit,
        num_evaluated=tally.num_timed,
        rejected=dict(sorted(((k, v) for k, v in rejected.items() if v), key=lambda kv: (-kv[1], kv[0]))),
        cost_basis="training_tokens" if plan.scenario.training_tokens else "step",
        elapsed_s=elapsed_s, evaluate_s=tally.evaluate_s)
