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
their Table 2 exactly (``korthikanti_activation_bytes_per_layer``). Attention dropout
follows the software stack (``attention_dropout``); hidden dropout is left out
(``HIDDEN_DROPOUT``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np

from perfmodel.formulas.activations import activation_bytes_per_layer
from perfmodel.formulas.layouts import Layouts, is_row, one_row
from perfmodel.formulas.model_states import (
    STATE_BYTES_PER_PARAM,
    RankLayers,
    rank_params,
    rank_state_bytes,
    state_bytes_per_param,
)
from perfmodel.formulas.offload import resident_activation_bytes
from perfmodel.formulas.pipeline import chunks_in_flight, schedule_property
from perfmodel.formulas.scalars import as_rows, largest, maximum, minimum, where
from perfmodel.formulas.workload import (
    ACT_BYTES,
    FP32_BYTES,
    mtp_layer_kind,
)
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.pipeline_layout import mirrored, rank_load
from perfmodel.spec.software import SoftwareStack
from perfmodel.spec.units import GIBI, MEBI

HIDDEN_DROPOUT = False
"""No dropout after attention and after the MLP: current pre-training recipes set it to 0
(Megatron-Core Llama and DeepSeek recipes: hidden_dropout 0.0; Llama 3 paper), so its masks are
not stored (``activation_bytes_per_layer``'s ``hidden_dropout``)."""

LOGITS_BYTES = 4
"""Logits for the cross-entropy are kept in fp32: 4*s*b*V/t (Korthikanti et al. 2022, sec. 4.3)."""
EAGER_FP32_CE_PEAK_BYTES_PER_LOGIT = 3 * FP32_BYTES
"""``F.cross_entropy(logits.float(), labels)`` run eagerly (scenario ``cross_entropy:
eager_fp32``; torchtitan 9dec370 ``train.py``, which deletes the bf16 logits before the
backward): the fp32 log-softmax output is saved (4 bytes); the backward's first steps hold it
with the NLL gradient (4, a dense fp32 tensor) and the log-softmax input gradient (4)."""

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

    @cached_property
    def total(self) -> np.ndarray:
        """The sum of the parts, worked out once per breakdown (a search reads it for its fit
        check, its ranking and its tables)."""
        return sum(getattr(self, f.name) for f in fields(self))

    def rows(self, i: int = 0) -> list[dict]:
        """Long-form ``[{'component': 'weights', 'bytes': ...}, ...]`` for charts and JSON."""
        return [{"component": f.name, "bytes": float(getattr(self, f.name)[i])} for f in fields(self)]


def _stage(m: ModelSpec, seq_length: int, recompute: str, precision: str, L: Layouts, rank,
           sw: SoftwareStack, held: RankLayers | None = None) -> MemoryBreakdown:
    """One rank's memory. Without ``held`` (even split) every rank holds v chunks of the
    fullest chunk's ceil(l / (p v)) layers; with it, the layout's layers, in chunks of n / v."""
    return _stage_modes(m, seq_length, (recompute,), precision, L, rank, sw, held)[0]


def _stage_modes(m: ModelSpec, seq_length: int, recomputes: tuple[str, ...], precision: str, L: Layouts, rank,
                 sw: SoftwareStack, held: RankLayers | None) -> tuple[MemoryBreakdown, ...]:
    """``_stage`` under each recompute mode of ``recomputes``: the model states and the workspace,
    which do not depend on it, worked out once."""
    s, h, V = seq_length, m.hidden_size, m.vocab_size
    grad_reduce_in_fp32, recompute_num_layers = sw.grad_reduce_in_fp32, sw.recompute_num_layers
    rp = rank_params(m, L, rank, held)
    t, last, c, n_mtp, kinds, count, split, vocab = (rp.t, rp.last, rp.c, rp.n_mtp, rp.kinds, rp.count, rp.split,
                                                     rp.vocab)
    r = where(L.sp, t, 1.0)
    group_dense = L.dp * L.cp
    w, g, o = rank_state_bytes(rp, L, precision, sw)

    # activations (each layer kind's under each mode worked out once: every mode's rebuild reads "none")
    per_kind: dict = {}

    def act(kind, rc):
        if (kind, rc) not in per_kind:
            per_kind[kind, rc] = activation_bytes_per_layer(m, kind, s, L.mbs, t, L.sp, L.cp, L.etp, rc, precision,
                                                            sw, hidden_dropout=HIDDEN_DROPOUT)
        return per_kind[kind, rc]

    in_flight = chunks_in_flight(rank, L.pp, L.vpp, L.num_mb, L.schedule)
    tokens = s / L.cp * L.mbs
    B = ACT_BYTES
    # final norm input, output GEMM input, fp32 logits: 4sbh/t * (1 + V/h) with SP (sec. 4.3)
    per_logit = EAGER_FP32_CE_PEAK_BYTES_PER_LOGIT if sw.cross_entropy == "eager_fp32" else LOGITS_BYTES
    output_layer = tokens * (2 * B * h / r + per_logit * V / t)

    def activations(recompute):
        if recompute == "full" and recompute_num_layers is not None:
            # block method: the first N layers of each chunk store their input, the rest all
            share = where(c > 0, minimum(recompute_num_layers, c) / where(c > 0, c, 1), 0.0)
            per_layer = {k: share * act(k, "full") + (1 - share) * act(k, "none") for k in kinds}
            rebuilt = {k: act(k, "full") for k in kinds}
        else:
            per_layer = rebuilt = {k: act(k, recompute) for k in kinds}
        stored = in_flight * sum(count[k] * per_layer[k] for k in kinds) / L.vpp   # chunks x n / v layers
        if sw.activation_offload_layers:
            stored = where(L.pp == 1, resident_activation_bytes(m, sw.activation_offload_layers, per_layer), stored)
        # backward rebuilds one layer's dropped tensors at a time (Chen et al. 2016, sec. 3)
        rebuild = largest([where(count[k] > 0, act(k, "none") - rebuilt[k], 0) for k in kinds])
        mtp = 0.0
        if m.mtp_layers:   # norms of h and the embedding, 2h-wide projection input, its own head
            mtp = n_mtp * (act(mtp_layer_kind(m), recompute) + tokens * 4 * B * h / r + output_layer)
        return stored + rebuild + where(last, output_layer, 0) + mtp

    # workspace: ZeRO-2/3 unshard two consecutive units (a layer and the next layer, or the
    # last layer and the output layer) for the all-gather and the gradient reduce-scatter
    layer_unit = largest([split[k][0] + split[k][1] for k in kinds])
    units_in_flight = (FSDP_UNITS_IN_FLIGHT - 1) * layer_unit + maximum(layer_unit, vocab)
    w_b, g_b, _ = state_bytes_per_param(precision, grad_reduce_in_fp32)
    sharded = group_dense > 1
    zero_buffers = where((L.zero_stage >= 3) & sharded, w_b * units_in_flight, 0) \
        + where((L.zero_stage >= 2) & sharded, g_b * units_in_flight, 0)
    groups = 1 * (group_dense > 1) + (L.tp > 1) + (L.pp > 1) + (L.cp > 1) + (L.ep > 1)
    workspace = CUBLAS_WORKSPACE_BYTES + NCCL_BYTES_PER_GROUP * groups + zero_buffers

    if is_row(L):   # a one_row's numbers
        return tuple(MemoryBreakdown(*(np.asarray(y, dtype=float).item() for y in (w, g, o, activations(rc), workspace)))
                     for rc in recomputes)
    shape = np.shape(L.tp)
    return tuple(MemoryBreakdown(*(x.copy() if x.shape == shape else np.broadcast_to(x, shape).copy()
                                   for x in (np.asarray(y, dtype=float)
                                             for y in (w, g, o, activations(rc), workspace))))
                 for rc in recomputes)


def memory_per_gpu(model: ModelSpec, seq_length: int, recompute: str, precision: str, layouts: Layouts,
                   sw: SoftwareStack) -> MemoryBreakdown:
    """Peak memory per GPU: the most loaded pipeline rank.

    Even split: the larger of the first stage (the embedding and the most micro-batches in
    flight) and the last (the output layer, MTP modules and the fp32 logits; with pp = 1 they
    are the same stage), and for MoE models with leading dense-MLP layers also the ranks just
    past them. ``sw.pipeline_layout`` (virtual stages, ``perfmodel.spec.pipeline_layout``): every
    rank holds the layers the layout gives it, and all ranks are weighed.
    ``sw.recompute_num_layers``: full recompute of that many layers per chunk (block method);
    ``sw.activation_offload_layers``: layers whose activations wait in host memory (pp = 1 only,
    ``perfmodel.formulas.offload``); ``sw.attention_dropout``: the attention probabilities'
    dropout mask and output, stored where attention is unfused.
    """
    return memory_per_gpu_modes(model, seq_length, (recompute,), precision, layouts, sw)[0]


def memory_per_gpu_modes(model: ModelSpec, seq_length: int, recomputes: tuple[str, ...], precision: str,
                         layouts: Layouts, sw: SoftwareStack) -> tuple[MemoryBreakdown, ...]:
    """``memory_per_gpu`` under each recompute mode of ``recomputes``, the same to the last bit,
    with each rank's model states and workspace (which no mode changes) worked out once."""
    if precision not in STATE_BYTES_PER_PARAM:
        raise ValueError(f"precision {precision!r} is not one of {tuple(STATE_BYTES_PER_PARAM)}")
    for recompute in recomputes:
        if recompute not in ("none", "selective", "full"):
            raise ValueError(f"recompute {recompute!r} is not one of ('none', 'selective', 'full')")
    pipeline_layout = sw.pipeline_stages

    row = one_row(layouts) if len(layouts) == 1 and not is_row(layouts) and pipeline_layout is None else None

    def stage(rank, held=None):
        if row is not None:   # one layout: on floats (``perfmodel.formulas.layouts.one_row``)
            return _stage_modes(model, seq_length, recomputes, precision, row, int(rank[0]), sw, held)
        return _stage_modes(model, seq_length, recomputes, precision, layouts, rank, sw, held)

    def larger(a: MemoryBreakdown, b: MemoryBreakdown, take_b) -> MemoryBreakdown:
        return MemoryBreakdown(*(where(take_b, getattr(b, f.name), getattr(a, f.name))
                                 for f in fields(MemoryBreakdown)))

    def larger_each(a, b):
        return tuple(larger(x, y, y.total > x.total) for x, y in zip(a, b))

    if pipeline_layout is None:
        peak = larger_each(stage(np.zeros_like(layouts.pp)), stage(layouts.pp - 1))
        if model.moe is not None and model.moe.num_dense_layers:
            # The leading dense-MLP layers fill the first chunks; the first rank without one
            # (and the one before it, partly dense) hold more MoE layers with nearly as many
            # micro-batches in flight as the first rank, so either may peak instead.
            c = -(-model.num_layers // (layouts.pp * layouts.vpp))
            r1 = minimum(-(-model.moe.num_dense_layers // c), layouts.pp - 1)
            for rank in (r1, maximum(r1 - 1, 0)):
                peak = larger_each(peak, stage(rank))
        return peak if row is None else tuple(MemoryBreakdown(*as_rows(*(getattr(p, f.name) for f in fields(p))))
                                              for p in peak)
    shape = np.shape(layouts.pp)
    peak = None
    leading = model.moe.num_dense_layers if model.moe is not None else 0
    dual = schedule_property(layouts.schedule, "bidirectional")
    for pp in np.unique(layouts.pp):
        load = rank_load(pipeline_layout, int(pp), leading)
        rows = layouts.pp == pp
        for r in range(int(pp)):
            held = _held(load, r, np.broadcast_to(dual, shape))
            mb = stage(np.where(rows, r, layouts.pp - 1), held)
            # rank 0 of each pp group resets that group's rows (they may hold another group's)
            peak = mb if peak is None else tuple(larger(x, y, rows & ((r == 0) | (y.total > x.total)))
                                                 for x, y in zip(peak, mb))
    return peak


def _held(load, r: int, dual) -> RankLayers:
    """Rank r's layers under a layout; under DualPipe (``dual``) the mean of stages r and pp - 1 - r,
    which ``rank_params`` doubles as the rank holds both, and both stages' MTP modules."""
    two = mirrored(load)
    return RankLayers(decoder=np.where(dual, two.decoder[r], load.decoder[r]).astype(float),
                      dense=np.where(dual, two.leading[r], load.leading[r]).astype(float),
                      mtp=np.where(dual, 2 * two.mtp[r], load.mtp[r]).astype(float))


def memory_per_stage(model: ModelSpec, seq_length: int, recompute: str, precision: str, layouts: Layouts,
                     sw: SoftwareStack) -> list[MemoryBreakdown]:
    """Memory per GPU of every pipeline rank, 0 to pp - 1, of the first layout of ``layouts``
    (``memory_per_gpu`` is their largest): the same ``_stage`` per rank, under the even split or
    the explicit ``sw.pipeline_layout``."""
    one = layouts.take(np.array([0]))
    pp = int(one.pp[0])
    leading = model.moe.num_dense_layers if model.moe is not None else 0
    load = rank_load(sw.pipeline_stages, pp, leading) if sw.pipeline_stages is not None else None
    out = []
    for r in range(pp):
        held = None if load is None else _held(load, r, schedule_property(one.schedule, "bidirectional"))
        out.append(_stage(model, seq_length, recompute, precision, one, np.full(1, r), sw, held))
    return out


def fits_in_memory(mem: MemoryBreakdown, hw: HardwareSpec) -> np.ndarray:
    """True where the peak fits in what a training process can allocate."""
    return mem.total <= hw.gpu.hbm_usable_bytes
