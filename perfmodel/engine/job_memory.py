"""A job's peak memory per GPU over its layouts, and the search's fit check: the one place a
job's fields become ``formulas.memory.memory_per_gpu`` arguments (step, search and ``describe``
all call ``job_memory``)."""

from __future__ import annotations

import numpy as np

from perfmodel.engine.job import Job
from perfmodel.formulas.layouts import Layouts
from perfmodel.formulas.memory import COMPONENTS as MEMORY_COMPONENTS
from perfmodel.formulas.memory import MemoryBreakdown, fits_in_memory, memory_per_gpu_modes
from perfmodel.formulas.model_states import first_rank_state_bytes


def job_memory(c: Job, L: Layouts) -> MemoryBreakdown:
    """Peak memory per GPU of the job over its layouts: the one place a job's fields become
    ``memory_per_gpu`` arguments (step, search and ``describe`` all call this)."""
    return job_memory_modes((c,), L)[0]


def job_memory_modes(jobs: tuple[Job, ...], L: Layouts) -> tuple[MemoryBreakdown, ...]:
    """``job_memory`` of each of ``jobs``, which differ in their recompute mode alone (the same
    model, sequence length, precision, software stack and hardware objects): the model states
    and workspace worked out once (``memory_per_gpu_modes``)."""
    c = jobs[0]
    if not all(j.model is c.model and j.seq_length == c.seq_length and j.precision == c.precision
               and j.software is c.software and j.hardware is c.hardware for j in jobs):
        raise ValueError("job_memory_modes: the jobs differ in more than their recompute mode")
    return memory_per_gpu_modes(c.model, c.seq_length, tuple(j.recompute for j in jobs), c.precision, L, c.software)


def job_state_floor_bytes(c: Job, L: Layouts) -> np.ndarray:
    """A lower bound of ``job_memory(c, L).total`` from the model states of pipeline rank 0 alone
    (``model_states.first_rank_state_bytes``), for the search to skip the rest of the memory of
    layouts that cannot fit."""
    return first_rank_state_bytes(c.model, c.precision, L, c.software)


def memory_and_fit(job: Job, L: Layouts, state_floor_bytes: np.ndarray | None = None
                   ) -> tuple[MemoryBreakdown, np.ndarray]:
    """Each layout's peak memory and whether it fits (the search's check): the memory is worked out
    only where the model states of pipeline rank 0 alone fit (``job_state_floor_bytes``, or
    ``state_floor_bytes`` where the caller has it already: the search's recompute modes share
    it), and is zeros elsewhere, where no layout fits."""
    return memory_and_fit_modes((job,), L, state_floor_bytes)[0]


def memory_and_fit_modes(jobs: tuple[Job, ...], L: Layouts, state_floor_bytes: np.ndarray | None = None
                         ) -> tuple[tuple[MemoryBreakdown, np.ndarray], ...]:
    """``memory_and_fit`` of each job of ``jobs``, the same to the last bit: jobs that differ in
    their recompute mode alone (the same model, sequence length, precision, software stack and
    hardware objects), whose model states and workspace are worked out once
    (``memory_per_gpu_modes``)."""
    c = jobs[0]
    if state_floor_bytes is None:
        state_floor_bytes = job_state_floor_bytes(c, L)
    could = np.flatnonzero(state_floor_bytes <= c.hardware.gpu.hbm_usable_bytes)
    if could.size == len(L):
        return tuple((mem, fits_in_memory(mem, c.hardware)) for mem in job_memory_modes(jobs, L))
    some = job_memory_modes(jobs, L.take(could)) if could.size else (None,) * len(jobs)
    out = []
    for mem in some:
        fit = np.zeros(len(L), dtype=bool)
        parts = {name: np.zeros(len(L)) for name in MEMORY_COMPONENTS}
        if mem is not None:
            fit[could] = fits_in_memory(mem, c.hardware)
            for name, values in parts.items():
                values[could] = getattr(mem, name)
        out.append((MemoryBreakdown(**parts), fit))
    return tuple(out)
