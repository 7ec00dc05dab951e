"""Memory per GPU: model states (ZeRO), activations (Korthikanti et al. 2022), workspace.

Everything is bytes on one GPU of the most loaded pipeline stage, as arrays over layouts.

Notation (Korthikanti et al. 2022, "Reducing Activation Recomputation", sec. 4; Rajbhandari
et al. 2020, "ZeRO", sec. 3):

=====  ============================================  =====  ===================================
s      sequence length (each CP rank holds s / cp)    b      micro-batch size (sequences)
h      hidden size                                    a      query heads
g      key/value heads (GQA)                          d      head dim
f      dense MLP width                                V      vocabulary
t      tensor parallel degree                         r      t with sequence parallelism, else 1
p      pipeline stages                                v      virtual stages per rank
m      micro-batches per step                         c      layers per virtual stage (chunk)
E      routed experts                                 k_e    routed experts per token
f_e    expert MLP width                               S_e    shared experts
N_d    ZeRO group of non-expert params: dp * cp       N_e    ZeRO group of experts:
                                                             dp * cp * t / (ep * etp)
=====  ============================================  =====  ===================================

Model states, per parameter (Rajbhandari et al. 2020 sec. 3.1; Megatron-Core "Distributed
Optimizer" docs table): weights w, gradients g, optimizer o bytes; ZeRO-1 divides o by the
group, ZeRO-2 also g, ZeRO-3 also w.

Activations: ``activation_bytes_per_layer`` generalises Korthikanti et al. 2022 sec. 4.1 to
GQA, gated MLPs, MoE and MLA; for GPT shapes with dropout and no FlashAttention it equals
their Table 2 exactly (``korthikanti_activation_bytes_per_layer``). Predictions assume
FlashAttention (no stored s x s scores) and no dropout, as in current recipes.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from perfmodel.formulas.activations import activation_bytes_per_layer
from perfmodel.formulas.counts import embedding_params, layer_params, mtp_params, output_params
from perfmodel.formulas.layouts import Layouts
from perfmodel.formulas.offload import resident_activation_bytes
from perfmodel.formulas.pipeline import (
    DUALPIPE,
    V_SHAPED,
    chunks_in_flight,
    is_in,
    only_defaults,
    parameter_copies,
)
from perfmodel.formulas.workload import (
    ACT_BYTES,
    FP32_BYTES,
    LayerKind,
    OpKind,
    TpSplit,
    layer_kinds,
    mtp_extra_ops,
    mtp_layer_kind,
    weight_ops,
)
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.pipeline_layout import rank_load
from perfmodel.spec.software import SoftwareStack
from perfmodel.spec.units import GIBI, MEBI

LOGITS_BYTES = 4
"""Logits for the cross-entropy are kept in fp32: 4*s*b*V/t (Korthikanti et al. 2022, sec. 4.3)."""
EAGER_FP32_CE_PEAK_BYTES_PER_LOGIT = 3 * FP32_BYTES
"""``F.cross_entropy(logits.float(), labels)`` run eagerly (scenario ``cross_entropy:
eager_fp32``; torchtitan 9dec370 ``train.py``, which deletes the bf16 logits before the
backward): the fp32 log-softmax output is saved (4 bytes); the backward's first steps hold it
with the NLL gradient (4, a dense fp32 tensor) and the log-softmax input gradient (4)."""

GRAD_FP32_BYTES = FP32_BYTES
GRAD_16BIT_BYTES = ACT_BYTES
"""Gradient element in fp32, and in the 16-bit training dtype (Megatron-Core DDP: the buffer
takes the parameter dtype unless grad_reduce_in_fp32); also the bytes of the data-parallel
reduction (``traffic.grad_reduce_bytes``)."""

STATE_BYTES_PER_PARAM: dict[str, tuple[int, int, int]] = {
    "bf16": (2, GRAD_FP32_BYTES, 12),
    "fp16": (2, GRAD_16BIT_BYTES, 16),
    "fp8": (2, GRAD_FP32_BYTES, 12),
    "fp4": (2, GRAD_FP32_BYTES, 12),
}
"""(weights, gradients, optimizer) bytes per parameter under mixed-precision Adam.

bf16: bf16 weights, fp32 gradients (Megatron accumulates and reduces bf16 gradients in fp32:
``accumulate_allreduce_grads_in_fp32`` is forced on for bf16), fp32 master + Adam m + v = 12.
Megatron-Core "Distributed Optimizer" docs: 18 bytes, or 6 + 12/d distributed.
fp16: fp16 gradients; the fp32 main gradient moves into the optimizer states (4 + 12 = 16),
same table: 20 bytes, or 4 + 16/d.
fp8/fp4: treated as bf16. TransformerEngine (and torchao float8) keep the high-precision
weights as the parameters and cast them to fp8 per GEMM; the fp8 copy of the layer in use is
transient and small next to the states (TransformerEngine "Using FP8" docs). Megatron's
optional ``--fp8-param-gather`` (1-byte weights) is not modelled.
"""

def state_bytes_per_param(precision: str, grad_reduce_in_fp32: bool) -> tuple[int, int, int]:
    """(weights, gradients, optimizer) bytes per parameter: ``STATE_BYTES_PER_PARAM``, with a
    16-bit gradient buffer where gradients are not reduced in fp32 (fp16 has one already)."""
    w, g, o = STATE_BYTES_PER_PARAM[precision]
    return w, (g if grad_reduce_in_fp32 else min(g, GRAD_16BIT_BYTES)), o


CUBLAS_WORKSPACE_BYTES = 32 * MEBI
"""cuBLAS workspace recommended for Hopper (cuBLAS docs, cublasSetWorkspace), PyTorch's
default on sm90 since PR #120925 (4 MiB on earlier GPUs; we keep the larger figure)."""
NCCL_BYTES_PER_GROUP = 0.5 * GIBI
"""NCCL channel buffers per communicator that carries traffic, outside the framework allocator:
544-688 MB per group measured on 4x A100 NVLink (NVIDIA/nccl issue #964); linear in channels,
two ring connections whatever the group size (maintainer, NVIDIA/nccl issue #986)."""
FSDP_UNITS_IN_FLIGHT = 2
"""ZeRO-3/FSDP keeps two units unsharded: the one computing and the one being prefetched
(PyTorch FSDP docs, ``limit_all_gathers``); gradients likewise await their reduce-scatter."""

COMPONENTS = ("weights", "gradients", "optimizer_states", "activations", "workspace")


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per GPU on the most loaded GPU; each field an array over layouts."""

    weights: np.ndarray
    gradients: np.ndarray
    optimizer_states: np.ndarray
    activations: np.ndarray
    workspace: np.ndarray
    """cuBLAS workspace, NCCL buffers, ZeRO gather/reduce-scatter buffers."""

    @property
    def total(self) -> np.ndarray:
        return sum(getattr(self, f.name) for f in fields(self))

    def rows(self, i: int = 0) -> list[dict]:
        """Long-form ``[{'component': 'weights', 'bytes': ...}, ...]`` for charts and JSON."""
        return [{"component": f.name, "bytes": float(getattr(self, f.name)[i])} for f in fields(self)]


# ----------------------------------------------------------------------------- parameters
def layer_params_per_gpu(m: ModelSpec, kind: LayerKind, t, ep, etp) -> tuple[np.ndarray, np.ndarray]:
    """(non-expert, expert) parameters of one layer held by one GPU, before ZeRO.

    Column/row-parallel GEMMs are split by t, replicated ones (router, MLA down-projections)
    and norms are not (Shoeybi et al. 2019); experts are split by ep * etp. With GQA and
    t > g each rank keeps a whole K and V head (replicated g -> t).
    """
    t = np.asarray(t, dtype=float)
    gemm = [op for op in weight_ops(m, kind) if op.kind is OpKind.GEMM]
    norms = layer_params(m, kind) - sum(op.params for op in gemm)
    dense = np.full(t.shape, float(norms))
    expert = np.zeros(t.shape)
    for op in gemm:
        if op.expert:
            expert = expert + op.params / (np.asarray(ep) * np.asarray(etp))
        elif op.tp_split is TpSplit.NONE:
            dense = dense + op.params
        else:
            dense = dense + op.params / t
    if m.mla is None:
        h, g, d = m.hidden_size, m.kv_heads, m.attn_head_dim
        dense = dense + h * 2 * d * np.maximum(1 - g / t, 0)
    return dense, expert


def model_state_bytes(params_dense, params_expert, zero_stage, group_dense, group_expert,
                      precision: str, grad_reduce_in_fp32: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weights, gradients, optimizer states) bytes; ZeRO stage z shards the last z of them."""
    w, g, o = state_bytes_per_param(precision, grad_reduce_in_fp32)
    z = np.asarray(zero_stage)

    def held(stage: int):
        nd = np.where(z >= stage, group_dense, 1)
        ne = np.where(z >= stage, group_expert, 1)
        return params_dense / nd + params_expert / ne

    return w * held(3), g * held(2), o * held(1)


# ------------------------------------------------------------------------- pipeline stage
def _dense_layers_on_rank(m: ModelSpec, rank, pp, vpp, c) -> np.ndarray:
    """Dense-MLP layers among rank r's chunks k*p + r, k < v, of c layers each (the leading
    ones, and with ``moe.interleave_step`` > 1 those between the MoE layers).

    With the dense layers all leading (D of them, ``interleave_step`` 1), model chunk j holds
    layers [j c, (j + 1) c): chunks j < D // c are dense throughout and chunk D // c holds the
    remaining D mod c; rank r holds the chunks j = r (mod p), j < v p, so it counts
    c * |{j < min(D // c, v p) : j = r mod p}| plus the remainder when its chunk is r's. The
    same count as walking the chunks, without a v x layouts table (which took most of a large
    MoE search)."""
    if m.moe is None:
        return vpp * c
    if m.moe.interleave_step == 1:
        D = m.moe.num_dense_layers
        rank, pp, vpp, c = (np.asarray(x) for x in (rank, pp, vpp, c))
        chunks = pp * vpp
        full = np.minimum(D // c, chunks)
        own_full = np.maximum(full - rank + pp - 1, 0) // pp        # j < full with j = r (mod p)
        partial = np.where((D // c < chunks) & ((D // c) % pp == rank), D % c, 0)
        return c * own_full + partial
    dense_before = np.concatenate(([0], np.cumsum([k is LayerKind.DENSE for k in layer_kinds(m)])))
    k = np.arange(int(np.max(vpp)))[:, None]
    start = np.minimum((k * pp + rank) * c, m.num_layers).astype(int)
    end = np.minimum(start + c, m.num_layers).astype(int)
    held = (dense_before[end] - dense_before[start]) * (k < vpp)
    return held.sum(axis=0)


@dataclass(frozen=True)
class RankLayers:
    """What one pipeline rank holds under an explicit layout (arrays over layouts):
    decoder layers, dense-MLP layers among them, MTP modules."""

    decoder: np.ndarray
    dense: np.ndarray
    mtp: np.ndarray


def _stage(m: ModelSpec, seq_length: int, recompute: str, precision: str, L: Layouts, rank,
           sw: SoftwareStack, dropout: bool, held: RankLayers | None = None) -> MemoryBreakdown:
    """One rank's memory. Without ``held`` (even split) every rank holds v chunks of the
    fullest chunk's ceil(l / (p v)) layers; with it, the layout's layers, in chunks of n / v."""
    s, h, V = seq_length, m.hidden_size, m.vocab_size
    grad_reduce_in_fp32, recompute_num_layers = sw.grad_reduce_in_fp32, sw.recompute_num_layers
    t = L.tp.astype(float)
    r = np.where(L.sp, t, 1.0)
    first, last = rank == 0, rank == L.pp - 1
    # DualPipe: rank r also holds stage p - 1 - r of the other direction (parameters twice;
    # the end ranks hold the embedding and the head of both directions). The V schedules end
    # where they start: rank 0's second chunk is the last stage, with the head.
    if not only_defaults(L.schedule):
        mirrored = L.schedule == DUALPIPE
        first, last = first | (mirrored & last), np.where(is_in(L.schedule, V_SHAPED), first, last | (mirrored & first))
    if held is None:
        c = -(-m.num_layers // (L.pp * L.vpp))            # ceil: the fullest chunk
        n = L.vpp * c
        n_dense = _dense_layers_on_rank(m, rank, L.pp, L.vpp, c)
        n_mtp = np.where(last, m.mtp_layers, 0)
    else:
        n, n_mtp = held.decoder, held.mtp
        n_dense = held.dense if m.moe is not None else n
        c = n / L.vpp
    n_moe = n - n_dense
    kinds = [LayerKind.DENSE] + ([LayerKind.MOE] if m.moe is not None else [])
    count = {LayerKind.DENSE: n_dense, LayerKind.MOE: n_moe}

    # parameters per GPU on this stage
    split = {k: layer_params_per_gpu(m, k, t, L.ep, L.etp) for k in kinds}
    p_dense = sum(count[k] * split[k][0] for k in kinds)
    p_expert = sum(count[k] * split[k][1] for k in kinds)
    if not only_defaults(L.schedule):
        copies = parameter_copies(L.schedule)
        p_dense, p_expert = copies * p_dense, copies * p_expert
    vocab = embedding_params(m) / t                                       # vocabulary parallel
    projection = 0 if m.tied_embeddings else embedding_params(m)
    head = (output_params(m) - projection) + projection / t               # final norm + projection
    p_dense = p_dense + np.where(first, vocab, 0) + np.where(last, head, 0)
    if m.tied_embeddings or m.mtp_layers:   # a later stage that ties to or shares the embedding
        p_dense = p_dense + np.where(last & ~first, vocab, 0)             # keeps its own copy
    if m.mtp_layers:
        mk = mtp_layer_kind(m)
        d_mtp, e_mtp = split[mk]
        extra_ops = mtp_extra_ops(m)
        extra = sum(op.params / (1 if op.tp_split is TpSplit.NONE else t) for op in extra_ops)
        norms = mtp_params(m) / m.mtp_layers - layer_params(m, mk) - sum(op.params for op in extra_ops)
        p_dense = p_dense + n_mtp * (d_mtp + extra + norms)
        p_expert = p_expert + n_mtp * e_mtp
    group_dense = L.dp * L.cp
    group_expert = L.dp * L.cp * L.tp / (L.ep * L.etp)
    w, g, o = model_state_bytes(p_dense, p_expert, L.zero_stage, group_dense, group_expert, precision,
                                grad_reduce_in_fp32)

    # activations
    def act(kind, rc):
        return activation_bytes_per_layer(m, kind, s, L.mbs, t, L.sp, L.cp, L.etp, rc, precision, sw, dropout)

    if recompute == "full" and recompute_num_layers is not None:
        # block method: the first N layers of each chunk store their input, the rest all
        share = np.where(c > 0, np.minimum(recompute_num_layers, c) / np.where(c > 0, c, 1), 0.0)
        per_layer = {k: share * act(k, "full") + (1 - share) * act(k, "none") for k in kinds}
        rebuilt = {k: act(k, "full") for k in kinds}
    else:
        per_layer = rebuilt = {k: act(k, recompute) for k in kinds}
    stored = chunks_in_flight(rank, L.pp, L.vpp, L.num_mb, L.schedule) \
        * sum(count[k] * per_layer[k] for k in kinds) / L.vpp          # chunks x n / v layers
    if sw.activation_offload_layers:
        stored = np.where(L.pp == 1, resident_activation_bytes(m, sw.activation_offload_layers, per_layer), stored)
    # backward rebuilds one layer's dropped tensors at a time (Chen et al. 2016, sec. 3)
    rebuild = np.max([np.where(count[k] > 0, act(k, "none") - rebuilt[k], 0) for k in kinds], axis=0)
    tokens = s / L.cp * L.mbs
    B = ACT_BYTES
    # final norm input, output GEMM input, fp32 logits: 4sbh/t * (1 + V/h) with SP (sec. 4.3)
    per_logit = EAGER_FP32_CE_PEAK_BYTES_PER_LOGIT if sw.cross_entropy == "eager_fp32" else LOGITS_BYTES
    output_layer = tokens * (2 * B * h / r + per_logit * V / t)
    mtp = 0.0
    if m.mtp_layers:   # norms of h and the embedding, 2h-wide projection input, its own head
        mtp = n_mtp * (act(mtp_layer_kind(m), recompute) + tokens * 4 * B * h / r + output_layer)
    activations = stored + rebuild + np.where(last, output_layer, 0) + mtp

    # workspace: ZeRO-2/3 unshard two consecutive units (a layer and the next layer, or the
    # last layer and the output layer) for the all-gather and the gradient reduce-scatter
    layer_unit = np.max([split[k][0] + split[k][1] for k in kinds], axis=0)
    units_in_flight = (FSDP_UNITS_IN_FLIGHT - 1) * layer_unit + np.maximum(layer_unit, vocab)
    w_b, g_b, _ = state_bytes_per_param(precision, grad_reduce_in_fp32)
    sharded = group_dense > 1
    zero_buffers = np.where((L.zero_stage >= 3) & sharded, w_b * units_in_flight, 0) \
        + np.where((L.zero_stage >= 2) & sharded, g_b * units_in_flight, 0)
    groups = (group_dense > 1).astype(int) + (L.tp > 1) + (L.pp > 1) + (L.cp > 1) + (L.ep > 1)
    workspace = CUBLAS_WORKSPACE_BYTES + NCCL_BYTES_PER_GROUP * groups + zero_buffers

    shape = np.shape(L.tp)
    return MemoryBreakdown(*(np.broadcast_to(np.asarray(x, dtype=float), shape).copy()
                             for x in (w, g, o, activations, workspace)))


def memory_per_gpu(model: ModelSpec, seq_length: int, recompute: str, precision: str, layouts: Layouts,
                   sw: SoftwareStack, *, dropout: bool = False) -> MemoryBreakdown:
    """Peak memory per GPU: the most loaded pipeline rank.

    Even split: the larger of the first stage (the embedding and the most micro-batches in
    flight) and the last (the output layer, MTP modules and the fp32 logits; with pp = 1 they
    are the same stage), and for MoE models with leading dense-MLP layers also the ranks just
    past them. ``sw.pipeline_layout`` (virtual stages, ``perfmodel.spec.pipeline_layout``): every
    rank holds the layers the layout gives it, and all ranks are weighed.
    ``sw.recompute_num_layers``: full recompute of that many layers per chunk (block method);
    ``sw.activation_offload_layers``: layers whose activations wait in host memory (pp = 1 only,
    ``perfmodel.formulas.offload``). ``dropout``: stored dropout masks (not in current recipes;
    Korthikanti et al. 2022's Table 2 counts them).
    """
    if precision not in STATE_BYTES_PER_PARAM:
        raise ValueError(f"precision {precision!r} is not one of {tuple(STATE_BYTES_PER_PARAM)}")
    if recompute not in ("none", "selective", "full"):
        raise ValueError(f"recompute {recompute!r} is not one of ('none', 'selective', 'full')")
    pipeline_layout = sw.pipeline_stages

    def stage(rank, held=None):
        return _stage(model, seq_length, recompute, precision, layouts, rank, sw, dropout, held)

    def larger(a: MemoryBreakdown, b: MemoryBreakdown, take_b) -> MemoryBreakdown:
        return MemoryBreakdown(*(np.where(take_b, getattr(b, f.name), getattr(a, f.name))
                                 for f in fields(MemoryBreakdown)))

    if pipeline_layout is None:
        first, last = stage(np.zeros_like(layouts.pp)), stage(layouts.pp - 1)
        peak = larger(first, last, last.total > first.total)
        if model.moe is not None and model.moe.num_dense_layers:
            # The leading dense-MLP layers fill the first chunks; the first rank without one
            # (and the one before it, partly dense) hold more MoE layers with nearly as many
            # micro-batches in flight as the first rank, so either may peak instead.
            c = -(-model.num_layers // (layouts.pp * layouts.vpp))
            r1 = np.minimum(-(-model.moe.num_dense_layers // c), layouts.pp - 1)
            for rank in (r1, np.maximum(r1 - 1, 0)):
                mb = stage(rank)
                peak = larger(peak, mb, mb.total > peak.total)
        return peak
    shape = np.shape(layouts.pp)
    peak = None
    leading = model.moe.num_dense_layers if model.moe is not None else 0
    for pp in np.unique(layouts.pp):
        load = rank_load(pipeline_layout, int(pp), leading)
        rows = layouts.pp == pp
        for r in range(int(pp)):
            held = RankLayers(*(np.full(shape, float(x[r])) for x in (load.decoder, load.leading, load.mtp)))
            mb = stage(np.where(rows, r, layouts.pp - 1), held)
            # rank 0 of each pp group resets that group's rows (they may hold another group's)
            peak = mb if peak is None else larger(peak, mb, rows & ((r == 0) | (mb.total > peak.total)))
    return peak


def memory_per_stage(model: ModelSpec, seq_length: int, recompute: str, precision: str, layouts: Layouts,
                     sw: SoftwareStack, *, dropout: bool = False) -> list[MemoryBreakdown]:
    """Memory per GPU of every pipeline rank, 0 to pp - 1, of the first layout of ``layouts``
    (``memory_per_gpu`` is their largest): the same ``_stage`` per rank, under the even split or
    the explicit ``sw.pipeline_layout``."""
    one = layouts.take(np.array([0]))
    pp = int(one.pp[0])
    leading = model.moe.num_dense_layers if model.moe is not None else 0
    load = rank_load(sw.pipeline_stages, pp, leading) if sw.pipeline_stages is not None else None
    out = []
    for r in range(pp):
        held = None if load is None else RankLayers(*(np.full(1, float(x[r]))
                                                      for x in (load.decoder, load.leading, load.mtp)))
        out.append(_stage(model, seq_length, recompute, precision, one, np.full(1, r), sw, dropout, held))
    return out


def fits_in_memory(mem: MemoryBreakdown, hw: HardwareSpec) -> np.ndarray:
    """True where the peak fits in what a training process can allocate."""
    return mem.total <= hw.gpu.hbm_usable_bytes
