"""One layer's operations timed together: each operation's time (``perfmodel.formulas.compute.op_time``)
worked out once per distinct shape of the batch (``perfmodel.engine.distinct``), slowed by the SMs the
stack reserves, and summed by kind into a ``BlockTime`` with the host's dispatch count.

It lives in the engine, not in ``formulas``, because it combines a formula with the engine's
per-shape cache.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import replace

import numpy as np

from perfmodel.engine.distinct import once_per_shape
from perfmodel.engine.job import Job
from perfmodel.formulas.compute import BACKWARD_HOST_OPS_OVER_FORWARD, BlockTime, host_dispatched, op_time
from perfmodel.formulas.layouts import Layouts, is_row, one_row
from perfmodel.formulas.overlap import on_fewer_sms, reserved_sm_scale
from perfmodel.formulas.scalars import batch_of_one
from perfmodel.formulas.workload import Op, OpKind
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.software import SoftwareStack

OP_TIMES = ("fwd_s", "bwd_s", "fwd_flop", "fwd_bytes", "fwd_memory_bound", "extra_launches", "wgrad_s", "cast_fwd_s",
            "cast_bwd_s")
"""The fields of an ``OpTime`` that ``op_time`` gives as arrays over layouts (numbers on a ``one_row``)."""
BLOCK_TOTALS = ("gemm_fwd_s", "gemm_bwd_s", "attn_fwd_s", "attn_bwd_s", "mem_fwd_s", "mem_bwd_s", "extra_launches",
                "wgrad_s")
"""The fields of a ``BlockTime`` that are arrays over layouts (numbers on a ``one_row``)."""
_shared: dict | None = None
"""While ``blocks_shared`` holds: (ids of ``block_time``'s arguments) -> (the arguments, its value)."""


@contextmanager
def blocks_shared():
    """Within it, ``block_time`` of the same operations on the same ``Layouts`` object (and the
    same model, sequence length, precision, hardware, efficiencies and stack objects) is worked
    out once: the recompute modes of a search time the same blocks (what differs is what they
    add to them), and one caller may work out several modes' parts of one batch in turn."""
    global _shared
    outer, _shared = _shared, ({} if _shared is None else _shared)
    try:
        yield
    finally:
        _shared = outer


def block_time(ops: tuple[Op, ...], model: ModelSpec, layouts: Layouts, seq_length: int,
               precision: str, hw: HardwareSpec, eff: Efficiencies, sw: SoftwareStack) -> BlockTime:
    if _shared is None:
        return _block_time(ops, model, layouts, seq_length, precision, hw, eff, sw)
    args = (ops, model, layouts, seq_length, precision, hw, eff, sw)
    key = tuple(map(id, args))
    hit = _shared.get(key)
    if hit is None or not all(a is b for a, b in zip(hit[0], args)):
        hit = _shared[key] = (args, _block_time(*args))
    return hit[1]


def _block_time(ops: tuple[Op, ...], model: ModelSpec, layouts: Layouts, seq_length: int,
                precision: str, hw: HardwareSpec, eff: Efficiencies, sw: SoftwareStack) -> BlockTime:
    if len(layouts) == 1:   # one layout: on floats (``one_row``), nothing to group
        row = one_row(layouts)
        times = tuple(op_time(op, model, row, seq_length, precision, hw, eff, sw) for op in ops)
        if not is_row(layouts):   # asked on arrays: each operation's numbers as one-element arrays
            times = tuple(batch_of_one(t, OP_TIMES) for t in times)
    else:
        times = tuple(once_per_shape(op_time, op, model, layouts, seq_length, precision, hw, eff, sw) for op in ops)
    times = on_fewer_sms(times, reserved_sm_scale(hw.gpu.num_sms, sw.moe_comm_reserved_sms))
    zero = 0.0 if is_row(layouts) else np.zeros(len(layouts))
    eager, graphs = host_dispatched(times, sw)

    def total(kind, attr):
        return sum((getattr(t, attr) for t in times if t.kind is kind), zero)

    return BlockTime(
        gemm_fwd_s=total(OpKind.GEMM, "fwd_s"), gemm_bwd_s=total(OpKind.GEMM, "bwd_s"),
        attn_fwd_s=total(OpKind.ATTENTION, "fwd_s"), attn_bwd_s=total(OpKind.ATTENTION, "bwd_s"),
        mem_fwd_s=total(OpKind.MEMORY, "fwd_s"), mem_bwd_s=total(OpKind.MEMORY, "bwd_s"),
        host_ops=(1 + BACKWARD_HOST_OPS_OVER_FORWARD) * sum(t.host_ops_fwd for t in eager) + graphs,
        extra_launches=sum((t.extra_launches for t in eager), zero),
        ops=times, wgrad_s=sum((t.wgrad_s for t in times), zero),
    )


def block_totals(ops, c: Job, L: Layouts) -> BlockTime:
    """``block_time`` of ``ops`` without the rows of each operation (as ``evaluate._layer_totals``)."""
    blk = block_time(ops, c.model, L, c.seq_length, c.precision, c.hardware, c.efficiency, c.software)
    return replace(blk, ops=())
