"""Transformer shape -> parameters, FLOPs and a per-layer inventory of operations.

Notation (Narayanan et al. 2021; Korthikanti et al. 2022):

=====  ===========================================  =====  ================================
l      layers                                        s      sequence length
h      hidden size                                   V      vocabulary
a      query heads                                   g      key/value heads (GQA)
d      head dim                                      f      dense MLP width
E      routed experts                                k_e    routed experts per token (top-k)
f_e    expert MLP width                              S_e    shared experts
=====  ===========================================  =====  ================================

Every weight matrix appears once, as a GEMM ``Op``; parameter counts and FLOPs are both
derived from that inventory, so the two can never disagree. A GEMM of a (tokens x k) input
with a (k x n) weight costs ``2 * tokens * k * n`` FLOPs forward and twice that backward
(input and weight gradients), which is the ``6 * N * D`` rule (Kaplan et al. 2020).
"""

from __future__ import annotations

import functools

from perfmodel.formulas.eager import (
    EAGER_RMSNORM_BWD_BYTES_PER_ELEMENT,
    EAGER_RMSNORM_BWD_KERNELS,
    EAGER_RMSNORM_FWD_BYTES_PER_ELEMENT,
    EAGER_RMSNORM_FWD_KERNELS,
    compiled_rope_ops,
    eager_elementwise_ops,
)
from perfmodel.formulas.megatron_eager import megatron_eager_ops, with_clamp
from perfmodel.formulas.ops import (
    ACT_BYTES,
    FP32_BYTES,
    MLA_LATENT_NORM_OP,
    QK_NORM_OP,
    LayerKind,
    Op,
    OpKind,
    TpSplit,
)
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.software import SoftwareStack

BACKWARD_OVER_FORWARD = 2
"""Backward GEMM work = input gradient + weight gradient = 2x forward (Narayanan et al. 2021, sec. 3)."""
ATTENTION_MATMULS_FWD = 2
"""Q K^T and P V: two batched matmuls in the attention core forward."""
MEMO_SIZE = 1024
"""Distinct (model, layer kind, software stack) inventories kept (``functools.lru_cache``): the
inventories depend on nothing else, so a prediction, a search or a validation run builds each
once, not once per layer per call (a few kilobytes each)."""


def _window(m: ModelSpec) -> dict:
    return dict(attn_window=m.attention_window, attn_window_share=m.num_windowed_layers / m.num_layers)


def _attention_ops(m: ModelSpec) -> list[Op]:
    h, a, g = m.hidden_size, m.num_attention_heads, m.kv_heads
    if m.mla is not None:
        x = m.mla
        qk = x.qk_nope_head_dim + x.qk_rope_head_dim
        ops = []
        if x.q_lora_rank:
            ops += [Op("attention/q_down", OpKind.GEMM, k=h, n=x.q_lora_rank),
                    Op("attention/q_up", OpKind.GEMM, k=x.q_lora_rank, n=a * qk, tp_split=TpSplit.COLUMN)]
        else:
            ops += [Op("attention/q", OpKind.GEMM, k=h, n=a * qk, tp_split=TpSplit.COLUMN)]
        ops += [
            Op("attention/kv_down", OpKind.GEMM, k=h, n=x.kv_lora_rank + x.qk_rope_head_dim),
            Op("attention/kv_up", OpKind.GEMM, k=x.kv_lora_rank,
               n=a * (x.qk_nope_head_dim + x.v_head_dim), tp_split=TpSplit.COLUMN),
            Op("attention/core", OpKind.ATTENTION, attn_heads=a, attn_qk_dim=qk, attn_v_dim=x.v_head_dim,
               **_window(m)),
            Op("attention/out", OpKind.GEMM, k=a * x.v_head_dim, n=h, tp_split=TpSplit.ROW),
        ]
        return ops
    d = m.attn_head_dim
    return [
        Op("attention/qkv", OpKind.GEMM, k=h, n=(a + 2 * g) * d, tp_split=TpSplit.COLUMN),
        Op("attention/core", OpKind.ATTENTION, attn_heads=a, attn_qk_dim=d, attn_v_dim=d, **_window(m)),
        Op("attention/out", OpKind.GEMM, k=a * d, n=h, tp_split=TpSplit.ROW),
    ]


def _mlp_mats(m: ModelSpec) -> int:
    """Weight matrices in the first (up) projection: 2 for gated (gate + up), 1 otherwise."""
    return 2 if m.gated_mlp else 1


def _dense_mlp_ops(m: ModelSpec) -> list[Op]:
    h, f = m.hidden_size, m.ffn_hidden_size
    return [
        Op("mlp/up", OpKind.GEMM, k=h, n=_mlp_mats(m) * f, tp_split=TpSplit.COLUMN),
        Op("mlp/down", OpKind.GEMM, k=f, n=h, tp_split=TpSplit.ROW),
    ]


def _moe_mlp_ops(m: ModelSpec) -> list[Op]:
    h, e = m.hidden_size, m.moe
    fe, E = e.expert_ffn_hidden_size, e.num_experts
    ops = [Op("moe/router", OpKind.GEMM, k=h, n=E)]
    if e.num_shared_experts:
        sf = e.num_shared_experts * fe
        ops += [Op("moe/shared_up", OpKind.GEMM, k=h, n=_mlp_mats(m) * sf, tp_split=TpSplit.COLUMN),
                Op("moe/shared_down", OpKind.GEMM, k=sf, n=h, tp_split=TpSplit.ROW)]
    frac = e.top_k / E
    ops += [
        Op("moe/expert_up", OpKind.GEMM, k=h, n=_mlp_mats(m) * fe, count=E, tokens_frac=frac,
           tp_split=TpSplit.COLUMN, expert=True),
        Op("moe/expert_down", OpKind.GEMM, k=fe, n=h, count=E, tokens_frac=frac,
           tp_split=TpSplit.ROW, expert=True),
    ]
    return ops


def _memory_ops(m: ModelSpec, kind: LayerKind, sw: SoftwareStack) -> list[Op]:
    """Elementwise traffic per layer token, forward (Korthikanti et al. 2022, sec. 4.1 tensors).

    fused (Transformer Engine / Megatron-Core kernels, or torch.compile): two norms (read h,
    write h), two residual adds (read 2h, write h), the MLP activation (read the up-projection
    output, write its activated half). Rotary embeddings are applied inside the fused
    attention path and are not counted; Megatron-Core's eager paths beside the fused kernels
    (unfused rotary, unfused bias adds, the per-expert bias loop, a GLU's clamp) are
    ``megatron_eager``'s, where the software and the model say they run. ``compiled``: the fused ops, and the rotary embedding and
    repeat_kv that torch.compile leaves of torchtitan's block (``eager.compiled_rope_ops``).
    ``eager``: see ``eager.eager_elementwise_ops``.
    """
    h, B = m.hidden_size, ACT_BYTES
    width = (m.ffn_hidden_size if kind is LayerKind.DENSE
             else m.moe.expert_ffn_hidden_size * m.moe.top_k * routed_load(sw))
    if kind is LayerKind.MOE and m.moe.num_shared_experts:
        width += m.moe.expert_ffn_hidden_size * m.moe.num_shared_experts
    act_in = _mlp_mats(m) * width
    residual = Op("residual", OpKind.MEMORY, bytes_per_token=2 * (3 * h) * B, kernels=2)   # two adds, a kernel each
    if sw.elementwise_kernels == "eager":
        attention_side, activation = eager_elementwise_ops(m, width)
        ops = attention_side + [residual, activation]
    else:
        activation = Op("mlp/activation", OpKind.MEMORY, bytes_per_token=(act_in + width) * B)
        if sw.elementwise_kernels == "fused" and m.clamped_glu and kind is LayerKind.MOE and not sw.moe_te_op_fuser:
            activation = with_clamp(activation, _mlp_mats(m) * m.moe.expert_ffn_hidden_size * routed_copies(m, sw))
        ops = [Op("norm", OpKind.MEMORY, bytes_per_token=2 * (2 * h) * B), residual, activation]
        if sw.elementwise_kernels == "compiled":
            ops += compiled_rope_ops(m)
        if sw.elementwise_kernels == "fused":
            ops += megatron_eager_ops(m, kind is LayerKind.MOE, sw, routed_copies(m, sw) if m.moe else 0.0)
    norm = qk_norm_op(m, sw.elementwise_kernels == "eager")
    if norm is not None:
        ops.append(norm)
    if kind is LayerKind.MOE:
        ops += moe_elementwise_ops(m, sw)
    return ops


def qk_norm_op(m: ModelSpec, eager: bool) -> Op | None:
    """The attention's own norms, per layer token: RMSNorm over each head's query and key
    (``ModelSpec.qk_norm``; a heads x d and kv_heads x d wide tensor, split by tensor parallelism
    with the heads), or MLA's two latent norms (the query latent, q_lora_rank wide, and the
    key/value latent, kv_lora_rank wide, between the down- and up-projections: DeepSeek-V2
    report, arXiv 2405.04434, sec. 2.1.2-2.1.3 with its "additional RMS Norm layers after the
    compressed latent vectors"; transformers ``DeepseekV3Attention`` ``q_a_layernorm``,
    ``kv_a_layernorm``; Megatron-Core ``MLASelfAttention`` ``q_layernorm``, ``kv_layernorm``),
    on the sequence-parallel shard like the layer's own norms. None when there are none.

    A kernel per tensor. Fused (Transformer Engine's RMSNorm, Inductor) it reads and writes each
    element once forward, twice that backward, as the layer's norms (``_memory_ops``); eager,
    PyTorch's RMSNorm kernel by kernel (``eager.EAGER_RMSNORM_FWD_BYTES_PER_ELEMENT``)."""
    if m.mla is not None:
        name, widths = MLA_LATENT_NORM_OP, [w for w in (m.mla.q_lora_rank, m.mla.kv_lora_rank) if w]
    elif m.qk_norm:
        name, widths = QK_NORM_OP, [m.num_attention_heads * m.attn_head_dim, m.kv_heads * m.attn_head_dim]
    else:
        return None
    elements = sum(widths)
    if eager:
        return Op(name, OpKind.MEMORY, bytes_per_token=EAGER_RMSNORM_FWD_BYTES_PER_ELEMENT * elements,
                  kernels=len(widths) * EAGER_RMSNORM_FWD_KERNELS,
                  bwd_bytes_per_token=EAGER_RMSNORM_BWD_BYTES_PER_ELEMENT * elements,
                  bwd_kernels=len(widths) * EAGER_RMSNORM_BWD_KERNELS, stream_class="norm")
    return Op(name, OpKind.MEMORY, bytes_per_token=(ACT_BYTES + ACT_BYTES) * elements, kernels=len(widths))


ROUTER_KERNELS_FWD = {False: 72, True: 31}
"""Kernels of the MoE router's forward, unfused and with --moe-router-fusion: 72 and 31, as
the Megatron-Core team counted them on DeepSeek-V3's router (score function, group-limited
top-k, routing map, auxiliary losses; Megatron-LM docs/discussions/deepseek-v3-gb200-optimization,
sec. 2.1.4, TE PR 1883). A plain softmax top-k router runs somewhat fewer; no published count."""
ROUTER_SCORE_PASSES = {False: 10, True: 5}
"""Full passes over the [tokens, experts] fp32 score tensor in the router's forward, counted
from Megatron-Core core_r0.13 moe_utils.topk_softmax_with_capacity and the switch load-balancing
loss. Unfused: top-k reads the logits (1), two zeros_like tensors (2), the int conversion of the
routing map (2), its bool cast (1.25: read 4 bytes, write 1) and token count (0.25), the
auxiliary loss's softmax (2) and its sum over tokens (1), about 10 in all; fused (TE
fused_topk_with_score_function, fused_compute_score_for_moe_aux_loss, fused_moe_aux_loss):
read the logits and write probabilities and map (2.25), read and write the aux-loss scores
(2), read them for the loss (1), about 5."""
PERMUTE_KERNELS = {False: 7, True: 1}
"""Kernels of one token permutation (and of one unpermutation): unfused, Megatron-Core
core_r0.13 moe_utils.permute (routing map transpose, masked_select of token indices and of
probabilities, each with its transpose, index_select) and unpermute (masked_select of the
probabilities with its transposes, the multiply, zero-fill, scatter_add); fused, one
Transformer Engine kernel each (fused_permute_with_probs, fused_unpermute)."""


def routed_copies(m: ModelSpec, sw: SoftwareStack) -> float:
    """Routed copies of a layer token on the busiest expert-parallel rank: top_k x ``routed_load``."""
    return m.moe.top_k * routed_load(sw)


def routed_load(sw: SoftwareStack) -> float:
    """Routed tokens on the busiest expert-parallel rank over the balanced mean (T top_k / E per
    expert): the imbalance when dropless; at most the capacity factor with token drop; exactly
    the capacity factor when padded to capacity (Megatron-Core moe_utils.topk_softmax_with_capacity
    and get_capacity). 1 for the balanced, dropless routing of NVIDIA's benchmark recipes."""
    cf = sw.moe_expert_capacity_factor
    if cf is None:
        return sw.moe_load_imbalance
    return cf if sw.moe_pad_expert_input_to_capacity else min(sw.moe_load_imbalance, cf)


def moe_elementwise_ops(m: ModelSpec, sw: SoftwareStack) -> list[Op]:
    """The MoE layer's memory-bound work beside its GEMMs and all-to-alls, per layer token:

    - the router's score arithmetic (``ROUTER_KERNELS_FWD``, ``ROUTER_SCORE_PASSES`` over the
      fp32 [tokens, experts] scores), fused or not (``sw.moe_router_fusion``);
    - token permutation before the experts and unpermutation after, each reading and writing
      top_k copies of the h-wide token; unfused (``sw.moe_permute_fusion`` off), the
      unpermute also multiplies every copy by its probability and zero-fills the output in
      passes of their own (``PERMUTE_KERNELS``);
    - with the all-to-all dispatcher, the sort by local expert after dispatch and its inverse
      before combine (Megatron-Core MoEAlltoAllTokenDispatcher dispatch_postprocess /
      combine_preprocess, "Permutation 2", run when a GPU holds several experts); the flex
      dispatcher (DeepEP, HybridEP) receives unique tokens and permutes once.

    Routed copies scale with ``routed_load``: the busiest rank sets the pace."""
    h, B, E, k = m.hidden_size, ACT_BYTES, m.moe.num_experts, m.moe.top_k
    load = routed_load(sw)
    fused = sw.moe_permute_fusion
    permute_pair = 2 * 2 * k * load * h * B
    unfused_extra = 0 if fused else (2 * k * load + 1) * h * B   # probability multiply, zero-fill
    ops = [Op("moe/router_scores", OpKind.MEMORY, bytes_per_token=ROUTER_SCORE_PASSES[sw.moe_router_fusion] * E * FP32_BYTES,
              kernels=ROUTER_KERNELS_FWD[sw.moe_router_fusion]),
           Op("moe/permute", OpKind.MEMORY, bytes_per_token=permute_pair + unfused_extra,
              kernels=2 * PERMUTE_KERNELS[fused])]
    if sw.moe_dispatcher == "alltoall":
        ops.append(Op("moe/sort_by_local_expert", OpKind.MEMORY, bytes_per_token=2 * 2 * k * load * h * B,
                      multi_local_experts_only=True))
    return ops


@functools.lru_cache(maxsize=MEMO_SIZE)
def weight_ops(m: ModelSpec, kind: LayerKind) -> tuple[Op, ...]:
    """The GEMMs and the attention core of one layer of the given kind: the operations that hold
    the layer's weights and FLOPs, the same whatever software runs them."""
    mlp = _dense_mlp_ops(m) if kind is LayerKind.DENSE else _moe_mlp_ops(m)
    return tuple(_attention_ops(m) + mlp)


@functools.lru_cache(maxsize=MEMO_SIZE)
def layer_ops(m: ModelSpec, kind: LayerKind, sw: SoftwareStack) -> tuple[Op, ...]:
    """Operations of one transformer layer of the given kind: ``weight_ops`` and the
    elementwise traffic the software stack runs beside them (``sw.elementwise_kernels``: fused
    or eager norms, rotary embedding and activation; ``sw.moe_dispatcher``: the MoE
    permutation passes)."""
    return weight_ops(m, kind) + tuple(_memory_ops(m, kind, sw))


EAGER_FP32_CE_FWD_BYTES_PER_LOGIT = (ACT_BYTES + FP32_BYTES) + (3 * FP32_BYTES + FP32_BYTES)
"""``F.cross_entropy(logits.float(), labels)`` run eagerly (torchtitan 9dec370 train.py
``loss_fn``), forward: the cast reads 2 and writes 4 bytes; the log-softmax reads its row three
times (maximum, sum of exponentials, output) and writes it once, 16 bytes: a 128,256-wide fp32
row (513 kB) does not fit on chip, so PyTorch's ``cunn_SoftMaxForward`` streams it once per
pass. Measured: 5.55 ms for 1.05e9 logits on an H100 (calibration/results/
nvidia-h100-80gb-hbm3-2026-11-22/step_check_llama3-8b_4l_s8192/kernels.txt), 16 bytes per
logit at 3.0 TB/s, the suite's STREAM rate. The NLL gather touches one value per token.
22 bytes per logit in 3 kernels."""
EAGER_FP32_CE_BWD_BYTES_PER_LOGIT = FP32_BYTES + 4 * FP32_BYTES + (FP32_BYTES + ACT_BYTES)
"""Backward of the same loss: the NLL backward zero-fills the fp32 log-probability gradient
(writes 4) and scatters one value per token; the log-softmax backward, grad - exp(out) *
sum(grad), reads the gradient for the sum, then the gradient and the output, and writes, 16
bytes (measured 5.72 ms per 1.05e9 logits, same file); the cast back to bf16 reads 4 and writes
2. 26 bytes per logit in 4 kernels."""


def head_weight_op(m: ModelSpec) -> Op:
    """The output layer's logits GEMM."""
    return Op("output/logits", OpKind.GEMM, k=m.hidden_size, n=m.vocab_size, tp_split=TpSplit.COLUMN)


@functools.lru_cache(maxsize=MEMO_SIZE)
def head_ops(m: ModelSpec, sw: SoftwareStack) -> tuple[Op, ...]:
    """Output layer: logits GEMM and the softmax cross-entropy over V (``sw.cross_entropy``
    fused: read and write logits; eager_fp32: the eager fp32 upcast and log-softmax,
    ``EAGER_FP32_CE_FWD_BYTES_PER_LOGIT`` and ``EAGER_FP32_CE_BWD_BYTES_PER_LOGIT``)."""
    V = m.vocab_size
    if sw.cross_entropy == "eager_fp32":
        loss = Op("output/cross_entropy", OpKind.MEMORY, bytes_per_token=EAGER_FP32_CE_FWD_BYTES_PER_LOGIT * V,
                  kernels=3, bwd_bytes_per_token=EAGER_FP32_CE_BWD_BYTES_PER_LOGIT * V, bwd_kernels=4)
    else:
        loss = Op("output/cross_entropy", OpKind.MEMORY, bytes_per_token=3 * V * ACT_BYTES)
    return (head_weight_op(m), loss)


@functools.lru_cache(maxsize=MEMO_SIZE)
def mtp_extra_ops(m: ModelSpec) -> tuple[Op, ...]:
    """Per MTP module beyond its transformer layer: the 2h -> h projection (DeepSeek-V3, sec. 2.2)."""
    h = m.hidden_size
    return (Op("mtp/projection", OpKind.GEMM, k=2 * h, n=h),)


@functools.lru_cache(maxsize=MEMO_SIZE)
def layer_kinds(m: ModelSpec) -> tuple[LayerKind, ...]:
    """Kind of each of the l layers in order: the leading dense layers, then every
    ``interleave_step``-th layer MoE (``MoeSpec.interleave_step``)."""
    if m.moe is None:
        return (LayerKind.DENSE,) * m.num_layers
    lead, step = m.moe.num_dense_layers, m.moe.interleave_step
    rest = tuple(LayerKind.MOE if (j + 1) % step == 0 else LayerKind.DENSE
                 for j in range(m.num_layers - lead))
    return (LayerKind.DENSE,) * lead + rest


def mtp_layer_kind(m: ModelSpec) -> LayerKind:
    return LayerKind.MOE if m.moe is not None else LayerKind.DENSE
