"""The pipeline timeline of a job: the schedule simulation of ``perfmodel.formulas.timeline``
fed with the step model's per-stage times (``perfmodel.engine.evaluate``)."""

from __future__ import annotations

import numpy as np

from perfmodel.engine.block import block_time
from perfmodel.engine.evaluate import evaluate
from perfmodel.engine.rules import Resolved
from perfmodel.formulas.timeline import MAX_MICROBATCHES_DRAWN, Timeline, pipeline_timeline
from perfmodel.formulas.traffic import pp_transfer_s
from perfmodel.formulas.workload import layer_kinds, layer_ops
from perfmodel.spec.schedules import schedule

_COMM = ("tp_comm", "cp_comm", "ep_comm", "fsdp_comm")
_TAIL = ("dp_comm", "optimizer", "overheads", "data_wait")


def scenario_timeline(r: Resolved, max_microbatches: int | None = MAX_MICROBATCHES_DRAWN) -> Timeline:
    """The timeline of a resolved scenario with the step model's per-stage times.

    ``step.evaluate`` gives each stage's per-micro-batch total (first, middle, last stage)
    and the slowest stage's split into compute, recompute and exposed communication. Every
    stage is split in the slowest stage's proportions; compute is split into forward and
    backward by the layer's op times (``perfmodel.engine.block.block_time``), and the backward's weight-gradient
    GEMMs into its own part (``BlockTime.wgrad_s``); recompute and half the exposed
    communication go with the backward. The V schedules hold the head on rank 0 (its second
    chunk is the last stage), so their first and last stage times trade places.
    """
    c, L = r.job, r.layouts
    arr = evaluate(c, L)
    par = r.scenario.parallelism
    p, v, m = par.pp, par.vpp, r.num_microbatches
    per_mb = {k: float(arr.breakdown[k][0]) / m for k in ("compute", "recompute") + _COMM}
    slow_total = sum(per_mb.values()) or 1.0
    kinds = layer_kinds(c.model)
    fwd = bwd = wgrad = 0.0
    for kind in set(kinds):
        n = sum(1 for k in kinds if k is kind)
        blk = block_time(layer_ops(c.model, kind, c.software), c.model, L, c.seq_length, c.precision, c.hardware,
                         c.efficiency, c.software)
        fwd += n * float(blk.fwd_s[0])
        bwd += n * float(blk.bwd_s[0])
        wgrad += n * float(blk.wgrad_s[0])
    fwd_frac = fwd / (fwd + bwd) if fwd + bwd > 0 else 1.0 / 3.0
    wgrad_share = per_mb["compute"] * (wgrad / (fwd + bwd) if fwd + bwd > 0 else 0.0) / slow_total
    comm_share = sum(per_mb[k] for k in _COMM) / slow_total
    fwd_share = per_mb["compute"] * fwd_frac / slow_total
    bwd_share = (per_mb["compute"] * (1 - fwd_frac) + per_mb["recompute"]) / slow_total

    st = arr.stage_s
    first, middle, last = (float(np.asarray(a)[0]) for a in (st.first_s, st.middle_s, st.last_s))
    stage = [first] if p == 1 else [first] + [middle] * (p - 2) + [last]
    if schedule(par.schedule).v_shaped:      # the V's ranks are drawn from its turn
        stage = stage[::-1]
    tail = sum(float(arr.breakdown[k][0]) for k in _TAIL)
    return pipeline_timeline(
        p, v, m,
        fwd_s=[t * fwd_share for t in stage], bwd_s=[t * bwd_share for t in stage],
        fwd_comm_s=[t * comm_share / 2 for t in stage], bwd_comm_s=[t * comm_share / 2 for t in stage],
        p2p_s=float(pp_transfer_s(c.model, L, c.seq_length, c.hardware, c.efficiency)[0]),
        tail_s=tail, max_microbatches=max_microbatches, schedule=par.schedule if p > 1 else None,
        wgrad_s=[t * wgrad_share for t in stage],
    )
