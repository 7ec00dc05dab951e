"""One DualPipe chunk pair of MoE layers, as a kernel trace shows it.

DualPipe (DeepSeek-V3 report, arXiv 2412.19437, sec. 3.2.1 and fig. 4) pairs the forward chunk of
one micro-batch with the backward chunk of another on the same rank: the expert-parallel dispatch
and combine of each chunk run on their own stream beside the other chunk's compute. For ``n``
MoE layers per chunk:

==============  =================================================================================
C_F, C_B        forward and backward compute of the n layers (the backward with its recompute)
X_F, X_B        dispatch + combine of the forward and of the backward (``traffic.ep_layer_s``)
sigma           share of its rate the compute loses beside a collective (``perfmodel.formulas.overlap``)
span            C_F + C_B + exposed(X_F, C_B) + exposed(X_B, C_F): each chunk's communication
                hides behind the other chunk's compute, min(X, C) of it, the rest exposed
==============  =================================================================================

Compute is split as a profiler trace classifies kernels: GEMMs (dense and grouped), attention
(the fused kernel, forward and backward), and the rest (norms, rotary, router, permutation,
activation, quantisation casts). The DeepSeek-V3 trace of ``calibration/data/
deepseek_v3_train_trace.yaml`` is the reference this study is checked against.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.engine.block import block_time
from perfmodel.engine.rules import Resolved
from perfmodel.formulas import traffic
from perfmodel.formulas.overlap import exposed_s
from perfmodel.formulas.recompute import module_op_shares
from perfmodel.formulas.workload import LayerKind, OpKind, layer_ops
from perfmodel.spec.errors import InputError
from perfmodel.spec.software import selective_modules

KIND_CLASS = {OpKind.GEMM: "gemm", OpKind.ATTENTION: "attention", OpKind.MEMORY: "other"}
"""How a profiler trace names each kind of kernel (calibration/data/deepseek_v3_train_trace.yaml)."""


@dataclass(frozen=True)
class ChunkPair:
    """Seconds of one forward chunk paired with one backward chunk of ``num_layers`` MoE layers."""

    num_layers: int
    gemm_s: float
    attention_s: float
    other_s: float
    ep_comm_s: float
    """Dispatch + combine of both chunks, on the communication stream."""
    exposed_ep_s: float
    """The part of it no compute of the other chunk hides, and the compute it slows."""
    slowed_frac: float
    """Share of the compute that runs beside the other chunk's communication, on the SMs the
    communication kernels leave it: min(X / (1 + slowdown), C) of each chunk's compute C."""
    slowdown: float
    """``Efficiencies.overlap_compute_slowdown``: how much longer that compute takes."""

    @property
    def compute_s(self) -> float:
        return self.gemm_s + self.attention_s + self.other_s

    @property
    def span_s(self) -> float:
        return self.compute_s + self.exposed_ep_s

    def as_traced(self) -> dict:
        """Seconds per class as a profiler sees its kernels: compute beside the communication runs
        ``1 + slowdown`` times longer (its kernels hold SMs), the rest at full rate. The classes sum
        to no more than the span; what is left of it is the compute stream waiting on the
        communication."""
        stretch = 1.0 + self.slowdown * self.slowed_frac
        return {"gemm": self.gemm_s * stretch, "attention": self.attention_s * stretch,
                "other": self.other_s * stretch, "ep_comm": self.ep_comm_s, "span": self.span_s}


def chunk_pair(r: Resolved, num_layers: int) -> ChunkPair:
    """The chunk pair of ``num_layers`` MoE layers of the resolved scenario's first layout."""
    job, L = r.job, r.layouts.take(np.array([0]))
    m, sw = job.model, job.software
    if m.moe is None:
        raise InputError("model", "a chunk pair of MoE layers needs a MoE model")
    blk = block_time(layer_ops(m, LayerKind.MOE, sw), m, L, job.seq_length, job.precision, job.hardware,
                     job.efficiency, sw)
    shares = (module_op_shares(selective_modules(sw.selective_recompute), m, LayerKind.MOE)
              if job.recompute == "selective" else {})
    if job.recompute == "full":
        shares = {t.name: 1.0 for t in blk.ops}
    by_class = {"gemm": 0.0, "attention": 0.0, "other": 0.0}
    fwd = bwd = 0.0
    for t in blk.ops:
        share = shares.get(t.name, 0.0)
        f, b = float(t.fwd_s[0]), float(t.bwd_s[0])
        cast = (1.0 + share) * float(np.ravel(t.cast_fwd_s)[0]) + float(np.ravel(t.cast_bwd_s)[0])
        by_class[KIND_CLASS[t.kind]] += f + b + share * f - cast
        by_class["other"] += cast          # the casts are kernels of their own
        fwd += f
        bwd += b + share * f
    x = float(traffic.ep_layer_s(m, L, job.seq_length, job.hardware, job.efficiency, sw)[0])
    slowdown = 0.0 if sw.moe_comm_reserved_sms else job.efficiency.overlap_compute_slowdown
    n = num_layers
    exposed = float(exposed_s(n * x, n * bwd, 1.0, slowdown) + exposed_s(n * x, n * fwd, 1.0, slowdown))
    beside = min(n * x / (1.0 + slowdown), n * bwd) + min(n * x / (1.0 + slowdown), n * fwd)
    return ChunkPair(num_layers=n, gemm_s=n * by_class["gemm"], attention_s=n * by_class["attention"],
                     other_s=n * by_class["other"], ep_comm_s=2 * n * x, exposed_ep_s=exposed,
                     slowed_frac=beside / (n * (fwd + bwd)), slowdown=slowdown)
