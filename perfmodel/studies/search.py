"""Layout search: every parallel layout of a job, evaluated at once, ranked by an objective.

The scenario fixes the job (model, hardware, GPUs, sequence length, global batch, precision,
training tokens, software stack); its ``parallelism``, ``micro_batch_size`` and ``recompute``
are searched over (``perfmodel.engine.enumerate``), unless pinned, along with the precisions and
GPU counts the options name. The rules every entry point applies (``perfmodel.engine.rules``)
drop the layouts that cannot run, the memory model those that do not fit, and the engine times
the rest, one call per (GPU count, recompute, precision) group and chunk; every figure of a row
comes from ``perfmodel.engine.prediction.measure``, so a candidate has exactly the numbers
``predict`` gives its scenario. No Python runs per candidate except for the top-k.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, fields
from typing import Annotated, Callable, Literal, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfmodel.engine.enumerate import Bounds, enumerate_layouts, keep
from perfmodel.engine.evaluate import COMPONENTS, evaluate, job_memory
from perfmodel.engine.job import bind
from perfmodel.engine.prediction import Evaluation, measure
from perfmodel.engine.rules import (
    check_job,
    layout_rule_fields,
    layout_violation_fields,
    recompute_violation,
    with_recompute,
)
from perfmodel.formulas.layouts import Layouts, layouts_from_arrays
from perfmodel.formulas.memory import fits_in_memory
from perfmodel.spec import limits
from perfmodel.spec.cost import CostModel
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import validated
from perfmodel.spec.scenario import (
    RECOMPUTE_CHOICES,
    Parallelism,
    Precision,
    Recompute,
    Scenario,
    hardware_of,
    model_of,
)

Objective = Literal["time", "cost", "tokens_per_usd"]
Pinnable = Literal["tp", "pp", "vpp", "cp", "ep", "etp", "sequence_parallel", "zero_stage", "micro_batch_size",
                   "recompute"]
PINNABLE: tuple[str, ...] = get_args(Pinnable)
CHUNK = 32_768
"""Layouts per ``evaluate`` call: large enough to amortise numpy's ~5 ms per-call overhead,
small enough to keep temporaries to tens of MB and the progress bar moving (measured for
GPT-3 175B: ~180k layouts/s at 1k per call, 600-800k/s from 8k to 32k, ~550k/s at 128k)."""
DOES_NOT_FIT = "does not fit in memory"
Progress = Callable[[int, int], None]
"""progress(done, total): layouts evaluated so far, out of ``total``."""


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
    pin: Annotated[tuple[Pinnable, ...], Field(max_length=len(PINNABLE))] = ()
    """Dimensions held at the scenario's own values instead of searched (``PINNABLE``): pin them
    all to evaluate exactly the scenario's layout, as ``predict`` does."""


def parse_search_options(data: dict) -> SearchOptions:
    return validated(SearchOptions, data, "search", "must be a mapping")



@dataclass(frozen=True)
class Candidate:
    """One layout with its prediction (the numbers ``predict`` gives for ``scenario``)."""

    scenario: Scenario
    """The input scenario with this layout, micro-batch, recompute, precision and GPU count."""
    dp: int
    num_microbatches: int
    step_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    mfu: float
    memory_per_gpu_bytes: float
    fits: bool
    cost_usd: float
    """For ``training_tokens`` when the scenario has them, else for one step."""
    tokens_per_usd: float
    energy_kwh: float
    time_to_train_s: float | None
    breakdown_s: dict
    bottleneck: str

    def layout(self) -> dict:
        s = self.scenario
        p = s.parallelism
        return {"num_gpus": s.num_gpus, "tp": p.tp, "pp": p.pp, "vpp": p.vpp, "cp": p.cp, "ep": p.ep,
                "etp": p.etp, "dp": self.dp, "sequence_parallel": p.sp, "zero_stage": p.zero_stage,
                "micro_batch_size": s.micro_batch_size, "num_microbatches": self.num_microbatches,
                "recompute": s.recompute, "precision": s.precision}

    def to_dict(self) -> dict:
        out = self.layout()
        out.update(step_time_s=self.step_time_s, tokens_per_s=self.tokens_per_s,
                   tokens_per_s_per_gpu=self.tokens_per_s_per_gpu, mfu=self.mfu,
                   memory_per_gpu_bytes=self.memory_per_gpu_bytes, fits_in_memory=self.fits,
                   cost_usd=self.cost_usd, tokens_per_usd=self.tokens_per_usd, energy_kwh=self.energy_kwh,
                   bottleneck=self.bottleneck, breakdown_s=dict(self.breakdown_s))
        if self.time_to_train_s is not None:
            out["time_to_train_s"] = self.time_to_train_s
        return out


@dataclass(frozen=True)
class LayoutTable:
    """Every evaluated layout that fits, one row each (arrays of equal length)."""

    base: Scenario
    num_gpus: np.ndarray
    layouts: Layouts
    recompute: np.ndarray
    precision: np.ndarray
    step_time_s: np.ndarray
    tokens_per_s: np.ndarray
    mfu: np.ndarray
    memory_per_gpu_bytes: np.ndarray
    fits: np.ndarray
    cost_usd: np.ndarray
    energy_kwh: np.ndarray
    time_to_train_s: np.ndarray | None
    bottleneck: np.ndarray
    breakdown: dict

    def __len__(self) -> int:
        return len(self.layouts)

    @property
    def tokens_per_s_per_gpu(self) -> np.ndarray:
        return self.tokens_per_s / self.num_gpus

    @property
    def tokens_per_usd(self) -> np.ndarray:
        tokens = (self.base.training_tokens if self.base.training_tokens
                  else self.base.global_batch_size * self.base.seq_length)
        return tokens / self.cost_usd

    def scenario(self, i: int) -> Scenario:
        L = self.layouts.row(i)
        par = Parallelism(tp=L["tp"], pp=L["pp"], vpp=L["vpp"], cp=L["cp"], ep=L["ep"], etp=L["etp"],
                          sequence_parallel=L["sp"], zero_stage=L["zero_stage"])
        return with_recompute(self.base, str(self.recompute[i])).model_copy(update=dict(
            num_gpus=int(self.num_gpus[i]), micro_batch_size=L["mbs"], parallelism=par,
            precision=str(self.precision[i])))

    def candidate(self, i: int) -> Candidate:
        ttt = None if self.time_to_train_s is None else float(self.time_to_train_s[i])
        return Candidate(
            scenario=self.scenario(i), dp=int(self.layouts.dp[i]), num_microbatches=int(self.layouts.num_mb[i]),
            step_time_s=float(self.step_time_s[i]), tokens_per_s=float(self.tokens_per_s[i]),
            tokens_per_s_per_gpu=float(self.tokens_per_s_per_gpu[i]), mfu=float(self.mfu[i]),
            memory_per_gpu_bytes=float(self.memory_per_gpu_bytes[i]), fits=bool(self.fits[i]),
            cost_usd=float(self.cost_usd[i]), tokens_per_usd=float(self.tokens_per_usd[i]),
            energy_kwh=float(self.energy_kwh[i]), time_to_train_s=ttt,
            breakdown_s={k: float(self.breakdown[k][i]) for k in COMPONENTS},
            bottleneck=str(self.bottleneck[i]))

    def objective(self, objective: str) -> np.ndarray:
        """Smaller is better."""
        if objective == "time":
            return self.step_time_s
        if objective == "cost":
            return self.cost_usd
        return -self.tokens_per_usd

    def ranking(self, objective: str) -> np.ndarray:
        """Row indices, best first; ties broken by step time, then memory, then order."""
        idx = np.arange(len(self))
        return np.lexsort((idx, self.memory_per_gpu_bytes, self.step_time_s, self.objective(objective)))


def pareto_front(time_s, cost_usd) -> np.ndarray:
    """Indices of the points no other point beats on both time and cost (one per distinct
    point), ordered by time. O(n log n): sort by (time, cost), keep strict cost records."""
    t, c = np.asarray(time_s, float), np.asarray(cost_usd, float)
    if t.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((c, t))
    best_before = np.minimum.accumulate(np.concatenate(([np.inf], c[order])))[:-1]
    return order[c[order] < best_before]


@dataclass(frozen=True)
class SearchResult:
    scenario: Scenario
    options: SearchOptions
    candidates: tuple[Candidate, ...]
    """The top-k, best first."""
    pareto: tuple[Candidate, ...]
    """Non-dominated in (time, cost), fastest first."""
    table: LayoutTable
    num_enumerated: int
    """(layout, recompute, precision) combinations generated."""
    num_valid: int
    """... that pass the layout rules."""
    rejected: dict
    """reason -> count: broken rules, and 'does not fit in memory'."""
    cost_basis: str
    """'training_tokens' or 'step': what ``cost_usd`` pays for."""
    elapsed_s: float
    evaluate_s: float
    """Time spent in ``step.evaluate`` (the vectorised model)."""
    num_evaluated: int

    @property
    def best(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None

    def to_dict(self) -> dict:
        """The CLI's JSON (``perfmodel search --format json``)."""
        return {"candidates": [c.to_dict() for c in self.candidates], "pareto": [c.to_dict() for c in self.pareto],
                "num_enumerated": self.num_enumerated, "num_valid": self.num_valid,
                "num_evaluated": self.num_evaluated, "num_fit": len(self.table), "rejected": dict(self.rejected),
                "cost_basis": self.cost_basis, "objective": self.options.objective, "elapsed_s": self.elapsed_s}

    def top_reason(self) -> str:
        """The most common reason a layout was rejected ('' if none was)."""
        return next(iter(self.rejected), "")


def _table(scenario: Scenario, evaluations: list[Evaluation]) -> LayoutTable:
    """The rows of every evaluation, one table (their figures as ``measure`` gave them)."""
    if not evaluations:
        empty = np.zeros(0)
        none = np.zeros(0, dtype=object)
        return LayoutTable(
            base=scenario, num_gpus=np.zeros(0, dtype=np.int64),
            layouts=layouts_from_arrays(**{f.name: np.zeros(0, dtype=np.int64) for f in fields(Layouts)}),
            recompute=none, precision=none, step_time_s=empty, tokens_per_s=empty, mfu=empty,
            memory_per_gpu_bytes=empty, fits=np.zeros(0, dtype=bool), cost_usd=empty, energy_kwh=empty,
            time_to_train_s=None if not scenario.training_tokens else empty, bottleneck=none,
            breakdown={k: empty for k in COMPONENTS})

    def cat(get):
        return np.concatenate([np.asarray(get(e)) for e in evaluations])

    def per_row(get, dtype):
        return cat(lambda e: np.full(len(e), get(e), dtype=dtype))

    return LayoutTable(
        base=scenario, num_gpus=per_row(lambda e: e.job.num_gpus, np.int64),
        layouts=layouts_from_arrays(**{f.name: cat(lambda e, n=f.name: getattr(e.layouts, n))
                                       for f in fields(Layouts)}),
        recompute=per_row(lambda e: e.job.recompute, object), precision=per_row(lambda e: e.job.precision, object),
        step_time_s=cat(lambda e: e.step_time_s), tokens_per_s=cat(lambda e: e.tokens_per_s),
        mfu=cat(lambda e: e.mfu), memory_per_gpu_bytes=cat(lambda e: e.step.memory.total),
        fits=cat(lambda e: e.step.fits).astype(bool), cost_usd=cat(lambda e: e.cost_usd),
        energy_kwh=cat(lambda e: e.energy_kwh),
        time_to_train_s=None if not scenario.training_tokens else cat(lambda e: e.time_to_train_s),
        bottleneck=cat(lambda e: e.bottleneck), breakdown={k: cat(lambda e, k=k: e.step.breakdown[k])
                                                           for k in COMPONENTS})


# --------------------------------------------------------------------------- search
def bounds_for(scenario: Scenario, options: SearchOptions) -> Bounds:
    """The enumeration bounds the options set, with pinned dimensions at the scenario's values."""
    p = scenario.parallelism
    own = {"tp": p.tp, "pp": p.pp, "vpp": p.vpp, "cp": p.cp, "ep": p.ep, "etp": p.etp, "sp": p.sp,
           "zero_stage": p.zero_stage, "mbs": scenario.micro_batch_size}
    column = {"sequence_parallel": "sp", "micro_batch_size": "mbs"}
    pinned = {column.get(k, k): own[column.get(k, k)] for k in options.pin if k != "recompute"}
    return Bounds(zero_stages=tuple(options.zero_stages), max_micro_batch_size=options.max_micro_batch_size,
                  max_tp=options.max_tp, max_cp=options.max_cp, max_vpp=options.max_vpp, pinned=pinned)


def search(scenario: Scenario, options: SearchOptions | None = None, cost_model: CostModel | None = None,
           progress: Progress | None = None, *, efficiency: Efficiencies | None = None) -> SearchResult:
    """Enumerate, check, fit and time every layout of the job; rank by ``options.objective``.
    ``efficiency``: the efficiencies in force (None: the hardware spec's own)."""
    t0 = time.perf_counter()
    options = options or SearchOptions()
    cost_model = cost_model or scenario.cost
    hw, m = hardware_of(scenario), model_of(scenario)
    check_job(scenario, m)
    eff = efficiency or hw.efficiency
    precisions = options.precisions or (scenario.precision,)
    counts = options.gpu_counts or (scenario.num_gpus,)
    seq, gbs = scenario.seq_length, scenario.global_batch_size
    bounds = bounds_for(scenario, options)
    rejected: Counter = Counter()
    # Recompute modes the job's own fields rule out (rules.recompute_violation): every layout
    # of such a mode is rejected for that reason, as predict would reject it.
    modes = (scenario.recompute,) if "recompute" in options.pin else options.recompute
    recompute_options, ruled_out = [], []
    for rc in dict.fromkeys(modes):
        bad = recompute_violation(with_recompute(scenario, rc), rc)
        (ruled_out if bad else recompute_options).append((rc, bad))
    recompute_options = tuple(rc for rc, _ in recompute_options)
    groups = []   # (num_gpus, precision, valid layout columns)
    num_enumerated = num_valid = 0
    for N in dict.fromkeys(counts):
        cols = enumerate_layouts(m, hw, N, gbs, seq, bounds)
        for prec in dict.fromkeys(precisions):
            _, reason = layout_violation_fields(
                m, hw, seq, gbs, N, prec, tp=cols["tp"], pp=cols["pp"], vpp=cols["vpp"], cp=cols["cp"],
                ep=cols["ep"], etp=cols["etp"], sp=cols["sp"], micro_batch_size=cols["mbs"],
                **layout_rule_fields(scenario))
            bad = reason != ""
            nrc = len(recompute_options)
            if bad.any():
                texts, counts_ = np.unique(reason[bad], return_counts=True)
                rejected.update({str(t): int(k) * nrc for t, k in zip(texts, counts_)})
            for _, (field, why) in ruled_out:
                rejected[f"{field}: {why}"] += int((~bad).sum())
            num_enumerated += len(cols["tp"]) * (nrc + len(ruled_out))
            num_valid += int((~bad).sum()) * nrc
            if (~bad).any():
                groups.append((N, prec, keep(cols, ~bad)))

    done, eval_s, evaluations = 0, 0.0, []
    for N, prec, cols in groups:
        dp = N // (cols["tp"] * cols["pp"] * cols["cp"])
        L_all = layouts_from_arrays(tp=cols["tp"], pp=cols["pp"], vpp=cols["vpp"], cp=cols["cp"],
                                    ep=cols["ep"], etp=cols["etp"], sp=cols["sp"],
                                    zero_stage=cols["zero_stage"], mbs=cols["mbs"], dp=dp,
                                    num_mb=gbs // (cols["mbs"] * dp))
        for rc in recompute_options:
            job = bind(with_recompute(scenario, rc), m, hw, eff, num_gpus=N, precision=prec)
            for start in range(0, len(L_all), CHUNK):
                L = L_all.take(slice(start, start + CHUNK))
                fit = fits_in_memory(job_memory(job, L), hw)
                rejected[DOES_NOT_FIT] += int((~fit).sum())
                if fit.any():
                    L = L.take(fit)
                    t1 = time.perf_counter()
                    arrays = evaluate(job, L)
                    eval_s += time.perf_counter() - t1
                    evaluations.append(measure(job, L, arrays, cost_model))
                done += min(CHUNK, len(L_all) - start)
                if progress is not None:
                    progress(done, num_valid)

    table = _table(scenario, evaluations)
    order = table.ranking(options.objective)
    top = tuple(table.candidate(int(i)) for i in order[: options.top_k])
    front_time = table.time_to_train_s if table.time_to_train_s is not None else table.step_time_s
    front = tuple(table.candidate(int(i)) for i in pareto_front(front_time, table.cost_usd))
    return SearchResult(
        scenario=scenario, options=options, candidates=top, pareto=front, table=table,
        num_enumerated=num_enumerated, num_valid=num_valid,
        rejected=dict(sorted(((k, v) for k, v in rejected.items() if v), key=lambda kv: (-kv[1], kv[0]))),
        cost_basis="training_tokens" if scenario.training_tokens else "step",
        elapsed_s=time.perf_counter() - t0, evaluate_s=eval_s, num_evaluated=len(table))
