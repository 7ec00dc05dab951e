"""The rows of a layout search, and what the search keeps of them as they stream past.

Each evaluated layout is a row of a ``LayoutTable`` (arrays of equal length, every figure as
``perfmodel.engine.prediction.measure`` gave it); ``Candidate`` is one row with its scenario. A
search evaluates its layouts chunk by chunk and keeps three things, each a pure function of
what it kept so far and the next rows, so its memory does not grow with the number of layouts:

- ``best_rows``: the best k by the objective (ties: the shorter step, then the smaller memory,
  then the earlier row in the search's order);
- ``front_rows``: the layouts no other beats on both time and cost (``pareto_front``);
- ``sample_rows``: every ``stride``-th row that fits, the stride doubling whenever more than
  ``SAMPLE_ROWS`` would be kept (the app draws the cloud of layouts from it).

A row's place in the search's order is the pair (``group``, ``position``): the group of jobs
it belongs to (GPU count, precision, recompute, overlap settings, in that order) and its place
in the enumeration of its GPU count. Keeping the best of what was kept and the next rows gives
the best of all rows, so the results are those of ranking every row at once.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from perfmodel.engine.evaluate import COMPONENTS
from perfmodel.engine.prediction import Evaluation
from perfmodel.engine.rules import with_recompute
from perfmodel.formulas.layouts import Layouts, layouts_from_arrays
from perfmodel.formulas.pipeline import schedule_code, schedule_name
from perfmodel.spec.scenario import Parallelism, Scenario, default_schedule, model_of
from perfmodel.spec.software import Overlap
from perfmodel.studies.search.job_variants import OVERLAP_KINDS, has_traffic

SAMPLE_ROWS = 4000
"""Most layouts kept for the app's chart of the layouts that fit (it draws them all)."""


@dataclass(frozen=True)
class Candidate:
    """One layout with its prediction (the numbers ``predict`` gives for ``scenario``)."""

    scenario: Scenario
    """The input scenario with this layout, micro-batch, recompute, precision, overlap settings
    and GPU count."""
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
        return {"num_gpus": s.num_gpus, "tp": p.tp, "pp": p.pp, "vpp": p.vpp, "pipeline_schedule": p.schedule,
                "cp": p.cp, "ep": p.ep, "etp": p.etp, "dp": self.dp, "sequence_parallel": p.sp,
                "zero_stage": p.zero_stage,
                "micro_batch_size": s.micro_batch_size, "num_microbatches": self.num_microbatches,
                "recompute": s.recompute, "precision": s.precision,
                "overlap": s.software.overlap.model_dump(mode="json"), "overlapped": self.overlapped()}

    def overlapped(self) -> list[str]:
        """The kinds of communication this layout sends (``job_variants.has_traffic``) whose
        overlap with compute is on (a fraction above 0, or TP's ideal chunked overlap)."""
        s, p = self.scenario, self.scenario.parallelism
        cols = {"tp": [p.tp], "pp": [p.pp], "cp": [p.cp], "ep": [p.ep], "etp": [p.etp], "zero_stage": [p.zero_stage],
                "schedule": [schedule_code(p.schedule)]}
        ov = s.software.overlap
        return [k for k in OVERLAP_KINDS if has_traffic(k, cols, model_of(s), s.num_gpus)[0]
                and (getattr(ov, k) is None or getattr(ov, k) > 0)]

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


def tokens_paid_for(base: Scenario) -> float:
    """The tokens ``cost_usd`` pays for: the training tokens, or one step's."""
    return base.training_tokens if base.training_tokens else base.global_batch_size * base.seq_length


def objective_values(objective: str, base: Scenario, step_time_s, cost_usd) -> np.ndarray:
    """The search objective of each row, smaller better: the step time, the cost, or minus the
    tokens per dollar."""
    if objective == "time":
        return step_time_s
    if objective == "cost":
        return cost_usd
    return -(tokens_paid_for(base) / cost_usd)


@dataclass(frozen=True)
class LayoutTable:
    """Evaluated layouts, one row each (arrays of equal length)."""

    base: Scenario
    num_gpus: np.ndarray
    layouts: Layouts
    recompute: np.ndarray
    precision: np.ndarray
    overlap: np.ndarray
    """The ``Overlap`` settings of each row (objects)."""
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
    group: np.ndarray
    """With ``position``, the row's place in the search's order (see the module's docstring)."""
    position: np.ndarray

    def __len__(self) -> int:
        return len(self.layouts)

    @property
    def tokens_per_s_per_gpu(self) -> np.ndarray:
        return self.tokens_per_s / self.num_gpus

    @property
    def tokens_per_usd(self) -> np.ndarray:
        return tokens_paid_for(self.base) / self.cost_usd

    @property
    def time_basis_s(self) -> np.ndarray:
        """What the time-cost front weighs: time to train where there are training tokens, else
        the step."""
        return self.step_time_s if self.time_to_train_s is None else self.time_to_train_s

    def scenario(self, i: int) -> Scenario:
        L = self.layouts.row(i)
        # the schedule as the base names it: left out where the base names none and it is the default
        name = schedule_name(L["schedule"])
        named = self.base.parallelism.pipeline_schedule is not None or name != default_schedule(L["vpp"])
        par = Parallelism(tp=L["tp"], pp=L["pp"], vpp=L["vpp"], cp=L["cp"], ep=L["ep"], etp=L["etp"],
                          sequence_parallel=L["sp"], zero_stage=L["zero_stage"],
                          pipeline_schedule=name if named else None)
        s = with_recompute(self.base, str(self.recompute[i]))
        update = dict(num_gpus=int(self.num_gpus[i]), micro_batch_size=L["mbs"], parallelism=par,
                      precision=str(self.precision[i]))
        if self.overlap[i] != s.software.overlap:
            update["software"] = s.software.model_copy(update={"overlap": self.overlap[i]})
        return s.model_copy(update=update)

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
        return objective_values(objective, self.base, self.step_time_s, self.cost_usd)

    def ranking(self, objective: str) -> np.ndarray:
        """Row indices, best first; ties broken by step time, then memory, then the search's order."""
        return np.lexsort((self.position, self.group, self.memory_per_gpu_bytes, self.step_time_s,
                           self.objective(objective)))

    def in_search_order(self) -> np.ndarray:
        return np.lexsort((self.position, self.group))

    def take(self, index) -> LayoutTable:
        def pick(v):
            return None if v is None else v[index]
        return LayoutTable(
            base=self.base, layouts=self.layouts.take(index),
            breakdown={k: v[index] for k, v in self.breakdown.items()},
            **{f.name: pick(getattr(self, f.name)) for f in fields(self)
               if f.name not in ("base", "layouts", "breakdown")})


def empty_table(base: Scenario) -> LayoutTable:
    empty, none, ints = np.zeros(0), np.zeros(0, dtype=object), np.zeros(0, dtype=np.int64)
    return LayoutTable(
        base=base, num_gpus=ints, layouts=layouts_from_arrays(**{f.name: ints for f in fields(Layouts)}),
        recompute=none, precision=none, overlap=none, step_time_s=empty, tokens_per_s=empty, mfu=empty,
        memory_per_gpu_bytes=empty, fits=np.zeros(0, dtype=bool), cost_usd=empty, energy_kwh=empty,
        time_to_train_s=None if not base.training_tokens else empty, bottleneck=none,
        breakdown={k: empty for k in COMPONENTS}, group=ints, position=ints)


def table_of(base: Scenario, ev: Evaluation, rows: np.ndarray, group: int, position: np.ndarray,
             overlap: Overlap) -> LayoutTable:
    """Rows ``rows`` of an evaluation (layouts at ``position`` in the enumeration, of search
    group ``group``), as a table."""
    n = len(rows)

    def each(value, dtype):
        """``value`` in every row (``fill``: np.full first converts a string or a model to an
        array, 10x slower for an object column)."""
        out = np.empty(n, dtype=dtype)
        out.fill(value)
        return out

    job = ev.job
    return LayoutTable(
        base=base, num_gpus=each(job.num_gpus, np.int64), layouts=ev.layouts.take(rows),
        recompute=each(job.recompute, object), precision=each(job.precision, object), overlap=each(overlap, object),
        step_time_s=ev.step_time_s[rows], tokens_per_s=ev.tokens_per_s[rows], mfu=ev.mfu[rows],
        memory_per_gpu_bytes=ev.step.memory.total[rows], fits=ev.step.fits[rows].astype(bool),
        cost_usd=ev.cost_usd[rows], energy_kwh=ev.energy_kwh[rows],
        time_to_train_s=None if ev.time_to_train_s is None else ev.time_to_train_s[rows],
        bottleneck=ev.bottleneck_of(rows), breakdown={k: ev.step.breakdown[k][rows] for k in COMPONENTS},
        group=each(group, np.int64), position=np.asarray(position, dtype=np.int64)[rows])


def concat(tables: list[LayoutTable]) -> LayoutTable:
    """The rows of every table, in the order given (tables of one search)."""
    tables = [t for t in tables if len(t)] or tables[:1]
    if len(tables) == 1:
        return tables[0]

    def cat(get):
        return np.concatenate([get(t) for t in tables])

    first = tables[0]
    return LayoutTable(
        base=first.base,
        layouts=layouts_from_arrays(**{f.name: cat(lambda t, n=f.name: getattr(t.layouts, n))
                                       for f in fields(Layouts)}),
        breakdown={k: cat(lambda t, k=k: t.breakdown[k]) for k in COMPONENTS},
        time_to_train_s=None if first.time_to_train_s is None else cat(lambda t: t.time_to_train_s),
        **{f.name: cat(lambda t, n=f.name: getattr(t, n)) for f in fields(LayoutTable)
           if f.name not in ("base", "layouts", "breakdown", "time_to_train_s")})


def pareto_front(time_s, cost_usd) -> np.ndarray:
    """Indices of the points no other point beats on both time and cost (one per distinct
    point, the first of equal ones), ordered by time. O(n log n): sort by (time, cost), keep
    strict cost records."""
    t, c = np.asarray(time_s, float), np.asarray(cost_usd, float)
    if t.size == 0:
        return np.zeros(0, dtype=np.int64)
    order = np.lexsort((c, t))
    best_before = np.minimum.accumulate(np.concatenate(([np.inf], c[order])))[:-1]
    return order[c[order] < best_before]


# ------------------------------------------------------------------ what a search keeps
def best_candidates(objective: np.ndarray, step_s: np.ndarray, memory_bytes: np.ndarray, k: int,
                    worst_kept: float) -> np.ndarray:
    """Rows of one evaluation (one search group, in enumeration order) that may be among the best
    ``k`` of the search: its own best k by (objective, step, memory, order), none worse than
    ``worst_kept`` (the k-th best kept so far; inf while fewer are kept)."""
    n = objective.size
    rows = np.flatnonzero(objective <= worst_kept) if np.isfinite(worst_kept) else np.arange(n)
    if rows.size > 4 * k:   # the k smallest objectives, with every row that ties the k-th
        kth = np.partition(objective[rows], k - 1)[k - 1]
        rows = rows[objective[rows] <= kth]
    order = np.lexsort((rows, memory_bytes[rows], step_s[rows], objective[rows]))
    return rows[order[:k]]


def best_rows(kept: LayoutTable, new: LayoutTable, objective: str, k: int) -> LayoutTable:
    both = concat([kept, new])
    return both.take(both.ranking(objective)[:k])


def front_candidates(time_s: np.ndarray, cost_usd: np.ndarray, kept: LayoutTable) -> np.ndarray:
    """Rows of one evaluation that may be on the time-cost front: not beaten on both by a point
    of the front kept so far (an equal point stays: which of two equal points is kept is for
    ``front_rows`` to decide, by the search's order)."""
    if len(kept):
        kt, kc = kept.time_basis_s, kept.cost_usd         # by time, cost falling
        at = np.searchsorted(kt, time_s, side="right") - 1
        has = at >= 0
        ct, cc = kt[np.maximum(at, 0)], kc[np.maximum(at, 0)]
        beaten = has & ((cc < cost_usd) | ((cc == cost_usd) & (ct < time_s)))
        rows = np.flatnonzero(~beaten)
    else:
        rows = np.arange(time_s.size)
    return rows[pareto_front(time_s[rows], cost_usd[rows])]


def front_rows(kept: LayoutTable, new: LayoutTable) -> LayoutTable:
    both = concat([kept, new])
    both = both.take(both.in_search_order())
    return both.take(pareto_front(both.time_basis_s, both.cost_usd))


def sample_candidates(num_rows: int, seen: int, stride: int) -> np.ndarray:
    """Rows of the next evaluation to sample: those with a multiple of ``stride`` fitting rows
    before them (``seen`` fitting rows came before its first)."""
    return np.flatnonzero((seen + np.arange(num_rows)) % stride == 0)


def sample_thinned(kept: LayoutTable, rows: np.ndarray, stride: int) -> tuple[LayoutTable, np.ndarray, int]:
    """(the sample kept, the next ``sample_candidates`` and the stride) thinned as ``sample_rows``
    would thin them together, before the candidates are made a table: each halving keeps every
    other row of the two in turn, so h of them keep every 2**h-th, the same rows."""
    num, halvings = len(kept) + len(rows), 0
    while num > SAMPLE_ROWS:
        num, halvings = (num + 1) // 2, halvings + 1
    if not halvings:
        return kept, rows, stride
    step = 2 ** halvings
    return (kept.take(slice(0, None, step)), rows[(len(kept) + np.arange(len(rows))) % step == 0],
            stride * step)


def sample_rows(kept: LayoutTable, new: LayoutTable, stride: int) -> tuple[LayoutTable, int]:
    """(every ``stride``-th fitting row seen, in the order seen, and the stride): ``new`` holds
    the latest ``sample_candidates``; while more than ``SAMPLE_ROWS`` rows would be kept, every
    other one goes and the stride doubles (the kept rows are ``stride`` apart, from the first)."""
    both = concat([kept, new])
    while len(both) > SAMPLE_ROWS:
        both, stride = both.take(slice(0, None, 2)), 2 * stride
    return both, stride
