"""Roofline: each operation of a layer placed against the GPU's compute and memory roofs.

==========  ==============================================================================
I           arithmetic intensity = executed FLOPs / HBM bytes moved, FLOP/byte
P           dense tensor-core peak of the op's precision, FLOP/s
B           HBM bandwidth, bytes/s
roof(I)     min(P, I * B)                                   (Williams et al. 2009)
I*          ridge point P / B: below it an op is bound by memory, above by compute
achieved    FLOPs / modelled time of the op (``compute.op_time``)
==========  ==============================================================================

Points are forward passes, per GPU and per micro-batch, at the scenario's sharded shapes
(tensor, context, expert parallelism applied). ``time_s`` is forward + backward, so a chart
can size the points by what they cost. Element-wise ops (norms, residuals, activations)
carry no modelled FLOPs; they come back with ``arithmetic_intensity_flop_per_byte = 0`` and
their achieved bandwidth, and a log-scale chart leaves them out. The *achievable* roofs scale
P by the calibrated large-GEMM efficiency and B by the streaming memory efficiency.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.engine.rules import Resolved
from perfmodel.formulas.compute import gemm_precision, op_time
from perfmodel.formulas.workload import OpKind, head_ops, layer_kinds, layer_ops

INTENSITY_RANGE_FLOP_PER_BYTE = (1.0, 1e5)
"""Span of the roof lines (log scale)."""
NUM_ROOF_POINTS = 60


@dataclass(frozen=True)
class Roofline:
    points: tuple[dict, ...]
    """op, group, kind, precision, arithmetic_intensity_flop_per_byte, achieved_flop_per_s,
    achieved_bytes_per_s, flop, bytes, time_s, bound ('compute' | 'memory')."""
    roofs: tuple[dict, ...]
    """roof (label), precision, level ('peak' | 'achievable'),
    arithmetic_intensity_flop_per_byte, flop_per_s."""
    hbm_bytes_per_s: float
    ridge_flop_per_byte: dict
    """precision -> P / B at peak."""


def _roof_rows(label: str, precision: str, level: str, peak: float, bw: float) -> list[dict]:
    lo, hi = np.log10(INTENSITY_RANGE_FLOP_PER_BYTE)
    grid = np.logspace(lo, hi, NUM_ROOF_POINTS)
    grid = np.unique(np.append(grid, peak / bw))   # the ridge as a vertex
    return [dict(roof=label, precision=precision, level=level, arithmetic_intensity_flop_per_byte=float(i),
                 flop_per_s=float(min(peak, i * bw))) for i in grid]


def roofline(r: Resolved) -> Roofline:
    """Roofline rows for a resolved scenario (``perfmodel.engine.rules.resolve``): its own
    layout, efficiencies and software stack, the ones its prediction uses."""
    job, L = r.job, r.layouts
    hw, m, eff, sw = job.hardware, job.model, job.efficiency, job.software
    bw = hw.gpu.hbm_bandwidth_bytes_per_s
    bw_achievable = bw * eff.memory_efficiency
    kinds = sorted(set(layer_kinds(m)), key=lambda k: k.value)
    groups = [(f"{k.value} layer", layer_ops(m, k, sw)) for k in kinds] + [("output", head_ops(m, sw))]
    points = []
    used_precisions = set()
    for group, ops in groups:
        for op in ops:
            t = op_time(op, m, L, job.seq_length, job.precision, hw, eff, sw)
            flop, nbytes = float(t.fwd_flop[0]), float(t.fwd_bytes[0])
            if flop == 0 and nbytes == 0:
                continue   # an op this layout does not run (sort by local expert with one expert per GPU)
            fwd_s = float(t.fwd_s[0])
            if op.kind is OpKind.GEMM:
                prec = gemm_precision(op, job.precision)
            else:
                prec = "bf16"
            bound = "memory" if bool(t.fwd_memory_bound[0]) else "compute"
            if flop > 0:
                used_precisions.add(prec)
            points.append(dict(
                op=op.name, group=group, kind=op.kind.value, precision=prec,
                arithmetic_intensity_flop_per_byte=flop / nbytes if nbytes > 0 else 0.0,
                achieved_flop_per_s=flop / fwd_s if fwd_s > 0 else 0.0,
                achieved_bytes_per_s=nbytes / fwd_s if fwd_s > 0 else 0.0,
                flop=flop, bytes=nbytes, time_s=fwd_s + float(t.bwd_s[0]), bound=bound,
            ))
    roofs, ridge = [], {}
    for prec in sorted(used_precisions or {job.precision}):
        peak = hw.gpu.peak_flop_per_s(prec)
        g = eff.gemm.get(prec) or eff.gemm["bf16"]
        roofs += _roof_rows(f"{prec} peak", prec, "peak", peak, bw)
        roofs += _roof_rows(f"{prec} achievable", prec, "achievable", peak * g.efficiency_max, bw_achievable)
        ridge[prec] = peak / bw
    return Roofline(points=tuple(points), roofs=tuple(roofs), hbm_bytes_per_s=bw, ridge_flop_per_byte=ridge)
