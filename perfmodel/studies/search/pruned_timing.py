"""The timing half of ``perfmodel.studies.search.pruned``: each GPU count's (layout, recompute
mode) pairs taken lowest floor first, in rounds across the counts searched together, crossed with
the zero stages that hold their model states, checked for memory and timed while their floor can
beat the count's k-th best (``best_per_count``, the module's entry point)."""

from __future__ import annotations

import time
from dataclasses import dataclass, fields

import numpy as np

from perfmodel.engine import distinct
from perfmodel.engine.evaluate import prime
from perfmodel.engine.floor import floor_from_parts
from perfmodel.engine.job import shared_job
from perfmodel.engine.job_memory import job_state_floor_bytes, memory_and_fit
from perfmodel.formulas.layouts import Layouts, data_parallel_size, layouts_for, micro_batches
from perfmodel.formulas.memory import MemoryBreakdown
from perfmodel.studies.search.pruned import (
    FIRST_PAIRS,
    MAX_PAIRS,
    PREFIX_COLUMNS,
    Unprunable,
    _all_parts,
    _Count,
    _count,
)
from perfmodel.studies.search.stream import DOES_NOT_FIT, Plan, Tally, _jobs, time_rows

PRUNED_CHUNK = 65_536
"""Layouts whose memory one call checks at most (``search.PRUNED_CHUNK``)."""


def best_per_count(plans: list[Plan], tallies: list[Tally], progress=None) -> list[float]:
    """Search each plan (one GPU count each, one overlap setting, ``plan.prune``) into its tally,
    sharing the floor's per-shape parts between the counts whose jobs share them (the same
    ``shared_job``: the same hardware as placed); returns the seconds each took (the shared
    work split evenly). Raises ``Unprunable`` (the tallies then half-filled) where the floor or
    the model states read what they are not keyed by."""
    counts = [_count(p, t) for p, t in zip(plans, tallies)]
    t0 = time.perf_counter()
    _all_parts(counts)
    _rounds(counts)
    each = (time.perf_counter() - t0) / max(len(counts), 1)
    out = []
    for k, c in enumerate(counts):
        out.append(c.elapsed_s + each)
        if progress is not None:
            progress(k + 1, len(counts))
    return out


def _states(c: _Count, job, cache: dict) -> np.ndarray:
    """Whether rank 0's model states fit under each zero stage (rows) of each prefix row (columns)
    of ``job``'s layouts (``job_state_floor_bytes``; False for prefix rows with no valid layout):
    they read the prefix and the zero stage, not the micro-batch size (checked), and not the
    recompute mode unless it changes the software stack (``cache``: by the stack's identity and
    the precision, as ``stream._state_floor_bytes``)."""
    key = (id(job.software), job.precision)
    if key not in cache:
        nz, num_prefix = len(c.zero_stages), len(c.prefix["tp"])
        used = np.flatnonzero(np.bincount(c.row, minlength=num_prefix))
        at = np.tile(used, nz)
        zero = np.repeat(np.asarray(c.zero_stages, dtype=np.int64), used.size)
        L = layouts_for(c.plan.counts[0], c.plan.scenario.global_batch_size,
                        **{k: c.prefix[k][at] for k in PREFIX_COLUMNS}, mbs=np.ones(at.size, dtype=np.int64),
                        zero_stage=zero)
        seen = distinct._recording(L, slice(None))
        del L
        state = np.asarray(job_state_floor_bytes(job, seen), dtype=float)
        if not object.__getattribute__(seen, "read") <= set(PREFIX_COLUMNS) | {"zero_stage", "dp"}:
            raise Unprunable
        fit = np.zeros((nz, num_prefix), dtype=bool)
        fit[:, used] = (state <= job.hardware.gpu.hbm_usable_bytes).reshape(nz, used.size)
        cache[key] = (job.software, fit)
    return cache[key][1]


@dataclass
class _Pairs:
    """One count's (valid layout, precision and recompute mode) pairs that some zero stage holds
    the model states of, with their floors: those not yet checked."""

    floor: np.ndarray
    """float32, rounded down: a floor still, in half the memory."""
    which: np.ndarray
    """Index in ``jobs`` of each pair."""
    rows: np.ndarray
    """Valid layout of each pair."""
    jobs: dict
    """(precision, recompute) -> (index, the job, its copy under the overlap setting, the search
    group, whether rank 0's model states fit: ``_states``)."""


def _pairs(c: _Count) -> _Pairs | None:
    """The pairs of one count, with their floors (``floor_from_parts``); the pairs none of whose
    zero stages holds rank 0's model states are counted as not fitting and go no further."""
    plan, tally = c.plan, c.tally
    N, gbs = plan.counts[0], plan.scenario.global_batch_size
    if not len(c.row):
        return None
    pp, vpp, sched = c.column("pp"), c.column("vpp"), c.column("schedule")
    num_mb = micro_batches(gbs, c.column("mbs"), data_parallel_size(N, c.column("tp"), pp, c.column("cp")))
    floors, which, rows = [], [], []
    jobs, cache = {}, {}
    nz = len(c.zero_stages)
    for (pi, ri), (per_layer, last, shape) in c.parts.items():
        job, job_vs = _jobs(plan, tally, 0, pi, ri)
        fit = _states(c, job, cache)
        at = c.valid_rows(pi)
        held = fit.sum(axis=0)[c.row[at]]               # zero stages whose states fit, per layout
        tally.rejected[DOES_NOT_FIT] += int(nz * at.size - held.sum())
        at = at[held > 0]
        s = shape[at]
        f64 = floor_from_parts(job, per_layer[s], last[s], pp[at], num_mb[at], vpp[at], sched[at])
        f32 = f64.astype(np.float32)
        floors.append(np.where(f32 > f64, np.nextafter(f32, np.float32(-np.inf)), f32))
        which.append(np.full(at.size, len(jobs), dtype=np.int8))
        rows.append(at.astype(np.int32))
        jobs[pi, ri] = (len(jobs), job, job_vs[0], plan.group(0, pi, ri, 0), fit)
    return _Pairs(np.concatenate(floors), np.concatenate(which), np.concatenate(rows), jobs)


def _next_batch(c: _Count, p: _Pairs, size: int) -> np.ndarray | None:
    """(the indices in ``p``, after it dropped those that cannot beat the count's k-th best, of)
    the next ``size`` pairs, lowest floor first; None when no pair can beat it."""
    bound = c.tally.bound(c.plan)
    if np.isfinite(bound):
        alive = np.flatnonzero(p.floor <= bound)
        if alive.size < p.floor.size:
            p.floor, p.which, p.rows = p.floor[alive], p.which[alive], p.rows[alive]
    if not p.floor.size:
        return None
    if p.floor.size <= size:
        out = (p.floor, p.which, p.rows)
        p.floor, p.which, p.rows = p.floor[:0], p.which[:0], p.rows[:0]
        return out
    part = np.argpartition(p.floor, size - 1)
    batch, rest = part[:size], part[size:]
    out = (p.floor[batch], p.which[batch], p.rows[batch])
    p.floor, p.which, p.rows = p.floor[rest], p.which[rest], p.rows[rest]
    return out


def _rounds(counts: list[_Count]) -> None:
    """Every count's pairs, lowest floor first, in batches growing 4x while their floor can beat
    the count's k-th best: each round takes one batch of every count, checks the memory of each
    recompute mode's layouts of every count at once (it does not depend on the GPU count) and
    works out the layer shapes the timing needs once per hardware as placed (``evaluate.prime``)."""
    pairs = [_pairs(c) for c in counts]
    keys = list(dict.fromkeys(k for c in counts for k in c.parts))
    size = FIRST_PAIRS
    while True:
        picked = [(c, p, b) for c, p in zip(counts, pairs) if p is not None
                  for b in [_next_batch(c, p, size)] if b is not None]
        if not picked:
            return
        for key in keys:
            items = []
            for c, p, (floor, which, rows) in picked:
                if key not in p.jobs:
                    continue
                j, job, job_v, group, fit = p.jobs[key]
                mine = which == j
                bound = c.tally.bound(c.plan)
                if np.isfinite(bound):
                    mine &= floor <= bound
                if mine.any():
                    items.append((c, job, job_v, group, *_layouts(c, fit, rows[mine])))
            if items:
                _check_and_time(items)
        size = min(4 * size, MAX_PAIRS)


def _layouts(c: _Count, fit: np.ndarray, rows: np.ndarray):
    """(layouts, their places in the enumeration) of valid layouts ``rows`` under each zero stage
    that holds their model states (``fit``), in the order of the enumeration."""
    zi, k = np.nonzero(fit[:, c.row[rows]])
    position = c.positions(rows[k], zi)
    order = np.argsort(position, kind="stable")
    zi, at, position = zi[order], rows[k[order]], position[order]
    zero = np.asarray(c.zero_stages, dtype=np.int64)[zi]
    L = layouts_for(c.plan.counts[0], c.plan.scenario.global_batch_size,
                    **{name: c.column(name, at) for name in PREFIX_COLUMNS}, mbs=c.column("mbs", at), zero_stage=zero)
    return L, position


def _joined(Ls: list[Layouts]) -> Layouts:
    """The layouts of ``Ls`` one after another (``distinct.joined``); one of them as it is."""
    return Ls[0] if len(Ls) == 1 else distinct.joined(Ls, [len(L) for L in Ls])


def _same_memory(a, b) -> bool:
    """Whether two jobs' memory is the same function of the layouts (``job_memory``)."""
    return (a.model is b.model and a.seq_length == b.seq_length and a.recompute == b.recompute
            and a.precision == b.precision and a.hardware.gpu is b.hardware.gpu
            and (a.software is b.software or a.software == b.software))


def _check_and_time(items: list) -> None:
    """Each item's layouts (one count's, of one precision and recompute mode): memory checked,
    with every item whose job's memory is the same function of the layouts at once; the layer
    shapes of those that fit worked out once per hardware as placed; then timed, count by count."""
    done = []
    while items:
        job0, total = items[0][1], 0
        same = []
        for it in items:       # at most about ``PRUNED_CHUNK`` layouts a call
            if _same_memory(it[1], job0) and (not same or total + len(it[4]) <= PRUNED_CHUNK):
                same.append(it)
                total += len(it[4])
        items = [it for it in items if not any(it is x for x in same)]
        L = _joined([it[4] for it in same])
        mem, fits = memory_and_fit(job0, L, np.zeros(len(L)))      # their model states fit (``_states``)
        at = 0
        for it in same:
            n = len(it[4])
            done.append((it, MemoryBreakdown(*(getattr(mem, f.name)[at:at + n] for f in fields(MemoryBreakdown))),
                         fits[at:at + n]))
            at += n
    by_shared: dict = {}
    for (c, job, _, _, L, _), _, fits in done:
        c.tally.rejected[DOES_NOT_FIT] += int((~fits).sum())
        c.tally.num_fit += int(fits.sum())
        if fits.any():
            shared = shared_job(job, recompute=True)
            by_shared.setdefault(id(shared), (shared, job, []))[2].append(L.take(np.flatnonzero(fits)))
    for _, job, Ls in by_shared.values():
        if sum(len(L) for L in Ls) >= 2 * len(Ls):      # else each batch is as quick alone
            prime(job, _joined(Ls))
    for (c, job, job_v, group, L, position), mem, fits in done:
        if fits.any():
            time_rows(c.plan, c.tally, group, job_v, c.plan.variants[0], L, mem, np.flatnonzero(fits), position)
