"""The layouts of a search streaming through it, in named steps with their state explicit.

``search`` (``perfmodel.studies.search.search``) fixes a ``Plan`` (frozen: the job, what is
searched over, how it is ranked) and a ``Tally`` (what the search has seen so far: the layouts
kept, the counts, the jobs bound), then hands the plan and the tally to these steps:

- ``tally_block``: one block of the enumeration checked against the rules for one precision,
  its broken rules counted, its valid layouts returned;
- ``run_chunk``: a chunk of valid layouts of one GPU count and precision fitted and timed
  under every recompute mode and overlap setting (``_checked`` skips those whose floor cannot
  beat the k-th best, ``_fit_and_time`` and ``_fit_and_time_by_floor`` check memory and time);
- ``time_rows``: layouts timed and folded into the tally's ``Kept`` (``kept_with``).

Only the tally changes, and only here; the plan and everything the steps are given stay as they
were.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field, fields, replace

import numpy as np

from perfmodel.engine.enumerate import Bounds, keep
from perfmodel.engine.evaluate import StepArrays, evaluate
from perfmodel.engine.evaluate_modes import MAX_ROWS, evaluate_modes
from perfmodel.engine.floor import by_floor, compute_floor_s, step_time_floor_s
from perfmodel.engine.job import Job, bind
from perfmodel.engine.job_memory import job_state_floor_bytes, memory_and_fit, memory_and_fit_modes
from perfmodel.engine.prediction import Evaluation, measure
from perfmodel.engine.rules import layout_violations, with_recompute
from perfmodel.formulas.layouts import Layouts, layouts_for
from perfmodel.formulas.memory import MemoryBreakdown
from perfmodel.spec.cost import CostModel
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.scenario import Scenario
from perfmodel.studies.search.job_variants import Variant
from perfmodel.studies.search.layout_table import (
    LayoutTable,
    best_candidates,
    best_rows,
    front_candidates,
    front_rows,
    objective_values,
    sample_candidates,
    sample_rows,
    sample_thinned,
    table_of,
)

DOES_NOT_FIT = "does not fit in memory"
LAYOUT_COLUMNS = ("tp", "pp", "vpp", "cp", "ep", "etp", "sp", "zero_stage", "mbs", "schedule")


@dataclass(frozen=True)
class Plan:
    """What one search does, fixed before its first layout: the job, what is searched over and
    how the layouts are ranked."""

    scenario: Scenario
    model: ModelSpec
    hardware: HardwareSpec
    efficiency: Efficiencies
    cost_model: CostModel
    objective: str
    top_k: int
    best_only: bool
    counts: tuple[int, ...]
    """GPU counts, in the order searched."""
    precisions: tuple[str, ...]
    recompute: tuple[str, ...]
    """Recompute modes searched (those the job's fields allow)."""
    ruled_out: tuple[tuple[str, tuple[str, str]], ...]
    """(mode, (field, why)) of each mode the job's fields rule out: its layouts are counted as rejected."""
    variants: tuple[Variant, ...]
    """Overlap settings (``perfmodel.studies.search.job_variants``)."""
    bounds: Bounds
    rule_fields: dict
    prune: bool
    """Skip the layouts whose floor cannot beat the k-th best (``best_only`` with the time objective)."""
    chunk: int
    """Valid layouts gathered before a chunk is fitted and timed."""

    def group(self, ni: int, pi: int, ri: int, vi: int) -> int:
        """The search group of (GPU count, precision, recompute, overlap setting), as ``table_of`` numbers it."""
        return ((ni * len(self.precisions) + pi) * len(self.recompute) + ri) * len(self.variants) + vi


@dataclass(frozen=True)
class Kept:
    """What a search keeps of the layouts it has evaluated so far."""

    best: LayoutTable
    front: LayoutTable
    sample: LayoutTable
    stride: int
    """Of the sample: every ``stride``-th layout that fits."""
    num_fit: int
    """Layouts that fit seen so far (the sample's stride counts in them)."""


@dataclass
class Tally:
    """What a search has seen so far: changed by the steps of this module alone."""

    kept: Kept
    rejected: Counter = field(default_factory=Counter)
    """reason -> candidates rejected for it."""
    num_enumerated: int = 0
    num_valid: int = 0
    num_fit: int = 0
    num_timed: int = 0
    evaluate_s: float = 0.0
    jobs: dict = field(default_factory=dict)
    """(count, precision, recompute[, overlap setting]) indices -> the job bound for them, one per
    search group, so that work kept per job serves every chunk."""

    def bound(self, plan: Plan) -> float:
        """The k-th best step so far (inf while fewer are kept): no better layout is skipped."""
        return float(self.kept.best.step_time_s[-1]) if len(self.kept.best) == plan.top_k else np.inf


def kept_with(kept: Kept, ev: Evaluation, group: int, position: np.ndarray, variant: Variant, objective: str,
              k: int, best_only: bool) -> Kept:
    """``kept`` and the rows of one evaluation (all of one search group; ``position``: their
    places in the enumeration, increasing); with ``best_only``, no front and no sample."""
    base = kept.best.base
    obj = objective_values(objective, base, ev.step_time_s, ev.cost_usd)
    worst = float(kept.best.objective(objective)[-1]) if len(kept.best) == k else np.inf
    rows = best_candidates(obj, ev.step_time_s, ev.step.memory.total, k, worst)
    best = kept.best      # where no row may join it, as it was (ranked already; so is the front)
    if rows.size:
        best = best_rows(kept.best, table_of(base, ev, rows, group, position, variant.overlap), objective, k)
    if best_only:
        return Kept(best, kept.front, kept.sample, kept.stride, kept.num_fit)
    time_s = ev.step_time_s if ev.time_to_train_s is None else ev.time_to_train_s
    rows = front_candidates(time_s, ev.cost_usd, kept.front)
    front = kept.front
    if rows.size:
        front = front_rows(kept.front, table_of(base, ev, rows, group, position, variant.overlap))
    rows = sample_candidates(len(ev), kept.num_fit, kept.stride)
    thinned, rows, stride = sample_thinned(kept.sample, rows, kept.stride)   # only the rows kept made a table
    sample, stride = sample_rows(thinned, table_of(base, ev, rows, group, position, variant.overlap), stride)
    return Kept(best, front, sample, stride, kept.num_fit + len(ev))


def _memory_rows(mem: MemoryBreakdown, rows) -> MemoryBreakdown:
    return MemoryBreakdown(*(getattr(mem, f.name)[rows] for f in fields(MemoryBreakdown)))


# ------------------------------------------------------------------------- the rules
def tally_block(plan: Plan, tally: Tally, ni: int, pi: int, cols: dict, per_layout: np.ndarray) -> np.ndarray:
    """Check one block of the enumeration (``cols``, at GPU count ``ni``) against the rules at
    precision ``pi``; count its candidates (``per_layout``: how many each layout stands for, one
    per overlap setting that differs for it) and those the rules reject, each under its reason,
    in ``tally``. Returns which layouts are valid."""
    s, m, N = plan.scenario, plan.model, plan.counts[ni]
    nrc = len(plan.recompute)
    broken = layout_violations(
        m, plan.hardware, s.seq_length, s.global_batch_size, N, plan.precisions[pi], tp=cols["tp"], pp=cols["pp"],
        vpp=cols["vpp"], cp=cols["cp"], ep=cols["ep"], etp=cols["etp"], sp=cols["sp"], micro_batch_size=cols["mbs"],
        schedule=cols["schedule"], **plan.rule_fields)
    ok = broken.ok
    if not ok.all():
        weights = np.bincount(broken.code[~ok], weights=per_layout[~ok], minlength=len(broken.reasons))
        for text, w in zip(broken.reasons, weights):
            tally.rejected[text] += int(w) * nrc
    valid = int(per_layout[ok].sum())
    for _, (fld, why) in plan.ruled_out:
        tally.rejected[f"{fld}: {why}"] += valid
    tally.num_enumerated += int(per_layout.sum()) * (nrc + len(plan.ruled_out))
    tally.num_valid += valid * nrc
    return ok


# ---------------------------------------------------------------------- one chunk
def _jobs(plan: Plan, tally: Tally, ni: int, pi: int, ri: int) -> tuple[Job, list[Job]]:
    """The job of (GPU count, precision, recompute) and its copy under each overlap setting, bound once per search."""
    jobs = tally.jobs
    job = jobs.get((ni, pi, ri))
    if job is None:
        job = jobs[ni, pi, ri] = bind(with_recompute(plan.scenario, plan.recompute[ri]), plan.model, plan.hardware,
                                      plan.efficiency, num_gpus=plan.counts[ni], precision=plan.precisions[pi])
    out = []
    for vi, variant in enumerate(plan.variants):
        job_v = jobs.get((ni, pi, ri, vi))
        if job_v is None:
            job_v = jobs[ni, pi, ri, vi] = job if not variant.changed else replace(
                job, software=job.software.model_copy(update={"overlap": variant.overlap}))
        out.append(job_v)
    return job, out


def time_rows(plan: Plan, tally: Tally, group: int, job: Job, variant: Variant, L: Layouts, mem: MemoryBreakdown,
              rows: np.ndarray, position: np.ndarray, taken: dict | None = None) -> None:
    """Time layouts ``rows`` of ``L`` (whose memory is ``mem``), at ``position`` in the
    enumeration, and keep what the search keeps of them. ``taken``: the rows of ``L`` taken last
    (``_taken``), given again for the same rows, so that what is kept per object (the groupings of
    ``perfmodel.engine.distinct``, ``evaluate``'s data-parallel parts) serves the next recompute
    mode too."""
    tally.num_timed += rows.size
    L, mem = _rows_taken(L, mem, rows, taken)
    t1 = time.perf_counter()
    arrays = evaluate(job, L, mem)
    tally.evaluate_s += time.perf_counter() - t1
    _keep(plan, tally, group, job, variant, L, arrays, position[rows])


def _rows_taken(L: Layouts, mem: MemoryBreakdown, rows: np.ndarray, taken: dict | None):
    """(the layouts ``rows`` of ``L``, their memory), ``L`` and ``mem`` themselves for all of them."""
    if rows.size < len(L):
        return _taken(L, rows, taken), _memory_rows(mem, rows)
    return L, mem


def _keep(plan: Plan, tally: Tally, group: int, job: Job, variant: Variant, L: Layouts, arrays: StepArrays,
          at: np.ndarray) -> None:
    """Fold the layouts ``L`` timed (``arrays``, at ``at`` in the enumeration) into the tally's ``Kept``."""
    tally.kept = kept_with(tally.kept, measure(job, L, arrays, plan.cost_model), group, at, variant,
                           plan.objective, plan.top_k, plan.best_only)


def _taken(L: Layouts, rows: np.ndarray, taken: dict | None) -> Layouts:
    """``L.take(rows)``; the same object as the last call's with ``taken`` for the same rows (one
    kept: the recompute modes of one overlap setting follow each other)."""
    if taken is None:
        return L.take(rows)
    key = rows.tobytes()
    if key not in taken:
        taken.clear()
        taken[key] = L.take(rows)
    return taken[key]


def _checked(plan: Plan, tally: Tally, ni: int, pi: int, job: Job, single_variant: bool, L_all: Layouts,
             compute: list) -> tuple[np.ndarray, np.ndarray | None]:
    """(the layouts of ``L_all`` worth checking for memory, their step floors where worked out).
    A layout whose step cannot beat the k-th best is not even checked: first by its compute
    alone (the same under every recompute and overlap setting: worked out once per chunk, in
    ``compute``), then, with one overlap setting, by its step's floor."""
    checked = np.arange(len(L_all))
    if not (plan.prune and np.isfinite(tally.bound(plan))):
        return checked, None
    if not compute:
        compute.append(compute_floor_s(tally.jobs[ni, pi, 0], L_all))
    checked = np.flatnonzero(compute[0] <= tally.bound(plan))
    if not (checked.size and single_variant):
        return checked, None
    floor = step_time_floor_s(job, L_all.take(checked))
    return checked[floor <= tally.bound(plan)], floor[floor <= tally.bound(plan)]


def _fit_and_time(plan: Plan, tally: Tally, groups: list[int], job_vs: list[Job], L: Layouts,
                  wanted: np.ndarray, position: np.ndarray, mem: MemoryBreakdown, fit: np.ndarray,
                  taken: dict) -> None:
    """Time the layouts of ``L`` that fit (``mem`` and ``fit``: their memory, the same under every
    overlap setting, ``memory_and_fit``) under each overlap setting that applies to them (``wanted``;
    ``taken``: as ``time_rows``)."""
    tally.rejected[DOES_NOT_FIT] += int(wanted[:, ~fit].sum())
    for vi, variant in enumerate(plan.variants):
        rows = np.flatnonzero(fit & wanted[vi])
        tally.num_fit += rows.size
        if rows.size:
            time_rows(plan, tally, groups[vi], job_vs[vi], variant, L, mem, rows, position, taken)


def _fit_and_time_by_floor(plan: Plan, tally: Tally, groups: list[int], job: Job, job_vs: list[Job], L: Layouts,
                           wanted: np.ndarray, position: np.ndarray, floor: np.ndarray | None,
                           state: np.ndarray) -> None:
    """A pruned search's: under each overlap setting, the layouts of ``L`` whose model states
    fit (rank 0's first, ``state``, as ``memory_and_fit``) checked and timed lowest floor first
    (``by_floor``) while their floor can beat the k-th best."""
    fit = state <= job.hardware.gpu.hbm_usable_bytes
    for vi, variant in enumerate(plan.variants):
        rows = np.flatnonzero(fit & wanted[vi])
        tally.rejected[DOES_NOT_FIT] += int(wanted[vi].sum()) - rows.size
        if not rows.size:
            continue
        floor_v = floor[rows] if floor is not None else step_time_floor_s(job_vs[vi], L.take(rows))
        for batch in by_floor(floor_v, lambda: tally.bound(plan)):
            L_some, at = L.take(rows[batch]), position[rows[batch]]
            mem, fits = memory_and_fit(job, L_some, state[rows[batch]])   # the same under every overlap setting
            tally.rejected[DOES_NOT_FIT] += int((~fits).sum())
            tally.num_fit += int(fits.sum())
            if fits.any():
                time_rows(plan, tally, groups[vi], job_vs[vi], variant, L_some, mem, np.flatnonzero(fits), at)


def run_chunk(plan: Plan, tally: Tally, ni: int, pi: int, parts: list) -> None:
    """Fit and time a chunk of valid layouts of GPU count ``ni`` and precision ``pi``: ``parts``
    holds (columns, enumeration positions, overlap settings wanted x layouts) of each block."""
    cols = {k: np.concatenate([p[0][k] for p in parts]) for k in parts[0][0]}
    position = np.concatenate([p[1] for p in parts])
    wanted = np.concatenate([p[2] for p in parts], axis=1)          # variants x layouts
    L_all = layouts_for(plan.counts[ni], plan.scenario.global_batch_size, **{k: cols[k] for k in LAYOUT_COLUMNS})
    if not plan.prune:
        _fit_and_time_modes(plan, tally, ni, pi, L_all, wanted, position)
        return
    compute: list = []
    states: dict = {}
    for ri in range(len(plan.recompute)):
        job, job_vs = _jobs(plan, tally, ni, pi, ri)
        checked, floor = _checked(plan, tally, ni, pi, job, len(job_vs) == 1, L_all, compute)
        if not checked.size:
            continue
        groups = [plan.group(ni, pi, ri, vi) for vi in range(len(job_vs))]
        state = _state_floor_bytes(job, L_all, states)
        if checked.size < len(L_all):
            L, w, at, state = L_all.take(checked), wanted[:, checked], position[checked], state[checked]
        else:
            L, w, at = L_all, wanted, position
        _fit_and_time_by_floor(plan, tally, groups, job, job_vs, L, w, at, floor, state)


def _fit_and_time_modes(plan: Plan, tally: Tally, ni: int, pi: int, L: Layouts, wanted: np.ndarray,
                        position: np.ndarray) -> None:
    """A search that does not prune: the memory of every layout of ``L`` checked under every
    recompute mode, the modes that share a software stack together (their model states worked
    out once, ``memory_and_fit_modes``), and those that fit timed, mode by mode."""
    jobs = [_jobs(plan, tally, ni, pi, ri) for ri in range(len(plan.recompute))]
    by_stack: dict = {}
    for ri, (job, _) in enumerate(jobs):
        by_stack.setdefault(id(job.software), []).append(ri)
    fitted = {}
    for modes in by_stack.values():
        state = job_state_floor_bytes(jobs[modes[0]][0], L)
        fitted.update(zip(modes, memory_and_fit_modes(tuple(jobs[ri][0] for ri in modes), L, state)))
    taken: dict = {}       # the modes that fit the same layouts time the same Layouts object
    if len(plan.variants) == 1 and sum(int((fit & wanted[0]).sum()) for _, fit in fitted.values()) <= MAX_ROWS:
        _time_modes(plan, tally, ni, pi, [job_vs[0] for _, job_vs in jobs], L, wanted[0], position, fitted, taken)
        return
    for ri, (_, job_vs) in enumerate(jobs):
        groups = [plan.group(ni, pi, ri, vi) for vi in range(len(job_vs))]
        _fit_and_time(plan, tally, groups, job_vs, L, wanted, position, *fitted[ri], taken)


def _time_modes(plan: Plan, tally: Tally, ni: int, pi: int, jobs: list[Job], L: Layouts, wanted: np.ndarray,
                position: np.ndarray, fitted: dict, taken: dict) -> None:
    """One overlap setting, at most ``MAX_ROWS`` layouts timed in all: the layouts of ``L`` that fit
    (``fitted``: each mode's memory and fit) under every recompute mode timed in one call
    (``evaluate_modes``), then kept mode by mode, as ``_fit_and_time`` keeps them. (More are timed
    mode by mode, each mode's rows taken, timed and kept before the next's: one call gains nothing
    on so many, and would hold them all.)"""
    runs, rows_of = [], []
    for ri, job in enumerate(jobs):
        mem, fit = fitted[ri]
        tally.rejected[DOES_NOT_FIT] += int(wanted[~fit].sum())
        rows = np.flatnonzero(fit & wanted)
        tally.num_fit += rows.size
        tally.num_timed += rows.size
        if rows.size:
            runs.append((job, *_rows_taken(L, mem, rows, taken)))
            rows_of.append((ri, rows))
    arrays = evaluate_modes(runs)
    for (ri, rows), (job, L_r, _) in zip(rows_of, runs):
        t1 = time.perf_counter()
        a = next(arrays)
        tally.evaluate_s += time.perf_counter() - t1
        _keep(plan, tally, plan.group(ni, pi, ri, 0), job, plan.variants[0], L_r, a, position[rows])


def _state_floor_bytes(job: Job, L: Layouts, states: dict) -> np.ndarray:
    """``job_state_floor_bytes(job, L)``, worked out once per chunk for the recompute modes that
    share it: rank 0's model states read the model, the precision and the software stack, not
    the recompute mode (``states``: the chunk's, by the software stack's identity and precision;
    a mode that changes the stack, full recompute's block method, gets its own)."""
    key = (id(job.software), job.precision)
    if key not in states:
        states[key] = (job.software, job_state_floor_bytes(job, L))
    return states[key][1]


def valid_part(cols: dict, ok: np.ndarray, offset: int, wanted: np.ndarray) -> tuple:
    """The valid layouts of a block as ``run_chunk`` takes them: (columns, positions, overlap settings wanted)."""
    return keep(cols, ok), offset + np.flatnonzero(ok), wanted[:, ok]
