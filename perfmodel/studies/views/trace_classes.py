"""The predicted step by kernel class, the classes a profiler trace is read into.

==============  ===========================================================================
class           predicted seconds per step (``perfmodel.engine.evaluate`` breakdown)
==============  ===========================================================================
gemm            (compute + recompute) x the GEMMs' share of the layers' op time
attention       (compute + recompute) x the attention kernels' share
elementwise     (compute + recompute) x the memory-bound ops' share, + the optimizer step
communication   exposed communication: tp, cp, ep, fsdp, pp and dp (hidden traffic is not
                counted: it runs beside a compute kernel), and exposed activation-offload copies
idle            no kernel on the GPU: the pipeline bubble, the data wait and the host's
                exposed dispatch (``perfmodel.studies.views.perturb.gpu_idle_s``)
==============  ===========================================================================

The shares come from the layers' op times (``perfmodel.engine.block.block_time``), each layer
kind weighted by its number of layers, forward and backward together: the same split the
timeline uses for forward and backward (``perfmodel.studies.views.timeline``).
"""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.engine.block import block_time
from perfmodel.engine.evaluate import evaluate
from perfmodel.engine.rules import Resolved
from perfmodel.formulas.ops import OpKind
from perfmodel.formulas.workload import layer_kinds, layer_ops
from perfmodel.studies.views.perturb import gpu_idle_s

CLASSES = ("gemm", "attention", "elementwise", "communication", "idle")
COMM_TERMS = ("tp_comm", "cp_comm", "ep_comm", "fsdp_comm", "pp_comm", "dp_comm")
_KIND_CLASS = {OpKind.GEMM: "gemm", OpKind.ATTENTION: "attention", OpKind.MEMORY: "elementwise"}


@dataclass(frozen=True)
class OpShare:
    name: str
    kernel_class: str
    fwd_frac: float
    """Share of the forward's op time (all layers of the rank)."""
    bwd_frac: float


def op_shares(r: Resolved) -> tuple[OpShare, ...]:
    """Each op's share of a layer stack's forward and of its backward (ops of one name summed over
    layer kinds, each kind weighted by its layers)."""
    c, L = r.job, r.layouts
    kinds = layer_kinds(c.model)
    fwd: dict = {}
    bwd: dict = {}
    cls: dict = {}
    for kind in dict.fromkeys(kinds):
        n = sum(1 for k in kinds if k is kind)
        blk = block_time(layer_ops(c.model, kind, c.software), c.model, L, c.seq_length, c.precision, c.hardware,
                         c.efficiency, c.software)
        for op in blk.ops:
            fwd[op.name] = fwd.get(op.name, 0.0) + n * float(op.fwd_s[0])
            bwd[op.name] = bwd.get(op.name, 0.0) + n * float(op.bwd_s[0])
            cls[op.name] = _KIND_CLASS[op.kind]
    f_total, b_total = sum(fwd.values()) or 1.0, sum(bwd.values()) or 1.0
    return tuple(OpShare(name, cls[name], fwd[name] / f_total, bwd[name] / b_total) for name in fwd)


def predicted_classes(r: Resolved) -> dict:
    """{class: predicted seconds per step} (``CLASSES``) and ``step`` (the predicted step)."""
    bd = {k: float(v[0]) for k, v in evaluate(r.job, r.layouts).breakdown.items()}
    kernels = bd["compute"] + bd["recompute"]
    out = {k: 0.0 for k in CLASSES}
    weights = {k: 0.0 for k in ("gemm", "attention", "elementwise")}
    c, L = r.job, r.layouts
    for kind in dict.fromkeys(layer_kinds(c.model)):
        n = sum(1 for k in layer_kinds(c.model) if k is kind)
        blk = block_time(layer_ops(c.model, kind, c.software), c.model, L, c.seq_length, c.precision, c.hardware,
                         c.efficiency, c.software)
        weights["gemm"] += n * float(blk.gemm_fwd_s[0] + blk.gemm_bwd_s[0])
        weights["attention"] += n * float(blk.attn_fwd_s[0] + blk.attn_bwd_s[0])
        weights["elementwise"] += n * float(blk.mem_fwd_s[0] + blk.mem_bwd_s[0])
    total = sum(weights.values()) or 1.0
    for k, w in weights.items():
        out[k] = kernels * w / total
    out["elementwise"] += bd["optimizer"]
    out["communication"] = sum(bd[k] for k in COMM_TERMS) + bd.get("offload", 0.0)
    out["idle"] = gpu_idle_s(bd)
    out["step"] = sum(bd.values())
    return out
