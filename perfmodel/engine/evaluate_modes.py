"""Several recompute modes of one job evaluated in one call: recompute as runs of rows.

``evaluate`` costs a few tenths of a millisecond a call whatever its batch (some hundred numpy
calls), most of a small batch's time, and a search evaluates each chunk under every recompute mode. The
modes differ only in each layer's time (``perfmodel.engine.evaluate._layer_time``: its recompute
term, SP's re-gather); so one call takes the modes' layouts one run after another, with each
row's mode as a column of codes (``evaluate_runs``): each distinct layer shape's block of
operations is timed once for every mode, its recompute term and re-gather picked per row, and
everything else (the stages, the bubble, the data-parallel traffic, the overheads) is worked out
once over all the rows; each mode then gets its rows back.

Every step of ``evaluate`` is element-wise over the layouts but a few choices made for the whole
batch (``perfmodel.formulas.pipeline.only_defaults`` of the schedules picks the bubble's closed
form, the pipeline transfers' overlap and how the stages' parameters are counted); one call is
made only where that choice over all the rows is each mode's own, so each row is the same, to the
last bit, as under ``evaluate`` of its mode alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields

import numpy as np

from perfmodel.engine.distinct import joined, once_per_shape
from perfmodel.engine.evaluate import StepArrays, evaluate, evaluate_runs, layer_totals_under
from perfmodel.engine.job import Job, shared_job
from perfmodel.engine.job_memory import job_memory
from perfmodel.formulas.layouts import Layouts
from perfmodel.formulas.memory import MemoryBreakdown
from perfmodel.formulas.pipeline import StageTimes, only_defaults
from perfmodel.formulas.recompute import RECOMPUTE_MODES

_JOB_FIELDS = tuple(f.name for f in fields(Job) if f.name != "recompute")


def _alike(jobs: list[Job]) -> bool:
    """The jobs differ in their recompute mode alone (the same model, hardware, efficiencies and
    software objects, the same numbers)."""
    c = jobs[0]
    return all(getattr(j, f) is getattr(c, f) or getattr(j, f) == getattr(c, f) for j in jobs[1:] for f in _JOB_FIELDS)


def _rows(arrays: StepArrays, start: int, stop: int, memory: MemoryBreakdown) -> StepArrays:
    """The rows ``start:stop`` of ``arrays`` (views), with their own memory."""
    part = slice(start, stop)
    st = arrays.stage_s
    return StepArrays(
        breakdown={k: v[part] for k, v in arrays.breakdown.items()}, memory=memory, fits=arrays.fits[part],
        flop_per_token=arrays.flop_per_token, gemm_s=arrays.gemm_s[part], attention_s=arrays.attention_s[part],
        memory_bound_s=arrays.memory_bound_s[part],
        stage_s=StageTimes(first_s=st.first_s[part], middle_s=st.middle_s[part], last_s=st.last_s[part]))


MAX_ROWS = 16_384
"""Rows one call evaluates at most (the runs taken in turn, as many as fit): the search's chunk
(``perfmodel.studies.search.search.CHUNK``). Past a few thousand rows the work per row outweighs
that per call (the bench's default search, three runs of 9,545-11,132 rows, gained nothing in
one call of 30,222), and one call holds every run's intermediate arrays at once (the bench's
large search, about 16,000 rows a run: peak 173 MB against 123 in one call)."""


def evaluate_modes(runs: list[tuple[Job, Layouts, MemoryBreakdown | None]]) -> Iterator[StepArrays]:
    """``evaluate(job, L, memory)`` of each (job, L, memory) of ``runs``, in turn and the same to the
    last bit: runs taken in turn while their rows come to ``MAX_ROWS`` in one call where the jobs
    differ in their recompute mode alone and the batch-wide choices over all the layouts are each
    run's own (``only_defaults`` of the schedules), else one call each; each call made when its
    first run is asked for (what a caller has folded in is gone by then). ``memory``:
    ``job_memory(job, L)`` where the caller has it (None: worked out here)."""
    start, rows = 0, 0
    for i, (_, L, _) in enumerate(runs):
        if i > start and rows + len(L) > MAX_ROWS:
            yield from _in_one_call(runs[start:i])
            start, rows = i, 0
        rows += len(L)
    yield from _in_one_call(runs[start:])


def _in_one_call(runs: list) -> list[StepArrays]:
    """``evaluate_modes`` of runs in one call where it may (else one each)."""
    jobs = [job for job, _, _ in runs]
    if len(runs) < 2 or not _alike(jobs):
        return [evaluate(job, L, mem) for job, L, mem in runs]
    if len({only_defaults(L.schedule) for _, L, _ in runs}) > 1:   # then not every run's choice over them all
        return [evaluate(job, L, mem) for job, L, mem in runs]
    lengths = [len(L) for _, L, _ in runs]
    L_all = joined([L for _, L, _ in runs], lengths)
    mems = [job_memory(job, L) if mem is None else mem for job, L, mem in runs]
    codes = np.repeat([RECOMPUTE_MODES.index(job.recompute) for job in jobs], lengths)
    shared = shared_job(jobs[0], recompute=False)
    arrays = evaluate_runs(jobs[0], L_all, lambda kind: once_per_shape(layer_totals_under, kind, shared, L_all, codes),
                           joined(mems, lengths))
    ends = np.cumsum(lengths)
    return [_rows(arrays, int(end - n), int(end), mem) for end, n, mem in zip(ends, lengths, mems)]
