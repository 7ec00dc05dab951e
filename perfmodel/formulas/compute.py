"""Roofline time of every operation of a layer, per GPU and micro-batch.

=============  ===========================================================================
T              tokens per GPU per micro-batch = micro_batch * s / cp
m, n, k        GEMM rows, output columns, reduction dimension after sharding
P_prec         dense peak FLOP/s of the GEMM's precision
eff(m,n,k)     calibrated GEMM efficiency (``efficiency.py``)
B_hbm          HBM bandwidth x memory efficiency
t_op           max(F / (P_prec * eff), bytes / B_hbm)   (Williams et al. 2009, roofline)
=============  ===========================================================================

Backward GEMMs are the input-gradient (m x k, reduce n) and weight-gradient (k x n, reduce
m) products: twice the forward work, each at its own shape's efficiency. The weight-gradient
GEMMs alone are a layer's W, the part of its backward that nothing downstream waits for
(``BlockTime.wgrad_s``; Qi et al. 2023, table 1: W = the weight GEMMs' 2mnk each; the attention
core, the memory-bound ops and the fp8 casts are input-gradient work, B). Flash attention is
its own class: forward F = 2*a*(d_qk+d_v)*s_kv*T with s_kv = s/2 under the causal mask
(w - w^2/(2s) in sliding-window layers of w < s keys, whose kernels run at the efficiency of a
w-token sequence),
backward 2.5 F executed (it recomputes the attention probabilities; Dao 2023, FlashAttention-2
sec. 3.1.2, and its benchmark convention), at the 16-bit peak. With fp8/fp4 the transformer
GEMMs run at that peak; the output layer, router and attention stay 16-bit (Transformer
Engine recipes), and every low-precision GEMM pays the cast traffic of its inputs.

Unfused attention (``attention_backend: unfused``; Megatron-LM before FlashAttention, and
Megatron-Core's "unfused" backend) materialises the s x s scores in HBM: forward is a batched
Q K^T GEMM, one fused scale-mask-softmax kernel and a batched P V GEMM; backward is four
batched GEMMs (dP, dV, dQ, dK) and the softmax backward, which reads P and dP and writes dS.
The GEMMs compute the whole s x s block (the causal mask is applied in the softmax), each
GEMM's bytes include its s x s operand or result, and each batched GEMM is one kernel
(Narayanan et al. 2021, sec. 4.2; Korthikanti et al. 2022, sec. 4.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.formulas.clocks import attention_phase_s
from perfmodel.formulas.counts import attention_fwd_flop_per_token, attention_layer_mix
from perfmodel.formulas.layouts import Layouts
from perfmodel.formulas.fp8_casts import QUANTISATIONS_PER_LINEAR_FWD_BWD, input_cast
from perfmodel.formulas.scalars import filled, flags, floats, maximum, minimum, where
from perfmodel.formulas.workload import Op, OpKind, TpSplit, routed_load
from perfmodel.spec.attention_head_dim import CUDNN_H100, FA3_H100, effective_head_dim, head_dim_factor
from perfmodel.spec.efficiency import Efficiencies, saturating_attention_efficiency, saturating_gemm_efficiency
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.precision import LOW_PRECISION
from perfmodel.spec.software import SoftwareStack

CAUSAL = True
"""Every modelled job trains a decoder-only language model under the causal mask: a query
attends to the keys before it (s/2 on average, ``perfmodel.formulas.counts.mean_keys_per_query``)."""
ATTENTION_BWD_OVER_FWD_EXECUTED = 2.5
"""Flash-attention backward executes 2.5x the forward FLOPs (5 matmuls vs 2; Dao 2023)."""
SOFTMAX_FWD_SCORE_PASSES = 2
"""Fused scale-mask-softmax forward: read the scores, write the probabilities."""
SOFTMAX_BWD_SCORE_PASSES = 3
"""Softmax backward: read P and dP, write dS."""
DROPOUT_BYTES_PER_SCORE = 2 + 2 + 1
"""Attention dropout as its own kernel (``SoftwareStack.attention_dropout``, unfused attention):
forward reads P and writes the dropped P and a 1-byte mask; backward reads dP' and the mask and
writes dP, 5 bytes per score each way (torch.nn.functional.dropout and its backward)."""
GEMMS_PER_LINEAR_FWD_BWD = 3
"""A linear layer runs one GEMM forward and two backward (input and weight gradients)."""
BACKWARD_HOST_OPS_OVER_FORWARD = 2
"""Autograd dispatches about two operations per forward operation (one per gradient)."""
CUDA_GRAPH_LAUNCHES_PER_LAYER = 2
"""Host launches per transformer layer and micro-batch when the layers run as CUDA graphs
(``SoftwareStack.cuda_graphs``): one replay of the layer's captured forward and one of its
backward (Megatron-Core ``CudaGraphManager``, megatron/core/transformer/cuda_graphs.py, records a
forward and a backward graph per layer and replays them in place of the layer's eager calls).
The operations and kernel launches inside a graph cost the host nothing."""
BYTES_PER_ELEMENT = {"bf16": 2, "fp16": 2, "fp8": 1, "fp4": 0.5, "tf32": 4}


HOPPER_CLASS_ATTENTION = ("cudnn", "fa3")
"""Attention backends priced at the measured cuDNN curve (``SoftwareStack.attention_backend``:
FlashAttention-3 has no measurement of its own in calibration/)."""
FA3_OVER_CUDNN = {b: float(FA3_H100.rate(b, 128) / CUDNN_H100.rate(b, 128)) for b in (False, True)}
"""FlashAttention-3's rate over cuDNN's (forward: False, backward: True) in the FA3 paper's own
H100 SXM5 BF16 benchmark at head dim 128, 4k tokens (``perfmodel.spec.attention_head_dim``:
forward 579 / 518 with the causal mask, fig. 5; backward 542 / 499, fig. 6, without it).
``attention_backend: fa3`` runs at the measured cuDNN curve times these (no FA3 measurement in
calibration/), and at FA3's own head-dim factor."""


GEMM_CURVES = {"fp8_blockwise": "fp8"}
"""GEMM curves that are not a precision of their own -> the precision whose peak and bytes they run
at (``gemm_curve``)."""


def gemm_curve(precision: str, sw: SoftwareStack) -> str:
    """The ``Efficiencies.gemm`` curve a GEMM of ``precision`` runs at: ``fp8_blockwise`` for fp8
    under ``sw.fp8_scaling: blockwise``, else its precision."""
    return "fp8_blockwise" if precision == "fp8" and sw.fp8_scaling == "blockwise" else precision


def gemm_efficiency(m, n, k, precision: str, eff: Efficiencies):
    """GEMM efficiency of one (m x k) @ (k x n) problem, for dense and expert GEMMs alike: expert
    GEMMs issued back to back run at the dense rate of their per-expert shape (measured on an
    H100 with one torch.mm per expert and with torch._grouped_mm: calibration/results/
    nvidia-h100-80gb-hbm3-2026-11-22, docs/calibration.md); each expert's kernel pays its own
    ``kernel_overhead_s`` (``gemm_time_s``)."""
    g = eff.gemm.get(precision) or eff.gemm.get(GEMM_CURVES.get(precision, "bf16")) or eff.gemm["bf16"]
    return saturating_gemm_efficiency(m, n, k, g.efficiency_max, g.half_dim)


def gemm_roofline_s(m, n, k, count, precision: str, hw: HardwareSpec, eff: Efficiencies, fast_accum: bool = False):
    """(math time, memory time) of ``count`` identical (m x k) @ (k x n) GEMMs. ``fast_accum``:
    the forward GEMM, which training stacks run with fp8 fast accumulation
    (``Efficiencies.fp8_fast_accum_speedup``)."""
    flop = 2.0 * m * n * k * count
    base = GEMM_CURVES.get(precision, precision)
    bpe = BYTES_PER_ELEMENT[base]
    bytes_moved = count * bpe * (m * k + k * n + m * n)
    rate = hw.gpu.peak_flop_per_s(base) * maximum(gemm_efficiency(m, n, k, precision, eff), 1e-9)
    if fast_accum and precision == "fp8":
        rate = rate * eff.fp8_fast_accum_speedup
    t_math = flop / rate
    t_mem = bytes_moved / (hw.gpu.hbm_bandwidth_bytes_per_s * eff.memory_efficiency)
    return t_math, t_mem


def gemm_time_s(m, n, k, count, precision: str, hw: HardwareSpec, eff: Efficiencies, fast_accum: bool = False):
    """Time of ``count`` GEMM kernels: per-kernel overhead plus the slower roof."""
    return gemm_kernels_s(count, eff, *gemm_roofline_s(m, n, k, count, precision, hw, eff, fast_accum))


def gemm_kernels_s(count, eff: Efficiencies, t_math, t_mem):
    """``gemm_time_s`` from the GEMMs' two roofs (``gemm_roofline_s``)."""
    return count * eff.kernel_overhead_s + maximum(t_math, t_mem)


def memory_time_s(bytes_moved, hw: HardwareSpec, eff: Efficiencies, kernels: int = 1):
    """``kernels`` HBM-bound kernels moving ``bytes_moved`` in all."""
    return (kernels * eff.kernel_overhead_s
            + floats(bytes_moved) / (hw.gpu.hbm_bandwidth_bytes_per_s * eff.memory_efficiency))


def attention_efficiency(seq, head_dim, eff: Efficiencies, backward: bool, backend: str):
    """The fused attention kernel's efficiency at ``seq`` keys and ``head_dim``
    (``effective_head_dim``) in a training step, forward or backward: the benchmarked curve of
    ``backend`` (``cudnn``: ``Efficiencies.attention_cudnn`` where measured, else the flash curve;
    ``fa3``: the cuDNN curve times ``FA3_OVER_CUDNN``), times the head-dim factor of the kernel
    whose curve it is (``perfmodel.spec.attention_head_dim``), at the clock a step runs at
    (``Efficiencies.attention_clock_ratio``)."""
    hopper_class = backend in HOPPER_CLASS_ATTENTION
    a = eff.attention_cudnn if hopper_class and eff.attention_cudnn is not None else eff.attention
    if backward:
        curve = saturating_attention_efficiency(seq, a.bwd_efficiency_max, a.backward_half_seq)
    else:
        curve = saturating_attention_efficiency(seq, a.fwd_efficiency_max, a.half_seq)
    kernel = "flash" if a is eff.attention else "fa3" if backend == "fa3" else "cudnn"
    if kernel == "fa3":
        curve = curve * FA3_OVER_CUDNN[backward]
    curve = curve * head_dim_factor(kernel, a.measured_generation, backward, head_dim, a.measured_head_dim)
    return eff.attention_clock_ratio * curve


@dataclass(frozen=True)
class OpShape:
    """An op's sharded per-GPU shape for one micro-batch (arrays over layouts)."""

    m: np.ndarray
    n: np.ndarray
    k: np.ndarray
    count: np.ndarray


def tokens_per_microbatch(layouts: Layouts, seq_length: int):
    """T: tokens each GPU holds per micro-batch (before sequence-parallel sharding)."""
    return layouts.mbs * (seq_length / layouts.cp)


def moe_tokens(layouts: Layouts, seq_length: int):
    """Tokens entering a MoE layer on one GPU: T / tp (Megatron requires SP with MoE + TP)."""
    return tokens_per_microbatch(layouts, seq_length) / layouts.tp


def gemm_shape(op: Op, model: ModelSpec, layouts: Layouts, seq_length: int, sw: SoftwareStack) -> OpShape:
    """Sharded shape; an expert GEMM's rows are its expert's routed tokens on the busiest rank
    (``perfmodel.formulas.workload.routed_load``)."""
    T = tokens_per_microbatch(layouts, seq_length)
    if op.expert:
        E, top_k = model.moe.num_experts, model.moe.top_k
        t_moe = moe_tokens(layouts, seq_length)
        m = t_moe * top_k * routed_load(sw) * layouts.ep * layouts.etp / E
        count = E / layouts.ep
        split = layouts.etp
    else:
        m = where(layouts.sp, T / layouts.tp, T) if op.tp_split is TpSplit.NONE else T
        count = filled(T, 1.0)
        split = layouts.tp
    n = (op.n / split if op.tp_split is TpSplit.COLUMN else op.n) * filled(T, 1.0)
    k = (op.k / split if op.tp_split is TpSplit.ROW else op.k) * filled(T, 1.0)
    return OpShape(m=floats(m), n=n, k=k, count=floats(count))


def gemm_precision(op: Op, precision: str) -> str:
    """Transformer-block GEMMs run in the scenario precision; router and output layer in bf16."""
    if precision in LOW_PRECISION and (op.name.startswith("output/") or op.name == "moe/router"):
        return "bf16"
    return precision


@dataclass(frozen=True)
class OpTime:
    name: str
    kind: OpKind
    fwd_s: np.ndarray
    bwd_s: np.ndarray
    fwd_flop: np.ndarray
    """Executed forward FLOPs (per GPU per micro-batch)."""
    fwd_bytes: np.ndarray
    fwd_memory_bound: np.ndarray
    """True where the forward kernel sits under the memory roof (HBM time > math time)."""
    host_ops_fwd: float
    """Framework-level operations the host dispatches in the forward (autograd issues about
    twice as many in the backward)."""
    extra_launches: np.ndarray
    """Kernel launches issued inside one host operation, forward + backward (a grouped expert
    linear launches one GEMM per local expert: Transformer Engine GroupedLinear)."""
    wgrad_s: np.ndarray | float = 0.0
    """The weight-gradient GEMM's part of ``bwd_s`` (0 for attention and memory-bound ops)."""
    cast_fwd_s: np.ndarray | float = 0.0
    """The low-precision input casts' part of ``fwd_s`` (HBM-bound kernels of their own, which a
    profiler trace counts apart from the GEMMs; 0 for 16-bit GEMMs and other ops)."""
    cast_bwd_s: np.ndarray | float = 0.0
    """The same for ``bwd_s``."""



def unfused_attention_s(op: Op, layouts: Layouts, seq_length: int, hw: HardwareSpec, eff: Efficiencies,
                        sw: SoftwareStack):
    """(forward s, backward s, forward FLOPs executed, forward bytes) of attention with the
    scores in HBM, and the dropout kernel on them where ``sw.attention_dropout``."""
    heads = op.attn_heads / layouts.tp
    s_q, s_kv = seq_length / layouts.cp, float(seq_length)
    batch = layouts.mbs * heads
    dq, dv = op.attn_qk_dim, op.attn_v_dim

    def gemm(m, n, k):
        t_math, t_mem = gemm_roofline_s(m, n, k, batch, "bf16", hw, eff)
        return eff.kernel_overhead_s + maximum(t_math, t_mem)

    scores_bytes = batch * s_q * s_kv * BYTES_PER_ELEMENT["bf16"]
    fwd = (gemm(s_q, s_kv, dq) + gemm(s_q, dv, s_kv)
           + memory_time_s(SOFTMAX_FWD_SCORE_PASSES * scores_bytes, hw, eff))
    bwd = (gemm(s_q, s_kv, dv)        # dP = dO V^T
           + gemm(s_kv, dv, s_q)      # dV = P^T dO
           + gemm(s_q, dq, s_kv)      # dQ = dS K
           + gemm(s_kv, dq, s_q)      # dK = dS^T Q
           + memory_time_s(SOFTMAX_BWD_SCORE_PASSES * scores_bytes, hw, eff))
    flop = 2.0 * batch * s_q * s_kv * (dq + dv)
    qkvo_bytes = BYTES_PER_ELEMENT["bf16"] * batch * (s_q * (dq + dv) + s_kv * (dq + dv))
    fwd_bytes = qkvo_bytes + (2 + SOFTMAX_FWD_SCORE_PASSES) * scores_bytes
    if sw.attention_dropout:
        dropout_bytes = DROPOUT_BYTES_PER_SCORE * batch * s_q * s_kv
        fwd = fwd + memory_time_s(dropout_bytes, hw, eff)
        bwd = bwd + memory_time_s(dropout_bytes, hw, eff)
        fwd_bytes = fwd_bytes + dropout_bytes
    return fwd, bwd, flop, fwd_bytes


def op_time(op: Op, model: ModelSpec, layouts: Layouts, seq_length: int, precision: str,
            hw: HardwareSpec, eff: Efficiencies, sw: SoftwareStack) -> OpTime:
    """One operation's time and traffic per micro-batch (arrays over ``layouts``, numbers on a
    ``one_row``; ``perfmodel.engine.block.OP_TIMES`` are the fields that vary with the layout)."""
    T = tokens_per_microbatch(layouts, seq_length)
    if op.kind is OpKind.GEMM:
        sh = gemm_shape(op, model, layouts, seq_length, sw)
        prec = gemm_precision(op, precision)
        curve = gemm_curve(prec, sw)
        t_math, t_mem = gemm_roofline_s(sh.m, sh.n, sh.k, sh.count, curve, hw, eff, fast_accum=True)
        fwd = gemm_kernels_s(sh.count, eff, t_math, t_mem)
        wgrad = gemm_time_s(sh.k, sh.n, sh.m, sh.count, curve, hw, eff)     # weight gradient
        bwd = (gemm_time_s(sh.m, sh.k, sh.n, sh.count, curve, hw, eff)      # input gradient
               + wgrad)
        bpe = BYTES_PER_ELEMENT[prec]
        fwd_bytes = sh.count * bpe * (sh.m * sh.k + sh.k * sh.n + sh.m * sh.n)
        host_ops = sw.te_module_host_ops
        extra = (sh.count - 1) * GEMMS_PER_LINEAR_FWD_BWD
        cast_f = cast_b = filled(T, 0.0)
        if prec in LOW_PRECISION:
            cast_fwd_bytes, cast_bwd_bytes, kernels = input_cast(op.name, sh.count, sw)
            cast_fwd = sh.count * sh.m * sh.k * cast_fwd_bytes
            cast_bwd = sh.count * sh.m * sh.n * cast_bwd_bytes
            cast_f, cast_b = memory_time_s(cast_fwd, hw, eff, kernels), memory_time_s(cast_bwd, hw, eff, kernels)
            extra = extra + (kernels - 1) * QUANTISATIONS_PER_LINEAR_FWD_BWD
            fwd = fwd + cast_f
            bwd = bwd + cast_b
            host_ops = host_ops + 1
        flop = 2.0 * sh.m * sh.n * sh.k * sh.count
        return OpTime(op.name, op.kind, fwd, bwd, flop, fwd_bytes, t_mem > t_math, host_ops, extra, wgrad, cast_f, cast_b)
    if op.kind is OpKind.ATTENTION and not sw.flash_attention:
        fwd, bwd, flop, fwd_bytes = unfused_attention_s(op, layouts, seq_length, hw, eff, sw)
        bound = memory_time_s(fwd_bytes, hw, eff, kernels=0) > flop / hw.gpu.peak_flop_per_s("bf16")
        return OpTime(op.name, op.kind, fwd, bwd, flop, fwd_bytes, bound, 3, *(filled(fwd, 0.0) for _ in range(4)))
    if op.kind is OpKind.ATTENTION:
        peak = hw.gpu.peak_flop_per_s("bf16")
        s_local = seq_length / layouts.cp
        head_share = 1.0 / layouts.tp   # this GPU's heads; the FLOPs per token count all of them
        flop = fwd = bwd = 0.0
        # Full-attention and windowed layers (the op is their average): a windowed kernel's
        # loop over keys is at most w long, so it runs at the efficiency of a w-token sequence.
        d = effective_head_dim(op.attn_qk_dim, op.attn_v_dim)
        for share, window in attention_layer_mix(op):
            f = share * attention_fwd_flop_per_token(op, seq_length, CAUSAL, window) * T * head_share
            s_kernel = s_local if window is None else minimum(s_local, window)
            flop = flop + f
            fwd = fwd + f / (peak * attention_efficiency(s_kernel, d, eff, False, sw.attention_backend))
            bwd = bwd + ATTENTION_BWD_OVER_FWD_EXECUTED * f / (
                peak * attention_efficiency(s_kernel, d, eff, True, sw.attention_backend))
        fwd, bwd = (eff.kernel_overhead_s + attention_phase_s(t, eff, hw) for t in (fwd, bwd))
        heads = op.attn_heads * head_share
        # Reads Q, K, V and writes O once (flash attention never materialises s x s).
        fwd_bytes = 2.0 * T * heads * (2 * op.attn_qk_dim + 2 * op.attn_v_dim)
        return OpTime(op.name, op.kind, fwd, bwd, flop, fwd_bytes, flags(fwd, False), 1, *(filled(fwd, 0.0) for _ in range(4)))
    # Memory-bound elementwise work: norms and residuals act on the sequence-parallel shard;
    # head-split (rotary, repeat_kv) and MLP-width tensors on the tensor-parallel shard.
    sharded_by_tp = op.name.startswith(("attention/", "mlp/", "moe/", "output/"))
    tokens = where(sharded_by_tp | layouts.sp, T / layouts.tp, T)
    runs = (model.moe.num_experts // layouts.ep > 1) if op.multi_local_experts_only else flags(T, True)
    at_precision = precision in LOW_PRECISION or not op.low_precision_only   # else no kernels, no host op
    runs = runs & at_precision
    fwd_bytes = where(runs, op.bytes_per_token * tokens, 0.0)
    fwd_fraction, bwd_fraction = eff.stream_fractions.get(op.stream_class, (1.0, 1.0)) if op.stream_class else (1.0, 1.0)
    fwd = where(runs, memory_time_s(fwd_bytes / fwd_fraction, hw, eff, kernels=op.kernels), 0.0)
    if op.bwd_bytes_per_token is None:
        bwd = 2.0 * where(runs, memory_time_s(fwd_bytes / bwd_fraction, hw, eff, kernels=op.kernels), 0.0)
    else:
        bwd = where(runs, memory_time_s(op.bwd_bytes_per_token * tokens / bwd_fraction, hw, eff,
                                           kernels=op.bwd_kernels or op.kernels), 0.0)
    return OpTime(op.name, op.kind, fwd, bwd, filled(fwd, 0.0), fwd_bytes, flags(fwd, True), op.kernels * at_precision,
                  *(filled(fwd, 0.0) for _ in range(4)))


@dataclass(frozen=True)
class BlockTime:
    """Forward and backward time of a group of ops (a layer or the output head), by class."""

    gemm_fwd_s: np.ndarray
    gemm_bwd_s: np.ndarray
    attn_fwd_s: np.ndarray
    attn_bwd_s: np.ndarray
    mem_fwd_s: np.ndarray
    mem_bwd_s: np.ndarray
    host_ops: float
    """Host dispatches, forward + backward."""
    extra_launches: np.ndarray
    ops: tuple[OpTime, ...]
    wgrad_s: np.ndarray
    """The weight-gradient GEMMs' part of the backward, W (Qi et al. 2023, table 1)."""

    @property
    def fwd_s(self):
        return self.gemm_fwd_s + self.attn_fwd_s + self.mem_fwd_s

    @property
    def bwd_s(self):
        return self.gemm_bwd_s + self.attn_bwd_s + self.mem_bwd_s


def host_dispatched(times: tuple[OpTime, ...], sw: SoftwareStack) -> tuple[tuple[OpTime, ...], int]:
    """(the layer's operations the host dispatches one by one, the graph launches beside them).

    Eager: every operation, no graph. With ``sw.cuda_graphs`` the layer is captured, so the
    host launches ``CUDA_GRAPH_LAUNCHES_PER_LAYER`` graphs; a MoE layer whose experts are not
    padded to their capacity has data-dependent shapes after the router, so only its attention
    part is a graph and the router, permutations, experts and their activation stay eager
    (Megatron-Core v0.12 MoE README: 'CUDA Graph support for dropless MoE models with attention
    only capture'; Transformer Engine PR #1233)."""
    if not sw.cuda_graphs:
        return times, 0
    moe_layer = any(t.name.startswith("moe/") for t in times)
    if not moe_layer or sw.moe_pad_expert_input_to_capacity:
        return (), CUDA_GRAPH_LAUNCHES_PER_LAYER
    return (tuple(t for t in times if t.name.startswith("moe/") or t.name == "mlp/activation"),
            CUDA_GRAPH_LAUNCHES_PER_LAYER)
