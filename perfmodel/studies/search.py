"""Layout search: every parallel layout of a job, evaluated at once, ranked by an objective.

The scenario fixes the job (model, hardware, GPUs, sequence length, global batch, precision,
training tokens); its ``parallelism``, ``micro_batch_size`` and ``recompute`` are ignored and
searched over:

==============  ===========================================================================
tp              divisors of num_gpus up to the scale-up domain (TP stays inside NVLink)
pp              divisors of num_gpus up to num_layers
vpp             1, or v > 1 with pp > 1 and pp * v dividing num_layers (whole chunks)
cp              divisors of num_gpus (up to ``max_cp``)
ep, etp         MoE only: ep divides num_experts and num_gpus; etp divides num_gpus, <= max tp
zero_stage      ``zero_stages`` (0-3)
mbs             1..``max_micro_batch_size`` where the per-rank batch splits
sp              on whenever tp > 1 (Korthikanti et al. 2022 recommend it with TP)
recompute       ``recompute`` (none, selective, full)
precision       the scenario's, or ``precisions`` (opt-in: it changes the numerics)
==============  ===========================================================================

Candidates are numpy arrays built by successive Cartesian products; the contract's rules
(``scenario.layout_violation_fields``) drop the layouts that cannot run, the memory model drops
those that do not fit, and ``step.evaluate`` times the rest, one call per (GPU count,
recompute, precision) group and chunk. No Python runs per candidate except for the top-k.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, fields
from typing import Annotated, Callable, Literal, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from perfmodel.spec import limits
from perfmodel.formulas.cost import CostModel, job_cost
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import validated
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.formulas.layouts import Layouts, layouts_from_arrays
from perfmodel.formulas.memory import fits_in_memory
from perfmodel.spec.model import ModelSpec
from perfmodel.formulas.overlap import Overlap
from perfmodel.spec.scenario import (RECOMPUTE_CHOICES, Parallelism, Precision, Recompute, Scenario, check_job, hardware_of,
                       layout_rule_fields, layout_violation_fields, model_of, recompute_violation)
from perfmodel.engine.prediction import scenario_constants
from perfmodel.engine.evaluate import COMPONENTS, evaluate, job_memory
from perfmodel.formulas.counts import training_flop_per_token

Objective = Literal["time", "cost", "tokens_per_usd"]
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


def parse_search_options(data: dict) -> SearchOptions:
    return validated(SearchOptions, data, "search", "must be a mapping")


# ------------------------------------------------------------------------ enumeration
def _divisors(n: int, upto: int) -> np.ndarray:
    return np.array([d for d in range(1, min(n, upto) + 1) if n % d == 0], dtype=np.int64)


def _cross(cols: dict, name: str, values) -> dict:
    """Every row of ``cols`` combined with every value (a Cartesian product)."""
    values = np.asarray(values, dtype=np.int64)
    n = len(next(iter(cols.values()))) if cols else 1
    out = {k: np.repeat(v, len(values)) for k, v in cols.items()}
    out[name] = np.tile(values, n)
    return out


def _keep(cols: dict, mask) -> dict:
    return {k: v[mask] for k, v in cols.items()}


def enumerate_layouts(model: ModelSpec, hw: HardwareSpec, num_gpus: int, global_batch_size: int,
                      seq_length: int, options: SearchOptions) -> dict:
    """Structurally possible layouts (degrees multiply into num_gpus) as integer arrays.

    Returns columns tp, pp, vpp, cp, ep, etp, zero_stage, mbs, sp. Whether each can run is
    for ``layout_violation_fields`` to say; this only keeps the product bounded.
    """
    N, layers = num_gpus, model.num_layers
    max_tp = options.max_tp or hw.scale_up.domain_size
    c = {"tp": _divisors(N, min(max_tp, model.num_attention_heads))}
    c = _cross(c, "pp", _divisors(N, layers))
    c = _keep(c, N % (c["tp"] * c["pp"]) == 0)
    c = _cross(c, "cp", _divisors(N, options.max_cp or seq_length))
    c = _keep(c, N % (c["tp"] * c["pp"] * c["cp"]) == 0)
    c = _cross(c, "vpp", _divisors(layers, options.max_vpp or layers))
    c = _keep(c, (c["vpp"] == 1) | ((c["pp"] > 1) & (layers % (c["pp"] * c["vpp"]) == 0)))
    if model.moe is None:
        c["ep"] = c["etp"] = np.ones_like(c["tp"])
    else:
        # ep * etp divides dp * cp * tp, which divides N: both must divide N
        experts = model.moe.num_experts
        c = _cross(c, "ep", [d for d in _divisors(N, experts) if experts % d == 0])
        c = _cross(c, "etp", _divisors(N, max_tp))
    c = _cross(c, "zero_stage", sorted(set(options.zero_stages)))
    dp = N // (c["tp"] * c["pp"] * c["cp"])
    c = _cross(c, "mbs", np.arange(1, options.max_micro_batch_size + 1))
    dp = np.repeat(dp, options.max_micro_batch_size)
    # keep mbs = 1 where the batch does not split at all, so the rule reports why
    c = _keep(c, (c["mbs"] == 1) | (global_batch_size % (c["mbs"] * dp) == 0))
    c["sp"] = c["tp"] > 1
    return c


# --------------------------------------------------------------------------- results
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

    def top_reason(self) -> str:
        """The most common reason a layout was rejected ('' if none was)."""
        return next(iter(self.rejected), "")


# --------------------------------------------------------------------------- search
def bind(scenario: Scenario) -> tuple[ModelSpec, HardwareSpec]:
    """The scenario's model and hardware specs, checked by the job rules ``predict`` applies
    (``scenario.check_job``); the layout and recompute mode are the search's to vary."""
    hw, m = hardware_of(scenario), model_of(scenario)
    check_job(scenario, m)
    return m, hw


def with_recompute(scenario: Scenario, recompute: str) -> Scenario:
    """The scenario with another recompute mode; ``recompute_num_layers`` (the block method of
    full recompute) goes with ``full`` and is dropped for the other modes, which have no blocks."""
    update: dict = {"recompute": recompute}
    if recompute != "full":
        update["recompute_num_layers"] = None
    return scenario.model_copy(update=update)


def _row_count(c: dict) -> int:
    return len(c["tp"])


def search(scenario: Scenario, options: SearchOptions | None = None, cost_model: CostModel | None = None,
           progress: Progress | None = None, *, efficiency: Efficiencies | None = None,
           overlap: Overlap | None = None) -> SearchResult:
    """Enumerate, check, fit and time every layout of the job; rank by ``options.objective``."""
    t0 = time.perf_counter()
    options = options or SearchOptions()
    cost_model = cost_model or CostModel()
    m, hw = bind(scenario)
    eff, ov = efficiency or hw.efficiency, overlap or scenario.overlap
    precisions = options.precisions or (scenario.precision,)
    counts = options.gpu_counts or (scenario.num_gpus,)
    seq, gbs = scenario.seq_length, scenario.global_batch_size
    rejected: Counter = Counter()
    # Recompute modes the job's own fields rule out (scenario.recompute_violation): every layout
    # of such a mode is rejected for that reason, as predict would reject it.
    recompute_options, ruled_out = [], []
    for rc in dict.fromkeys(options.recompute):
        bad = recompute_violation(with_recompute(scenario, rc), rc)
        (ruled_out if bad else recompute_options).append((rc, bad))
    recompute_options = tuple(rc for rc, _ in recompute_options)
    groups = []   # (num_gpus, precision, valid layout columns)
    num_enumerated = num_valid = 0
    for N in dict.fromkeys(counts):
        cols = enumerate_layouts(m, hw, N, gbs, seq, options)
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
            num_enumerated += _row_count(cols) * (nrc + len(ruled_out))
            num_valid += int((~bad).sum()) * nrc
            if (~bad).any():
                groups.append((N, prec, _keep(cols, ~bad)))

    total = num_valid
    done = 0
    parts = []
    eval_s = 0.0
    flop_per_token = training_flop_per_token(m, seq, causal=True).total
    for N, prec, cols in groups:
        dp = N // (cols["tp"] * cols["pp"] * cols["cp"])
        L_all = layouts_from_arrays(tp=cols["tp"], pp=cols["pp"], vpp=cols["vpp"], cp=cols["cp"],
                                    ep=cols["ep"], etp=cols["etp"], sp=cols["sp"],
                                    zero_stage=cols["zero_stage"], mbs=cols["mbs"], dp=dp,
                                    num_mb=gbs // (cols["mbs"] * dp))
        for rc in recompute_options:
            c = scenario_constants(with_recompute(scenario, rc), m, hw, eff, ov, num_gpus=N, precision=prec)
            for start in range(0, len(L_all), CHUNK):
                L = L_all.take(slice(start, start + CHUNK))
                fit = fits_in_memory(job_memory(c, L), hw)
                rejected[DOES_NOT_FIT] += int((~fit).sum())
                if fit.any():
                    L = L.take(fit)
                    t1 = time.perf_counter()
                    arrays = evaluate(c, L)
                    eval_s += time.perf_counter() - t1
                    parts.append(_part(N, prec, rc, L, arrays, flop_per_token, hw))
                done += min(CHUNK, len(L_all) - start)
                if progress is not None:
                    progress(done, total)

    table = _table(scenario, parts, hw, cost_model)
    order = table.ranking(options.objective)
    top = tuple(table.candidate(int(i)) for i in order[: options.top_k])
    front_time = table.time_to_train_s if table.time_to_train_s is not None else table.step_time_s
    front = tuple(table.candidate(int(i)) for i in pareto_front(front_time, table.cost_usd))
    return SearchResult(
        scenario=scenario, options=options, candidates=top, pareto=front, table=table,
        num_enumerated=num_enumerated, num_valid=num_valid,
        rejected=dict(sorted(((k, v) for k, v in rejected.items() if v), key=lambda kv: (-kv[1], kv[0]))),
        cost_basis="training_tokens" if scenario.training_tokens else "step",
        elapsed_s=time.perf_counter() - t0, evaluate_s=eval_s,
        num_evaluated=sum(len(p["tp"]) for p in parts))


def _bottleneck(breakdown: dict, gemm_s, attention_s, memory_bound_s) -> np.ndarray:
    """``step.bottleneck`` over arrays: the largest component (first on ties), with compute
    renamed memory_bandwidth where HBM-bound ops outweigh the GEMMs and attention."""
    stacked = np.stack([breakdown[k] for k in COMPONENTS])
    names = np.array(COMPONENTS, dtype=object)[np.argmax(stacked, axis=0)]
    hbm = (names == "compute") & (memory_bound_s > gemm_s + attention_s)
    return np.where(hbm, "memory_bandwidth", names).astype(object)


def _part(N: int, prec: str, rc: str, L: Layouts, arrays, flop_per_token: float, hw: HardwareSpec) -> dict:
    step = arrays.step_time_s
    n = len(L)
    out = {f.name: getattr(L, f.name) for f in fields(Layouts)}
    out.update(num_gpus=np.full(n, N, dtype=np.int64), precision=np.full(n, prec, dtype=object),
               recompute=np.full(n, rc, dtype=object), step_time_s=step,
               memory_per_gpu_bytes=arrays.memory.total, fits=arrays.fits,
               peak=np.full(n, hw.gpu.peak_flop_per_s(prec)),
               bottleneck=_bottleneck(arrays.breakdown, arrays.gemm_s, arrays.attention_s,
                                      arrays.memory_bound_s))
    out.update({"bd_" + k: arrays.breakdown[k] for k in COMPONENTS})
    out["flop_per_token"] = flop_per_token
    return out


def _table(scenario: Scenario, parts: list, hw: HardwareSpec, cost_model: CostModel) -> LayoutTable:
    keys = [f.name for f in fields(Layouts)] + ["num_gpus", "precision", "recompute", "step_time_s",
                                                "memory_per_gpu_bytes", "fits", "peak", "bottleneck"]
    keys += ["bd_" + k for k in COMPONENTS]
    empty = {k: np.zeros(0, dtype=object if k in ("precision", "recompute", "bottleneck") else float)
             for k in keys}
    cat = {k: np.concatenate([p[k] for p in parts]) if parts else empty[k] for k in keys}
    flop = parts[0]["flop_per_token"] if parts else 0.0
    step, N = cat["step_time_s"], cat["num_gpus"].astype(float)
    tokens_per_step = scenario.global_batch_size * scenario.seq_length
    tps = tokens_per_step / step
    # MFU as in predict: model FLOPs (no recompute) / (step x GPUs x dense peak of the precision)
    mfu = flop * tokens_per_step / (step * N * cat["peak"])
    ttt = scenario.training_tokens / tps if scenario.training_tokens else None
    cost = job_cost(N, ttt if ttt is not None else step, hw, cost_model)
    return LayoutTable(
        base=scenario, num_gpus=cat["num_gpus"].astype(np.int64),
        layouts=layouts_from_arrays(**{k: cat[k] for k in
                                       ("tp", "pp", "vpp", "cp", "ep", "etp", "sp", "zero_stage", "mbs", "dp", "num_mb")}),
        recompute=cat["recompute"], precision=cat["precision"], step_time_s=step, tokens_per_s=tps, mfu=mfu,
        memory_per_gpu_bytes=cat["memory_per_gpu_bytes"], fits=cat["fits"].astype(bool),
        cost_usd=np.asarray(cost.cost_usd, dtype=float), energy_kwh=np.asarray(cost.energy_kwh, dtype=float),
        time_to_train_s=ttt, bottleneck=cat["bottleneck"],
        breakdown={k: cat["bd_" + k] for k in COMPONENTS})
