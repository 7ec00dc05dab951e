"""A job's peak memory per GPU over its layouts, and the search's fit check: the one place a
job's fields become ``formulas.memory.memory_per_gpu`` arguments (step, search and ``describe``
all call ``job_memory``)."""

from __future__ import annotations

import numpy as np

from perfmodel.engine.job import Job
from perfmodel.formulas.layouts import Layouts
from perfmodel.formulas.memory import COMPONENTS as MEMORY_COMPONENTS
from perfmodel.formulas.memory import MemoryBreakdown, fits_in_memory, memory_per_gpu
from perfmodel.formulas.model_states import first_rank_state_bytes


def job_memory(c: Job, L: Layouts) -> MemoryBreakdown:
    """Peak memory per GPU of the job over its layouts: the one place a job's fields become
    ``memory_per_gpu`` arguments (step, search and ``describe`` all call this)."""
    return memory_per_gpu(c.model, c.seq_length, c.recompute, c.precision, L, c.software)


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
    if state_floor_bytes is None:
        state_floor_bytes = job_state_floor_bytes(job, L)
    could = np.flatnonzero(state_floor_bytes <= job.hardware.gpu.hbm_usable_bytes)
    if could.size == len(L):
        mem = job_memory(job, L)
        return mem, fits_in_memory(mem, job.hardware)
    fit = np.zeros(len(L), dtype=bool)
    parts = {name: np.zeros(len(L)) for name in MEMORY_COMPONENTS}
    if could.size:
        some = job_memory(job, L.take(could))
        fit[could] = fits_in_memory(some, job.hardware)
        for name, values in parts.items():
            values[could] = getattr(some, name)
    return MemoryBreakdown(**parts), fit
