"""A floor under the step time, for the search to skip layouts that cannot be among its best."""

from __future__ import annotations

import numpy as np

from perfmodel.engine.block import block_totals
from perfmodel.engine.distinct import once_per_shape
from perfmodel.engine.evaluate import layer_parts
from perfmodel.engine.job import Job
from perfmodel.engine.job import _shared_jobs  # noqa: F401  (the jobs the floors share, kept there)
from perfmodel.engine.job import shared_job as _shared
from perfmodel.engine.stages import total
from perfmodel.formulas import pipeline
from perfmodel.formulas.layouts import Layouts
from perfmodel.formulas.workload import LayerKind, head_ops, layer_kinds, layer_ops, mtp_extra_ops, mtp_layer_kind

FLOOR_MARGIN = 1e-9
"""Relative margin of the floors below their bounds, so that rounding in the sums of the step
(a few units in the 16th digit) never lifts a floor above the step."""
FLOOR_MEMO_ROWS = 1 << 18
"""Layer shapes whose floor parts are kept per job (two numbers and a key of a few columns a
row, 20 MB at most): every GPU count of a hardware type shares them
(``perfmodel.engine.job.shared_job``)."""


def _kind_shares(c: Job):
    """(layer kind, its share of the decoder layers) for each kind the model has."""
    kinds = layer_kinds(c.model)
    for kind in (LayerKind.DENSE, LayerKind.MOE):
        count = sum(1 for k in kinds if k is kind)
        if count:
            yield kind, count / len(kinds)


def _layer_compute_s(c: Job, L: Layouts):
    """One decoder layer's compute per micro-batch, fwd + bwd, layers weighted by kind."""
    out = 0.0
    for kind, share in _kind_shares(c):
        blk = block_totals(layer_ops(c.model, kind, c.software), c, L)
        out = out + (blk.fwd_s + blk.bwd_s) * share
    return out


def compute_floor_s(c: Job, L: Layouts) -> np.ndarray:
    """A lower bound of ``evaluate(c, L).step_time_s`` from the compute alone, the same under every
    recompute and overlap setting: the busiest pipeline rank computes at least the average
    share of the decoder layers in every micro-batch, so a step lasts at least

        micro-batches x (l / pp) x the compute of one layer (fwd + bwd, layers weighted by kind)

    (``step_time_floor_s`` without the recompute, the traffic, the output layer and the bubble)."""
    compute = once_per_shape(_layer_compute_s, _shared(c, recompute=False), L, memo=True, memo_rows=FLOOR_MEMO_ROWS)
    return (1.0 - FLOOR_MARGIN) * L.num_mb * (len(layer_kinds(c.model)) / L.pp.astype(float)) * compute


def _floor_parts(c: Job, L: Layouts):
    """(one decoder layer's time per micro-batch without its ZeRO-3 traffic, layers weighted by
    kind; what the last pipeline rank adds to its layers: the output layer and MTP modules)."""
    m, sw = c.model, c.software
    parts = {kind: total(layer_parts(kind, c, L, steady=True)) for kind, _ in _kind_shares(c)}
    per_layer = sum(parts[kind] * share for kind, share in _kind_shares(c))
    head = block_totals(head_ops(m, sw), c, L)
    last = head.fwd_s + head.bwd_s
    if m.mtp_layers:
        kind = mtp_layer_kind(m)
        layer = parts[kind] if kind in parts else total(layer_parts(kind, c, L, steady=True))
        proj = block_totals(mtp_extra_ops(m), c, L)
        last = last + m.mtp_layers * (layer + proj.fwd_s + proj.bwd_s + head.fwd_s + head.bwd_s)
    return per_layer, last


def step_time_floor_s(c: Job, L: Layouts) -> np.ndarray:
    """A lower bound of ``evaluate(c, L).step_time_s`` for a part of its work, so that the search
    can skip layouts that cannot be among its best. With t = (l / p) x one layer's time per
    micro-batch (layers weighted by kind: compute, recompute and the exposed TP, CP and EP
    traffic, the per-layer part ``evaluate`` sums, without the ZeRO-3 gathers, which depend on
    the data-parallel degree), every other part of a step being at least zero:

        even split:  m (t + output layer + MTP modules) + [1F1B, interleaved] (p - 1) t / v
        explicit ``pipeline_layout``:  m t

    Even split (``perfmodel.engine.stages.even_stages``): the first rank of p > 1 runs t (plus
    its ZeRO-3 gathers), the last t plus the output layer and the MTP modules, and the slowest
    rank is one of them, at least the last; the bubble of 1F1B and interleaving, (sum of the
    ranks - slowest) / v, is then at least (p - 1) t / v (0 at p = 1; the other schedules' is
    taken as 0). An explicit layout's slowest rank is at least the mean of the ranks, which
    share the l layers. Worked out once per distinct layer shape (``once_per_shape``)."""
    per_layer, last = floor_parts(c, L)
    return floor_from_parts(c, per_layer, last, L.pp, L.num_mb, L.vpp, L.schedule)


def floor_parts(c: Job, L: Layouts, memo: bool = True):
    """(one decoder layer's time per micro-batch, layers weighted by kind; what the last pipeline
    rank adds) of each layout, ``step_time_floor_s``'s per-shape parts, worked out once per
    distinct layer shape and, with ``memo``, kept for the next call (``once_per_shape``)."""
    return once_per_shape(_floor_parts, _shared(c, recompute=True), L, memo=memo, memo_rows=FLOOR_MEMO_ROWS)


def floor_from_parts(c: Job, per_layer, last, pp, num_mb, vpp, schedule) -> np.ndarray:
    """``step_time_floor_s`` from its per-shape parts (``floor_parts``) and the layouts' pipeline
    degree, micro-batches, virtual stages and schedule (arrays of one length)."""
    pp = pp.astype(float)
    stage = (len(layer_kinds(c.model)) / pp) * per_layer
    num_mb = num_mb.astype(float)
    if c.software.pipeline_stages is not None:
        return (1.0 - FLOOR_MARGIN) * num_mb * stage
    linear = pipeline.schedule_property(schedule, "megatron_order")
    bubble = np.where(linear, (pp - 1.0) * stage / vpp.astype(float), 0.0)
    return (1.0 - FLOOR_MARGIN) * (num_mb * (stage + last) + bubble)


FIRST_BATCH = 1024
"""Layouts timed first, lowest floors first (``by_floor``): enough for the best so far to be
near the best, so that the floor skips most of the rest; each next batch is 4 times larger.
A batch's memory check and timing cost a few milliseconds of calls whatever its size up to a few
thousand layouts: ``size`` for DeepSeek-V3 over four hardware types took 0.93 of the CPU time at
1,024 as at 256 (0.96 at 4,096, 1.06 at 64), with the same rows."""


def by_floor(floor_s: np.ndarray, bound):
    """Batches of the indices of ``floor_s``, lowest floors first (each batch in index order),
    while their floors are at most ``bound()``, asked again before each batch (the search's
    k-th best, which the batches before may have lowered)."""
    order = np.argsort(floor_s, kind="stable")
    ranked = floor_s[order]
    start, size = 0, FIRST_BATCH
    while start < len(order):
        stop = min(int(np.searchsorted(ranked, bound(), side="right")), start + size)
        if stop <= start:
            return
        yield np.sort(order[start:stop])
        start, size = stop, 4 * size
