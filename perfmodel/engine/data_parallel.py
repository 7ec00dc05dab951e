"""The parameters one GPU of the fullest pipeline stage holds and the step's data-parallel traffic
for them (``perfmodel.formulas.sharding``, ``perfmodel.formulas.traffic.dp_traffic``): a function
of the layout alone, which ``perfmodel.engine.evaluate`` works out once per distinct one."""

from __future__ import annotations

from dataclasses import fields

from perfmodel.engine.job import Job
from perfmodel.formulas import traffic
from perfmodel.formulas.layouts import Layouts, is_row, one_row
from perfmodel.formulas.scalars import as_rows, batch_of_one, floats
from perfmodel.formulas.sharding import stage_params
from perfmodel.formulas.workload import layer_kinds


DATA_PARALLEL_COLUMNS = ("tp", "pp", "vpp", "cp", "ep", "etp", "zero_stage", "dp")
"""What the parameters of a stage and their data-parallel traffic depend on: all of a layout but
its micro-batches (the first guess of ``once_per_shape``)."""


def data_parallel(c: Job, L: Layouts, by_schedule: bool):
    """(dense and expert parameters one GPU of the fullest stage holds, the step's data-parallel
    traffic for them): a function of the layout alone, worked out once per distinct one
    (``by_schedule``: some layout runs a schedule that places its stages otherwise than 1F1B)."""
    if len(L) == 1 and not is_row(L):   # one layout: on its one_row, back as one-element arrays
        dense, expert, dp = data_parallel(c, one_row(L), by_schedule)
        return *as_rows(dense, expert), batch_of_one(dp, tuple(f.name for f in fields(dp)))
    sp_params = stage_params(c.model, L, by_schedule)
    units = len(layer_kinds(c.model)) / floats(L.pp) * c.software.fsdp_collectives_per_layer
    dense, expert = sp_params.max_dense(), sp_params.max_expert()
    return dense, expert, traffic.dp_traffic(dense, expert, L, c.hardware, c.efficiency, units, c.software)
