"""The data-parallel parts of a step: the parameters one GPU of the fullest pipeline stage holds
and the step's data-parallel traffic for them (``perfmodel.formulas.sharding.stage_params``,
``perfmodel.formulas.traffic.dp_traffic``), a function of the layout alone (not of its
micro-batches, nor of the recompute mode), worked out once per distinct one
(``perfmodel.engine.distinct``) for ``perfmodel.engine.evaluate``.
"""

from __future__ import annotations

import weakref
from dataclasses import fields

from perfmodel.engine.distinct import MIN_ROWS, once_per_shape
from perfmodel.engine.job import Job, shared_job
from perfmodel.formulas import traffic
from perfmodel.formulas.counts import embedding_params, output_params
from perfmodel.formulas.layouts import Layouts, is_row, one_row
from perfmodel.formulas.scalars import as_rows, batch_of_one, floats
from perfmodel.formulas.sharding import stage_params
from perfmodel.formulas.workload import layer_kinds

DATA_PARALLEL_COLUMNS = ("tp", "pp", "vpp", "cp", "ep", "etp", "zero_stage", "dp")
"""What the parameters of a stage and their data-parallel traffic depend on: all of a layout but
its micro-batches (the first guess of ``once_per_shape``)."""


def _parts(c: Job, L: Layouts, by_schedule: bool):
    """(dense and expert parameters one GPU of the fullest stage holds, the step's data-parallel
    traffic for them): a function of the layout alone, worked out once per distinct one
    (``by_schedule``: some layout runs a schedule that places its stages otherwise than 1F1B)."""
    sp_params = stage_params(c.model, L, by_schedule)
    units = len(layer_kinds(c.model)) / floats(L.pp) * c.software.fsdp_collectives_per_layer
    dense, expert = sp_params.max_dense(), sp_params.max_expert()
    root = (embedding_params(c.model) + output_params(c.model)) / floats(L.tp)   # FSDP2's root group
    return dense, expert, traffic.dp_traffic(dense, expert, root, L, c.hardware, c.efficiency, units, c.software)


_last_data_parallel: tuple = (None, None, None, None)
"""(weak reference to the last batch of two or more layouts, its shared job, by_schedule, its
data-parallel parts): the search's next recompute mode of the same ``Layouts`` object
(``perfmodel.studies.search.stream``) reads them again (they do not read the recompute mode)."""


def data_parallel_parts(c: Job, L: Layouts, by_schedule: bool):
    """``_parts``, worked out once per distinct layout of the columns it reads; a pruned
    study's small batches (``2 <= len(L) < MIN_ROWS``) share one memo per ``shared_job``, as
    ``_per_shape``; the last batch's kept for its next job that shares them."""
    global _last_data_parallel
    if len(L) == 1 and not is_row(L):   # one layout: on its one_row, back as one-element arrays
        dense, expert, dp = _parts(c, one_row(L), by_schedule)
        return *as_rows(dense, expert), batch_of_one(dp, tuple(f.name for f in fields(dp)))
    if len(L) < 2:
        return _parts(c, L, by_schedule)
    job = shared_job(c, recompute=False)
    ref, last_job, last_by, parts = _last_data_parallel
    if ref is not None and ref() is L and last_job is job and last_by == by_schedule:
        return parts
    small = len(L) < MIN_ROWS
    parts = once_per_shape(_parts, job, L, by_schedule, memo=small, min_rows=2,
                           guess=DATA_PARALLEL_COLUMNS + (("schedule",) if by_schedule else ()))
    _last_data_parallel = (weakref.ref(L), job, by_schedule, parts)
    return parts
