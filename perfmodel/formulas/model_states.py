"""Model states per GPU: the parameters one pipeline rank holds, and their weights, gradients and
optimizer states under ZeRO (Rajbhandari et al. 2020, "ZeRO", sec. 3.1; Megatron-Core
"Distributed Optimizer" docs table). ``perfmodel.formulas.memory`` adds the activations and the
workspace; the notation is its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.formulas.counts import embedding_params, layer_params, mtp_params, output_params
from perfmodel.formulas.layouts import Layouts
from perfmodel.formulas.pipeline import only_defaults, parameter_copies, schedule_property
from perfmodel.formulas.scalars import filled, floats, maximum, minimum, where
from perfmodel.formulas.workload import (
    LayerKind,
    OpKind,
    TpSplit,
    layer_kinds,
    mtp_extra_ops,
    mtp_layer_kind,
    weight_ops,
)
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.precision import ADAM_MOMENTS, FORMAT_BYTES, SCENARIO_MODES, precision_mode
from perfmodel.spec.software import SoftwareStack

GRAD_FP32_BYTES = FORMAT_BYTES["fp32"]
GRAD_16BIT_BYTES = FORMAT_BYTES["bf16"]
"""Gradient element in fp32, and in the 16-bit training dtype (Megatron-Core DDP: the buffer
takes the parameter dtype unless grad_reduce_in_fp32); also the bytes of the data-parallel
reduction (``traffic.grad_reduce_bytes``)."""

STATE_BYTES_PER_PARAM: dict[str, tuple[int, int, int]] = {name: mode.state_bytes for name, mode in SCENARIO_MODES.items()}
"""(weights, gradients, optimizer) bytes per parameter of each scenario precision under
mixed-precision Adam: its record's roles (``perfmodel.spec.precision``, whose table gives the
sources). bf16 (and fp8, fp4, whose Transformer Engine recipes keep bf16 parameters and cast
them per GEMM): 2 + 4 + 12 = 18; fp16: 2 + 2 + 16 = 20, the fp32 main gradient in the
optimizer states (Megatron-Core "Distributed Optimizer" docs)."""


def state_bytes_per_param(precision: str, grad_reduce_in_fp32: bool) -> tuple[int, int, int]:
    """(weights, gradients, optimizer) bytes per parameter: the precision's record, with a
    16-bit gradient buffer where gradients are not reduced in fp32 (fp16 has one already)."""
    w, g, o = precision_mode(precision).state_bytes
    return w, (g if grad_reduce_in_fp32 else min(g, GRAD_16BIT_BYTES)), o


def stack_state_bytes_per_param(precision: str, sw: SoftwareStack) -> tuple[int, int, int]:
    """``state_bytes_per_param`` under the stack's gradient dtype and Adam moment dtype: with
    ``optimizer_moments: bf16`` the two moments take 2 bytes each instead of 4, the fp32 master
    weight stays (Megatron-Core --use-precision-aware-optimizer with --exp-avg-dtype and
    --exp-avg-sq-dtype bf16; DeepSeek-V3 report, arXiv 2412.19437, sec. 3.3.3)."""
    w, g, o = state_bytes_per_param(precision, sw.grad_reduce_in_fp32)
    return w, g, o - ADAM_MOMENTS * (FORMAT_BYTES["fp32"] - FORMAT_BYTES[sw.optimizer_moments])


# ----------------------------------------------------------------------------- parameters
def layer_params_per_gpu(m: ModelSpec, kind: LayerKind, t, ep, etp) -> tuple[np.ndarray, np.ndarray]:
    """(non-expert, expert) parameters of one layer held by one GPU, before ZeRO.

    Column/row-parallel GEMMs are split by t, replicated ones (router, MLA down-projections)
    and norms are not (Shoeybi et al. 2019); experts are split by ep * etp. With GQA and
    t > g each rank keeps a whole K and V head (replicated g -> t).
    """
    t = floats(t)
    gemm = [op for op in weight_ops(m, kind) if op.kind is OpKind.GEMM]
    norms = layer_params(m, kind) - sum(op.params for op in gemm)
    dense = filled(t, float(norms))
    expert = filled(t, 0.0)
    for op in gemm:
        if op.expert:
            expert = expert + op.params / (np.asarray(ep) * np.asarray(etp))
        elif op.tp_split is TpSplit.NONE:
            dense = dense + op.params
        else:
            dense = dense + op.params / t
    if m.mla is None:
        h, g, d = m.hidden_size, m.kv_heads, m.attn_head_dim
        dense = dense + h * 2 * d * maximum(1 - g / t, 0)
    return dense, expert


def model_state_bytes(params_dense, params_expert, zero_stage, group_dense, group_expert,
                      precision: str, grad_reduce_in_fp32: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(weights, gradients, optimizer states) bytes; ZeRO stage z shards the last z of them."""
    return sharded_state_bytes(params_dense, params_expert, zero_stage, group_dense, group_expert,
                               state_bytes_per_param(precision, grad_reduce_in_fp32))


def sharded_state_bytes(params_dense, params_expert, zero_stage, group_dense, group_expert,
                        per_param: tuple[int, int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``model_state_bytes`` at ``per_param`` (weights, gradients, optimizer) bytes per parameter."""
    w, g, o = per_param
    z = zero_stage if isinstance(zero_stage, int) else np.asarray(zero_stage)

    def held(stage: int):
        nd = where(z >= stage, group_dense, 1)
        ne = where(z >= stage, group_expert, 1)
        return params_dense / nd + params_expert / ne

    return w * held(3), g * held(2), o * held(1)


# ------------------------------------------------------------------------- pipeline stage
def dense_layers_on_rank(m: ModelSpec, rank, pp, vpp, c) -> np.ndarray:
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
        full = minimum(D // c, chunks)
        own_full = maximum(full - rank + pp - 1, 0) // pp        # j < full with j = r (mod p)
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


@dataclass(frozen=True)
class RankParams:
    """What one pipeline rank holds (arrays over layouts): its layers by kind and its parameters."""

    t: np.ndarray
    first: np.ndarray
    last: np.ndarray
    c: np.ndarray
    n_mtp: np.ndarray
    kinds: list
    count: dict
    split: dict
    vocab: np.ndarray
    p_dense: np.ndarray
    p_expert: np.ndarray


def rank_params(m: ModelSpec, L: Layouts, rank, held: RankLayers | None) -> RankParams:
    """Rank ``rank``'s layers and parameters per GPU (``_stage``). Without ``held`` (even split)
    every rank holds v chunks of the fullest chunk's ceil(l / (p v)) layers; with it, the
    layout's layers, in chunks of n / v."""
    t = floats(L.tp)
    first, last = rank == 0, rank == L.pp - 1
    # DualPipe: rank r also holds stage p - 1 - r of the other direction (parameters twice;
    # the end ranks hold the embedding and the head of both directions). The V schedules end
    # where they start: rank 0's second chunk is the last stage, with the head.
    if not only_defaults(L.schedule):
        mirrored = schedule_property(L.schedule, "bidirectional")
        v_shaped = schedule_property(L.schedule, "v_shaped")
        first, last = first | (mirrored & last), where(v_shaped, first, last | (mirrored & first))
    if held is None:
        c = -(-m.num_layers // (L.pp * L.vpp))            # ceil: the fullest chunk
        n = L.vpp * c
        n_dense = dense_layers_on_rank(m, rank, L.pp, L.vpp, c)
        n_mtp = where(last, m.mtp_layers, 0)
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
    p_dense = p_dense + where(first, vocab, 0) + where(last, head, 0)
    if m.tied_embeddings or m.mtp_layers:   # a later stage that ties to or shares the embedding
        p_dense = p_dense + where(np.logical_and(last, np.logical_not(first)), vocab, 0)   # keeps its own copy
    if m.mtp_layers:
        mk = mtp_layer_kind(m)
        d_mtp, e_mtp = split[mk]
        extra_ops = mtp_extra_ops(m)
        extra = sum(op.params / (1 if op.tp_split is TpSplit.NONE else t) for op in extra_ops)
        norms = mtp_params(m) / m.mtp_layers - layer_params(m, mk) - sum(op.params for op in extra_ops)
        p_dense = p_dense + n_mtp * (d_mtp + extra + norms)
        p_expert = p_expert + n_mtp * e_mtp
    return RankParams(t, first, last, c, n_mtp, kinds, count, split, vocab, p_dense, p_expert)


def rank_state_bytes(rp: RankParams, L: Layouts, precision: str, sw: SoftwareStack):
    """(weights, gradients, optimizer states) bytes of a rank's parameters under its ZeRO stage."""
    group_dense = L.dp * L.cp
    group_expert = L.dp * L.cp * L.tp / (L.ep * L.etp)
    return sharded_state_bytes(rp.p_dense, rp.p_expert, L.zero_stage, group_dense, group_expert,
                               stack_state_bytes_per_param(precision, sw))


def first_rank_state_bytes(model: ModelSpec, precision: str, layouts: Layouts, sw: SoftwareStack) -> np.ndarray:
    """Weights, gradients and optimizer states of pipeline rank 0 under the even split (0 under
    an explicit ``pipeline_layout``): a lower bound of ``memory_per_gpu`` (whose peak is the
    largest of the ranks it weighs, rank 0 among them), at a fraction of its work, so that a
    search can count the layouts that cannot fit without working out their activations."""
    if sw.pipeline_stages is not None:
        return np.zeros(np.shape(layouts.pp))
    rp = rank_params(model, layouts, np.zeros_like(layouts.pp), None)
    w, g, o = rank_state_bytes(rp, layouts, precision, sw)
    return np.broadcast_to(np.asarray(w + g + o, dtype=float), np.shape(layouts.pp))
