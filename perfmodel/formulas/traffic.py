"""What each kind of parallelism sends, per GPU, and how long it takes (before overlap).

=============  =============================================================================
T              tokens per GPU per micro-batch (micro_batch * s / cp)
h              hidden size; b_a = 2 bytes per 16-bit activation
TP + SP        per layer and direction: all-gather + reduce-scatter of T*h*b_a before/after
               each of attention and MLP (Korthikanti et al. 2022, sec. 4.2.2);
               without SP: one all-reduce each (Shoeybi et al. 2019)
CP             per layer, by implementation (``perfmodel.spec.context_parallel``): p2p, (cp - 1)
               ring steps sending the local K and V chunk forward, twice that backward (K, V
               and their gradients) (Liu et al. 2023); torch_allgather, one all-gather of the
               cp chunks per pass and cp float32 dKV sends backward (PyTorch's experimental CP)
EP             per MoE layer and direction: dispatch + combine all-to-all of T/tp * k_e * h
               * b_a bytes over the ep group (Lepikhin et al. 2020, GShard); with a
               hierarchical (flex) dispatcher, T/tp * h * b_a per remote domain reached
               crosses the network (DeepEP)
PP             per micro-batch and stage boundary: T*h*b_a (/tp with SP) each direction
DP             per step: gradient all-reduce (ZeRO 0), or reduce-scatter + parameter
               all-gather (ZeRO 1/2, distributed optimizer); ZeRO-3: per micro-batch
               all-gather forward and backward plus gradient reduce-scatter (Rajbhandari 2020)
=============  =============================================================================

Group placement (Megatron-Core rank order): TP innermost (stride 1), CP (stride tp),
DP over dp * cp for gradients (stride tp), EP inside the expert layout etp-ep-edp (stride
etp), PP outermost (stride tp * cp * dp).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.formulas.comm import Collective, group_domains, group_time_s, p2p_time_s
from perfmodel.formulas.compute import memory_time_s, moe_tokens, tokens_per_microbatch
from perfmodel.formulas.layouts import Layouts
from perfmodel.formulas.model_states import GRAD_16BIT_BYTES, GRAD_FP32_BYTES
from perfmodel.formulas.moe_kernels import flex_layer_s
from perfmodel.formulas.scalars import any_of, filled, floats, maximum, minimum, where, zeros_of
from perfmodel.formulas.workload import ACT_BYTES, LayerKind, routed_load
from perfmodel.spec.context_parallel import cp_comm_type
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.model import ModelSpec, MoeSpec
from perfmodel.spec.pp_grad_reduce import pp_grad_reduce
from perfmodel.spec.precision import FORMAT_BYTES, precision_mode
from perfmodel.spec.software import SoftwareStack

PARAM_BYTES = FORMAT_BYTES["bf16"]
"""16-bit parameters gathered by the distributed optimizer / FSDP (the ``param`` role of every
scenario precision, ``perfmodel.spec.precision``)."""


def grad_reduce_bytes(grad_reduce_in_fp32: bool) -> int:
    """Bytes per gradient element in the data-parallel reduction: 4 when gradients are reduced
    in fp32 (Megatron-Core DDP ``grad_reduce_in_fp32``; FSDP2 MixedPrecisionPolicy
    reduce_dtype=float32 in torchtitan), 2 when reduced in the 16-bit training dtype (NVIDIA's
    performance recipes: ``grad_reduce_in_fp32 = False``). The scenario field of that name."""
    return GRAD_FP32_BYTES if grad_reduce_in_fp32 else GRAD_16BIT_BYTES


# With fp8 and sequence parallelism, Transformer Engine casts the layer input before the
# all-gather, so the gather moves 1-byte elements (TE LayerNormLinear/Linear with fp8 and
# sequence_parallel; the ``gather`` role of ``perfmodel.spec.precision``); reduce-scatters of
# GEMM outputs stay 16-bit.


def tp_layer_s(kind: LayerKind, model: ModelSpec, layouts: Layouts, seq: int, hw: HardwareSpec,
               eff: Efficiencies, precision: str, sw: SoftwareStack):
    """TP collectives of one layer in one direction (forward; backward is the mirror image)."""
    T = tokens_per_microbatch(layouts, seq)
    size = T * model.hidden_size * ACT_BYTES
    gather_bytes = precision_mode(precision).bytes_of("gather")
    ag = group_time_s(Collective.ALL_GATHER, T * model.hidden_size * gather_bytes, layouts.tp, 1, hw, eff)
    rs = group_time_s(Collective.REDUCE_SCATTER, size, layouts.tp, 1, hw, eff)
    ar = group_time_s(Collective.ALL_REDUCE, size, layouts.tp, 1, hw, eff)
    pair = where(layouts.sp, ag + rs, ar)
    # Blocks with TP collectives: attention, and the dense MLP or the MoE shared experts.
    blocks = 2 if (kind is LayerKind.DENSE or model.moe.num_shared_experts) else 1
    t = blocks * pair
    if kind is LayerKind.MOE:
        # Expert tensor parallelism: all-gather the routed tokens in, reduce-scatter out. After
        # the all-to-all a GPU holds its own share of routed copies, moe_tokens * top_k on
        # average over its E/ep experts; the gather over the etp group multiplies that by etp
        # (the expert GEMMs' rows: compute.gemm_shape, m * count = moe_tokens * top_k * etp).
        routed = (moe_tokens(layouts, seq) * model.moe.top_k * routed_load(sw) * layouts.etp * model.hidden_size
                  * ACT_BYTES)
        t = t + (group_time_s(Collective.ALL_GATHER, routed, layouts.etp, 1, hw, eff)
                 + group_time_s(Collective.REDUCE_SCATTER, routed, layouts.etp, 1, hw, eff))
    return t


def sp_regather_s(kind: LayerKind, model: ModelSpec, layouts: Layouts, seq: int, hw: HardwareSpec,
                  eff: Efficiencies, precision: str):
    """Sequence parallelism's extra backward collective, per layer: the all-gathered input of each
    column-parallel GEMM is not kept (only its sequence shard is), so the backward gathers it
    again for the weight gradient (Korthikanti et al. 2022, sec. 4.2.2; Megatron-Core core_r0.13
    tensor_parallel/layers.py LinearWithGradAccumulationAndAsyncCommunication.backward, and
    Transformer Engine's LayerNormLinear backward, which re-gather the input asynchronously beside
    the input-gradient GEMM). One all-gather per TP block (as ``tp_layer_s``'s forward one); 0
    without SP. A fully recomputed layer gathers again in its recomputed forward and keeps the
    result, so the caller adds this only when the layer is not fully recomputed."""
    T = tokens_per_microbatch(layouts, seq)
    gather_bytes = precision_mode(precision).bytes_of("gather")
    ag = group_time_s(Collective.ALL_GATHER, T * model.hidden_size * gather_bytes, layouts.tp, 1, hw, eff)
    blocks = 2 if (kind is LayerKind.DENSE or model.moe.num_shared_experts) else 1
    return where(layouts.sp, blocks * ag, 0.0)


def cp_kv_chunk_bytes(model: ModelSpec, layouts: Layouts, seq: int, sw: SoftwareStack):
    """One rank's K and V for one micro-batch, as its CP implementation sends them: T tokens of
    the kv heads this GPU holds (a kv head shared by several TP ranks is sent by each), or of the
    query heads where the framework repeats K and V before the attention call
    (``perfmodel.spec.context_parallel``)."""
    T = tokens_per_microbatch(layouts, seq)
    if model.mla is not None:
        x = model.mla
        width = model.num_attention_heads * (x.qk_nope_head_dim + x.qk_rope_head_dim + x.v_head_dim)
        return T * width * ACT_BYTES / layouts.tp
    if cp_comm_type(sw.cp_comm_type).kv_query_heads:
        return T * 2 * model.num_attention_heads * model.attn_head_dim * ACT_BYTES / layouts.tp
    return T * 2 * model.kv_heads * model.attn_head_dim * ACT_BYTES / minimum(layouts.tp, model.kv_heads)


CP_BWD_OVER_FWD = 2
"""The p2p ring's backward sends K, V and their gradients: twice the forward traffic."""


@dataclass(frozen=True)
class CpTraffic:
    """One layer's context-parallel traffic in each pass, as (seconds, the share of the pass's
    attention kernels it can hide behind) parts, plus what no kernel runs beside."""

    fwd: tuple[tuple[np.ndarray, float | np.ndarray], ...]
    bwd: tuple[tuple[np.ndarray, float | np.ndarray], ...]
    bwd_tail_s: np.ndarray

    @property
    def fwd_s(self):
        return sum(t for t, _ in self.fwd)

    @property
    def bwd_s(self):
        return sum(t for t, _ in self.bwd) + self.bwd_tail_s


def cp_layer_parts(model: ModelSpec, layouts: Layouts, seq: int, hw: HardwareSpec, eff: Efficiencies,
                   sw: SoftwareStack) -> CpTraffic:
    """The CP traffic of one layer and micro-batch (``perfmodel.spec.context_parallel``), cp ranks
    ``tp`` apart. p2p: (cp - 1) ring sends of the K/V chunk C forward behind the whole attention,
    twice that backward. Gathered: an all-gather of cp C behind step 0 (1/cp of the kernels) in
    each pass; backward also cp sends of the dKV chunk (C at the record's bytes), the first cp - 1
    behind steps 1..cp-1 and the last exposed."""
    cp, rec = layouts.cp, cp_comm_type(sw.cp_comm_type)
    chunk = cp_kv_chunk_bytes(model, layouts, seq, sw)
    crosses = layouts.tp * cp > hw.scale_up.domain_size
    hop = p2p_time_s(chunk, crosses, layouts.tp, hw, eff)
    zero = filled(chunk, 0.0)
    if not rec.kv_gathered:
        ring = where(cp > 1, (cp - 1) * hop, 0.0)
        return CpTraffic(fwd=((ring, 1.0),), bwd=((CP_BWD_OVER_FWD * ring, 1.0),), bwd_tail_s=zero)
    first_step = 1.0 / cp
    gather = group_time_s(Collective.ALL_GATHER, cp * chunk, cp, layouts.tp, hw, eff)
    dkv_bytes = chunk / ACT_BYTES * (rec.dkv_bytes_per_element or ACT_BYTES)
    dkv_hop = where(cp > 1, p2p_time_s(dkv_bytes, crosses, layouts.tp, hw, eff), 0.0)
    tail = dkv_hop if rec.dkv_last_hop_exposed else zero
    return CpTraffic(fwd=((gather, first_step),),
                     bwd=((gather, first_step), ((cp - 1) * dkv_hop, 1.0 - first_step)), bwd_tail_s=tail)


FP8_DISPATCH_BYTES_PER_ELEMENT = 1 + 4 / 128
"""An FP8 element and its share of a 4-byte scale per 128 elements (``SoftwareStack.moe_dispatch_fp8``;
DeepSeek-V3 report sec. 3.3.2: 1 x 128 activation tiles, one scale each)."""


def remote_domains_per_token(num_experts: int, top_k: int, n_domains):
    """Expected number of other scale-up domains holding at least one of a token's top-k
    experts, for n_domains domains of num_experts / n_domains experts each and routing
    uniform over experts (k distinct experts drawn without replacement):

        (n_domains - 1) * (1 - C(E - E/n_domains, k) / C(E, k))

    (hypergeometric probability that a domain receives none of the k). Uniform routing is
    what the auxiliary load-balancing loss aims at (Fedus et al. 2022, eq. 4; DeepSeek-V3
    2024, sec. 2.1.2) and what NVIDIA's benchmark recipes force
    (moe_router_force_load_balancing)."""
    n_dom = np.asarray(n_domains, dtype=float)
    e_out = num_experts - num_experts / n_dom
    i = np.arange(top_k, dtype=float).reshape((-1,) + (1,) * n_dom.ndim)
    p_none = np.prod(np.clip((e_out - i) / (num_experts - i), 0.0, None), axis=0)
    return (n_dom - 1.0) * (1.0 - p_none)


def routed_remote_domains(moe: MoeSpec, n_domains):
    """``remote_domains_per_token`` under the router's group limit (``MoeSpec.router_num_groups``):
    a token reaches at most the domains of its router_group_topk groups, each group spanning
    max(1, n_domains / groups) domains, each of which is another domain than the token's own
    with probability (n_domains - 1) / n_domains (DeepSeek-V3 report sec. 2.1.2: at most M = 4
    nodes per token)."""
    uniform = remote_domains_per_token(moe.num_experts, moe.top_k, n_domains)
    if moe.router_num_groups is None:
        return uniform
    n_dom = np.asarray(n_domains, dtype=float)
    reach = minimum(moe.router_group_topk * maximum(1.0, n_dom / moe.router_num_groups), n_dom)
    return minimum(uniform, reach * (n_dom - 1.0) / n_dom)


def ep_layer_s(model: ModelSpec, layouts: Layouts, seq: int, hw: HardwareSpec, eff: Efficiencies,
               sw: SoftwareStack):
    """Dispatch + combine of one MoE layer in one direction.

    alltoall: every routed copy of a token is its own message; a group spanning domains
    sends the copies bound for other domains through the GPU's NIC (Megatron-Core
    MoEAlltoAllTokenDispatcher). flex: hierarchical dispatch (DeepEP, DeepSeek-AI 2025,
    github deepseek-ai/DeepEP, internode kernels; NVIDIA HybridEP; Megatron-Core
    MoEFlexTokenDispatcher) sends a token across the network at most once per destination
    domain and fans it out over NVLink there; combine reduces inside the domain first and
    returns one copy. Inside one domain both are the same all-to-all, except where the flex
    backend's kernels were measured on this GPU at this EP size: they run at their measured
    bandwidth (``perfmodel.formulas.moe_kernels.flex_layer_s``)."""
    k = model.moe.top_k
    copy = moe_tokens(layouts, seq) * model.hidden_size * ACT_BYTES * routed_load(sw)
    dispatch_share = FP8_DISPATCH_BYTES_PER_ELEMENT / ACT_BYTES if sw.moe_dispatch_fp8 else 1.0
    network = None
    if sw.moe_dispatcher == "flex":
        _, n_out = group_domains(layouts.ep, layouts.etp, hw.scale_up.domain_size)
        network = copy * routed_remote_domains(model.moe, n_out)
    dispatch, combine = (group_time_s(Collective.ALL_TO_ALL, share * copy * k, layouts.ep, layouts.etp, hw, eff,
                                      None if network is None else share * network)
                         for share in (dispatch_share, 1.0))
    if sw.moe_dispatcher != "flex":
        return dispatch + combine
    kernels_s, measured = flex_layer_s(model, moe_tokens(layouts, seq), layouts.ep, layouts.etp, routed_load(sw),
                                       hw, sw, FP8_DISPATCH_BYTES_PER_ELEMENT)
    return np.where(measured, kernels_s, dispatch + combine)


def pp_transfer_s(model: ModelSpec, layouts: Layouts, seq: int, hw: HardwareSpec, eff: Efficiencies):
    """One activation (or gradient) send between neighbouring stages."""
    T = tokens_per_microbatch(layouts, seq)
    size = T * model.hidden_size * ACT_BYTES / where(layouts.sp, layouts.tp, 1)
    crosses = layouts.tp * layouts.cp * layouts.dp >= hw.scale_up.domain_size
    return where(layouts.pp > 1, p2p_time_s(size, crosses, layouts.tp * layouts.cp * layouts.dp, hw, eff), 0.0)


ZERO3_FORWARD_SHARE = 1.0 / 3.0
"""Of the three ZeRO-3 collectives per unit and micro-batch (``dp_traffic``: the forward's parameter
all-gather, the backward's all-gather and its gradient reduce-scatter; Rajbhandari et al. 2020,
sec. 7.2.2, 3 Psi per step), the share the forward runs."""


@dataclass(frozen=True)
class DpTraffic:
    grad_sync_s: np.ndarray
    """Once per step: gradient all-reduce or reduce-scatter."""
    param_gather_s: np.ndarray
    """Once per step: distributed-optimizer parameter all-gather (ZeRO 1/2)."""
    fsdp_copy_per_unit_s: np.ndarray
    """ZeRO-3 with ``sw.fsdp_copy_kernels``, per micro-batch and unit: FSDP2's copy kernels on
    the compute stream (``fsdp_copy_bytes_per_param``), not hidden by any collective."""
    fsdp_per_unit_s: np.ndarray
    """ZeRO-3, per micro-batch and per unit gathered on its own (one transformer layer, or one
    of its parameter tensors): parameter all-gathers forward and backward plus the gradient
    reduce-scatter, each a collective of its own (PyTorch FSDP wraps each block, Zhao et al.
    2023; DeepSpeed ZeRO-3 v0.3 gathered each parameter). Units are taken as equal shares of
    the parameters: time is (piecewise) linear in size, so mainly the count of latencies
    matters."""
    pp_accumulate_per_unit_s: np.ndarray
    """pp > 1 with ``sw.pp_grad_reduce`` stage_drain, per micro-batch and unit: FSDP2 accumulating the
    unsharded gradients on the compute stream (``pp_accumulate_bytes_per_param``, mean over the step)."""
    grad_copy_s: np.ndarray
    """The same, once per step for the GPU's parameters: the copy into the reduce-scatter input."""
    fsdp_root_s: np.ndarray
    """ZeRO-3 with ``sw.fsdp_root_group``, pp = 1, per micro-batch: the root group's gather and reduce-scatter."""


FSDP_GATHERS_PER_MICROBATCH = 2
"""All-gathers of a unit per micro-batch: forward, and backward again after resharding
(torchtitan's ``reshard_after_forward`` is true for every block but the last one and for the
root module without pipeline parallelism, parallelize_llama.py apply_fsdp at 9dec370 and the
``fsdp_reshard_after_forward = "default"`` of e7c0cae; the last block's second gather is
counted all the same, as the collectives are: one block's copy-out of a step)."""
FSDP_COPY_KERNELS_PER_MICROBATCH = 3
"""Copy kernels per gathered group and micro-batch: one ``split_with_sizes_copy`` per
all-gather and one ``_chunk_cat`` per reduce-scatter."""


def fsdp_copy_bytes_per_param(grad_reduce_in_fp32: bool) -> int:
    """HBM bytes per parameter and micro-batch that FSDP2 copies on the compute stream
    (_fsdp_collectives.py in torch/distributed/fsdp/_fully_shard, formerly
    torch/distributed/_composable/fsdp, as of late 2024):
    ``foreach_all_gather_copy_out`` waits for each all-gather on the current stream and
    ``torch.split_with_sizes_copy`` moves the flat bf16 output into the unsharded parameters
    (read 2, write 2 bytes), once per gather; ``foreach_reduce`` concatenates the bf16 unsharded
    gradients into the reduce-scatter input of ``reduce_dtype`` with ``torch._chunk_cat``
    (read 2, write 2 or 4), on the reduce-scatter stream, but the compute stream waits for it
    (``current_stream.wait_stream(reduce_scatter_stream)`` before the gradients are freed).
    14 bytes with fp32 reduction, 12 without. Not counted: the all-gather copy-in (a cast and a
    ``_foreach_copy_`` of the 1/n local shard, on its own copy-in stream) and, with fp32
    or bf16 reduction, no division kernel (``_init_grad_divide_factors`` picks ReduceOp.AVG) and
    no cast of the fp32 output. Megatron-Core needs none: ``_ParamAndGradBuffer`` makes every
    parameter and ``main_grad`` a view of the buffers its collectives use
    (megatron/core/distributed/param_and_grad_buffer.py)."""
    copy_out = FSDP_GATHERS_PER_MICROBATCH * 2 * PARAM_BYTES
    return copy_out + GRAD_16BIT_BYTES + grad_reduce_bytes(grad_reduce_in_fp32)


def pp_accumulate_bytes_per_param(grad_reduce_in_fp32: bool, num_mb) -> tuple:
    """(HBM bytes per parameter and micro-batch, mean over the step; bytes per parameter once a
    step) that FSDP2 moves on the compute stream under pipelining, where no backward reduces
    (``perfmodel.spec.pp_grad_reduce``, stage_drain). With a float32 ``reduce_dtype`` the first
    micro-batch's bf16 gradient is cast (``to_accumulated_grad_if_needed``: read 2, write 4) and
    each later one added (``accumulate_unsharded_grad_if_needed``: read 2 and 4, write 4); with
    bf16 autograd adds into ``.grad`` from the second on (read 2 and 2, write 2). At the end
    ``foreach_reduce`` copies the accumulated gradients into the reduce-scatter input
    (``torch._chunk_cat``: read and write the reduce type)."""
    m = floats(num_mb)
    g, r = GRAD_16BIT_BYTES, grad_reduce_bytes(grad_reduce_in_fp32)
    first, later = (g + r, g + r + r) if grad_reduce_in_fp32 else (0, g + g + g)
    return (first + later * (m - 1.0)) / m, 2 * r


def dp_traffic(dense_params_per_gpu, expert_params_per_gpu, root_params_per_gpu, layouts: Layouts,
               hw: HardwareSpec, eff: Efficiencies, fsdp_units, sw: SoftwareStack) -> DpTraffic:
    """Data-parallel traffic for the parameters one GPU holds (before ZeRO-3 sharding);
    ``fsdp_units`` is the number of separately gathered units they split into; gradients go in
    fp32 or 16 bits by ``sw.grad_reduce_in_fp32``.

    ``sw.fsdp_root_group`` (ZeRO-3, pp = 1): ``root_params_per_gpu`` of the dense parameters (embedding,
    final norm, output layer) are FSDP2's root group (torchtitan ``apply_fsdp``: ``fully_shard`` on
    each block, then on the model), not resharded after the forward (``FSDPState._lazy_init``): gathered
    as the forward opens, before any compute, and reduce-scattered after the last block's backward
    (the root's post-backward runs in the final callback, the optimizer waits for it); the units share
    the rest.

    ``sw.fsdp_list_api``: the ZeRO-3 collectives go through torch.distributed's list API
    (all_gather into, reduce_scatter from, a list of n per-rank tensors). ProcessGroupNCCL
    serves it through a flat buffer and copies each rank's chunk with its own copy kernel
    (after the all-gather, before the reduce-scatter): n more HBM-bound kernels moving the
    buffer once more, read and write, per collective."""
    n_dp = layouts.dp * layouts.cp
    n_edp = layouts.edp
    z = layouts.zero_stage
    grad_reduce_in_fp32, fsdp_list_api = sw.grad_reduce_in_fp32, sw.fsdp_list_api

    zero3 = z >= 3
    units = maximum(floats(fsdp_units), 1.0)
    # A collective no row uses is not worked out: the rows take zeros of the same shape instead.
    unused = zeros_of(z, units, dense_params_per_gpu, expert_params_per_gpu, n_dp, n_edp, layouts.tp, layouts.ep,
                      layouts.etp)
    wanted = {Collective.ALL_REDUCE: any_of(z == 0),
              Collective.REDUCE_SCATTER: any_of((z != 0) & np.logical_not(zero3)),
              Collective.ALL_GATHER: any_of((z == 1) | (z == 2))}

    def sync(params, n, stride, list_api=False, wanted=wanted):
        # No parameters of a kind (no experts in a dense model): no collective, no latency.
        n = where(floats(params) > 0, n, 1)
        size = params * grad_reduce_bytes(grad_reduce_in_fp32)
        ar = group_time_s(Collective.ALL_REDUCE, size, n, stride, hw, eff) if wanted[Collective.ALL_REDUCE] else unused
        rs = group_time_s(Collective.REDUCE_SCATTER, size, n, stride, hw, eff) \
            if wanted[Collective.REDUCE_SCATTER] else unused
        ag = group_time_s(Collective.ALL_GATHER, params * PARAM_BYTES, n, stride, hw, eff) \
            if wanted[Collective.ALL_GATHER] else unused
        if list_api:   # a group of one has no collective and so no copies
            rs = rs + memory_time_s(2.0 * size, hw, eff, kernels=n) * (n > 1)
            ag = ag + memory_time_s(2.0 * params * PARAM_BYTES, hw, eff, kernels=n) * (n > 1)
        return ar, rs, ag

    ar_d, rs_d, ag_d = sync(dense_params_per_gpu, n_dp, layouts.tp)
    ar_e, rs_e, ag_e = sync(expert_params_per_gpu, n_edp, layouts.ep * layouts.etp)
    ar, rs, ag = ar_d + ar_e, rs_d + rs_e, ag_d + ag_e
    grad = where(z == 0, ar, where(zero3, 0.0, rs))
    gather = where((z == 1) | (z == 2), ag, 0.0)
    root_s = filled(grad, 0.0)
    if any_of(zero3):   # ZeRO-3 gathers and reduces each unit
        only = {Collective.ALL_REDUCE: False, Collective.REDUCE_SCATTER: True, Collective.ALL_GATHER: True}
        root = where(zero3 & (layouts.pp == 1), root_params_per_gpu, 0.0) if sw.fsdp_root_group else 0.0
        _, rs_ud, ag_ud = sync((dense_params_per_gpu - root) / units, n_dp, layouts.tp, fsdp_list_api, only)
        if sw.fsdp_root_group:
            _, rs_root, ag_root = sync(root, n_dp, layouts.tp, fsdp_list_api, only)
            root_s = rs_root + ag_root
        _, rs_ue, ag_ue = sync(expert_params_per_gpu / units, n_edp, layouts.ep * layouts.etp, fsdp_list_api, only)
        fsdp = where(zero3, 2.0 * (ag_ud + ag_ue) + rs_ud + rs_ue, 0.0)
    else:
        fsdp = where(zero3, unused, 0.0)
    copy = filled(fsdp, 0.0)
    if sw.fsdp_copy_kernels:   # FSDP2 wraps nothing in a group of one (torchtitan: dp_shard 1)
        for params, n in ((dense_params_per_gpu, n_dp), (expert_params_per_gpu, n_edp)):
            group = (floats(params) > 0) & (n > 1) & zero3
            copy = copy + group * memory_time_s(params / units * fsdp_copy_bytes_per_param(grad_reduce_in_fp32), hw,
                                                eff, kernels=FSDP_COPY_KERNELS_PER_MICROBATCH)
    accumulate, grad_copy = filled(fsdp, 0.0), filled(fsdp, 0.0)
    if pp_grad_reduce(sw.pp_grad_reduce).accumulates_unsharded:   # FSDP2 wraps stages where dp_shard > 1
        staged = (layouts.pp > 1) & (n_dp > 1)
        per_mb, once = pp_accumulate_bytes_per_param(grad_reduce_in_fp32, layouts.num_mb)
        params = dense_params_per_gpu + expert_params_per_gpu
        accumulate = staged * memory_time_s(params / units * per_mb, hw, eff)
        grad_copy = staged * memory_time_s(params * once, hw, eff, kernels=units)
    return DpTraffic(grad_sync_s=grad, param_gather_s=gather, fsdp_copy_per_unit_s=copy, fsdp_per_unit_s=fsdp,
                     pp_accumulate_per_unit_s=accumulate, grad_copy_s=grad_copy, fsdp_root_s=root_s)
