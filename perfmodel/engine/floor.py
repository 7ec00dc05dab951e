"""A floor under the step time, for the search to skip layouts that cannot be among its best."""

from __future__ import annotations

import numpy as np

from perfmodel.engine.evaluate import block_totals
from perfmodel.engine.job import Job
from perfmodel.formulas.distinct import once_per_shape
from perfmodel.formulas.layouts import Layouts
from perfmodel.formulas.workload import LayerKind, layer_kinds, layer_ops

FLOOR_MARGIN = 1e-9
"""Relative margin of ``step_time_floor_s`` below the bound, so that rounding in the sums of
the step (a few units in the 16th digit) never lifts the floor above the step."""


def step_time_floor_s(c: Job, L: Layouts) -> np.ndarray:
    """A lower bound of ``evaluate(c, L).step_time_s`` for a small part of its work, so that the
    search can skip layouts that cannot be among its best: every part of a step is at least
    zero, and the busiest pipeline rank computes at least the average share of the decoder
    layers in every micro-batch, so a step lasts at least

        micro-batches x (l / pp) x the compute of one layer (fwd + bwd, layers weighted by kind).

    The engine's stage times meet it: the first stage holds l / pp layers (even split) and the
    slowest is at least the first, and an explicit layout's slowest rank at least the mean."""
    m, sw = c.model, c.software
    kinds = layer_kinds(m)
    compute = 0.0
    for kind in (LayerKind.DENSE, LayerKind.MOE):
        count = sum(1 for k in kinds if k is kind)
        if count:
            blk = once_per_shape(block_totals, layer_ops(m, kind, sw), c, L, memo=True)
            compute = compute + (blk.fwd_s + blk.bwd_s) * (count / len(kinds))
    return (1.0 - FLOOR_MARGIN) * L.num_mb * (len(kinds) / L.pp.astype(float)) * compute
