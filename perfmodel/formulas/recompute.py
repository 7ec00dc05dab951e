"""Selective activation recompute: which forward work the backward redoes, and what stays stored.

The scenario field ``selective_recompute`` (used with ``recompute: selective``) names a policy
or lists Megatron-Core modules:

``core_attn``
    Megatron-Core's default (``--recompute-granularity selective``, recompute module
    ``core_attn``; Korthikanti et al. 2022, sec. 5): the attention core is recomputed, every
    other activation is stored. With flash attention nothing of size s x s is stored anyway,
    so the memory is that of no recompute.

``op_sac``
    torchtitan's operator-level policy (``activation_checkpoint.selective_ac_option = 'op'``,
    the 8B preset; ``torchtitan/parallelisms/parallelize_llama.py`` at commit 9dec370,
    ``_save_list`` and ``_custom_policy``): inside each transformer block the outputs of
    ``aten.mm``, of SDPA and of the tensor-parallel reduce-scatters are saved, except every
    second ``mm`` in execution order; everything else is recomputed in the backward. The
    Llama block's matmuls run in the order wq, wk, wv, wo, w1, w3, w2 (w1, w2 without a
    gate), so wk, wo and w3 (w2) are recomputed, and so are all elementwise ops (norms,
    rotary embedding, activation, residual adds). Defined for that block only: dense
    layers, no MLA.

``save_qkv_proj``
    MaxText's remat policy of that name (``layers/decoders.py``: each decoder layer under
    ``jax.checkpoint`` with ``save_only_these_names('query_proj', 'value_proj', 'key_proj',
    'qkv_proj')``): the Q, K and V projection outputs are saved beside the layer input, and the
    backward redoes the rest of the layer's forward (norms, rotary embedding, attention core,
    output projection, MLP). Dense layers without MLA only.

a list of Megatron-Core ``recompute_modules``
    (``TransformerConfig.recompute_modules``; Megatron-LM ``megatron/core/transformer/``
    ``transformer_layer.py``, ``multi_latent_attention.py``, ``moe/experts.py``, commit
    d98e8a6). ``core_attn``, ``mlp``, ``moe`` and ``shared_experts`` checkpoint a submodule
    (its input is kept, everything inside is recomputed); ``layernorm``, ``mla_up_proj`` and
    ``moe_act`` run the op under ``CheckpointWithoutOutput`` and free its output once the
    next op has consumed it (``discard_output_and_register_recompute``), so the freed tensor
    is that output, whoever else saved it:

    ==============  ==========================================  ==============================
    module          recomputed forward work                     no longer stored, per token
    ==============  ==========================================  ==============================
    core_attn       the attention core                          nothing with flash attention
                                                                (s x s scores without it)
    layernorm       norms not fused into the next GEMM: the     each such norm's output (the
                    MLA input norm, the MoE pre-MLP norm (TE     next GEMM's input)
                    spec fuses the others into linear_qkv /
                    linear_fc1, and IdentityOp is skipped)
    mla_up_proj     the latent norms, q_up and kv_up GEMMs,      Q, K and V (the core's inputs)
                    RoPE and the Q/K/V assembly (Megatron-Core
                    ``qkv_up_proj_and_rope_apply``)
    moe_act         the routed experts' activation              its output (fc2's input), per
                                                                routed copy
    mlp             the dense MLP (dense layers only)           the MLP input and internals
    moe             the MoE layer, all-to-alls included         everything but its input
    shared_experts  the shared experts                          their internals
    ==============  ==========================================  ==============================
"""

from __future__ import annotations

from typing import get_args

import numpy as np

from perfmodel.formulas.compute import BlockTime
from perfmodel.formulas.ops import MLA_LATENT_NORM_OP, MLA_QKV_OP
from perfmodel.formulas.scalars import filled, floats, maximum, minimum
from perfmodel.formulas.workload import ACT_BYTES, FP32_BYTES, LayerKind, OpKind
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.scenario import Recompute
from perfmodel.spec.software import selective_modules

NORMS_PER_LAYER = 2
"""The fused ``norm`` op of ``workload`` counts a layer's two norms (input and pre-MLP)."""


def _llama_matmul_order(m: ModelSpec) -> list[tuple[str, float]]:
    """(perfmodel GEMM op, output width) of each matmul of torchtitan's Llama block, in order."""
    d, a, g, f = m.attn_head_dim, m.num_attention_heads, m.kv_heads, m.ffn_hidden_size
    mlp_in = [("mlp/up", f), ("mlp/up", f)] if m.gated_mlp else [("mlp/up", f)]
    return ([("attention/qkv", a * d), ("attention/qkv", g * d), ("attention/qkv", g * d),
             ("attention/out", m.hidden_size)] + mlp_in + [("mlp/down", m.hidden_size)])


def op_sac_recomputed_fraction(m: ModelSpec) -> dict[str, float]:
    """Fraction of each GEMM op's forward FLOPs that op-level SAC recomputes.

    perfmodel fuses wq, wk, wv into attention/qkv and w1, w3 into mlp/up; within one op every
    matmul has the same input width, so FLOPs split as output widths do.
    """
    order = _llama_matmul_order(m)
    total: dict[str, float] = {}
    redone: dict[str, float] = {}
    for i, (name, width) in enumerate(order, start=1):
        total[name] = total.get(name, 0.0) + width
        if i % 2 == 0:
            redone[name] = redone.get(name, 0.0) + width
    return {name: redone.get(name, 0.0) / total[name] for name in total}


def standalone_norms(m: ModelSpec, kind: LayerKind) -> int:
    """Norms of a layer that Megatron-Core's Transformer Engine spec does not fuse into the
    following GEMM (gpt_layer_specs.py, ``get_gpt_layer_with_transformer_engine_submodules``):
    the MLA input norm (down-projections are plain linears) and the MoE pre-MLP norm (the
    router and the dispatcher read it). The others live inside TELayerNormColumnParallelLinear."""
    return int(m.mla is not None) + int(kind is LayerKind.MOE)


def _module_op_shares(module: str, m: ModelSpec, kind: LayerKind) -> dict[str, float]:
    """Share of each op's forward work that recomputing ``module`` redoes, for one layer kind."""
    moe = kind is LayerKind.MOE
    if module == "core_attn":
        return {"attention/core": 1.0}
    if module == "layernorm":
        return {"norm": standalone_norms(m, kind) / NORMS_PER_LAYER}
    if module == "mla_up_proj":
        return {"attention/q_up": 1.0, "attention/kv_up": 1.0, "attention/rope": 1.0, MLA_QKV_OP: 1.0,
                MLA_LATENT_NORM_OP: 1.0}
    if module == "mlp":
        return {} if moe else {"mlp/up": 1.0, "mlp/down": 1.0, "mlp/activation": 1.0}
    if not moe:
        return {}
    k, shared = m.moe.top_k, m.moe.num_shared_experts
    if module == "moe_act":
        return {"mlp/activation": k / (k + shared)}
    if module == "shared_experts":
        return {"moe/shared_up": 1.0, "moe/shared_down": 1.0, "mlp/activation": shared / (k + shared)}
    if module == "moe":
        return {name: 1.0 for name in ("moe/router", "moe/shared_up", "moe/shared_down", "moe/expert_up",
                                       "moe/expert_down", "moe/router_scores", "moe/permute", "moe/sort_by_local_expert",
                                       "mlp/activation")}
    raise ValueError(f"unknown recompute module {module!r}")


def module_op_shares(modules, m: ModelSpec, kind: LayerKind) -> dict[str, float]:
    """Union of the modules' shares: parts of one op are disjoint (routed and shared
    activation), and a module that covers an op whole caps it at 1."""
    out: dict[str, float] = {}
    for module in modules:
        for name, share in _module_op_shares(module, m, kind).items():
            out[name] = min(1.0, out.get(name, 0.0) + share)
    return out


def selective_recompute_s(block: BlockTime, policy, m: ModelSpec, kind: LayerKind) -> np.ndarray:
    """Forward time the backward redoes per layer and micro-batch under a selective policy
    (compute only; ``step`` adds the all-to-alls that ``moe`` recompute repeats)."""
    if policy == "save_qkv_proj":
        return block.fwd_s - sum((t.fwd_s for t in block.ops if t.name == "attention/qkv"),
                                 np.zeros_like(block.mem_fwd_s))
    if policy != "op_sac":
        share = module_op_shares(selective_modules(policy), m, kind)
        return sum((t.fwd_s * share.get(t.name, 0.0) for t in block.ops), np.zeros_like(block.mem_fwd_s))
    frac = op_sac_recomputed_fraction(m)
    gemm = sum((t.fwd_s * frac.get(t.name, 0.0) for t in block.ops if t.kind is OpKind.GEMM),
               np.zeros_like(block.mem_fwd_s))
    return gemm + block.mem_fwd_s


def op_sac_saved_bytes_per_token(m: ModelSpec, t, r):
    """Bytes one layer stores per token it holds under op-level SAC (t: tp; r: tp with SP, else 1).

    The block input (checkpoint input, sequence-sharded), the saved matmul outputs wq (a d),
    wv (g d), w1 (f) and w2 (h: under tensor parallelism a full-width partial sum, not
    sharded), the SDPA output (a d) and its fp32 log-sum-exp (one value per head); with
    tp > 1 also the two reduce-scatter outputs (h each, sequence-sharded).
    """
    t = np.asarray(t, dtype=float)
    h, a, g, d, f = m.hidden_size, m.num_attention_heads, m.kv_heads, m.attn_head_dim, m.ffn_hidden_size
    B = ACT_BYTES
    per_tp_shard = B * (a * d + f + a * d) + FP32_BYTES * a
    wv_out = B * d * maximum(g / t, 1)                 # KV heads replicate when g < t
    reduce_scatter_outputs = np.where(t > 1, 2 * B * h, 0.0)
    return B * h / r + per_tp_shard / t + wv_out + B * h + reduce_scatter_outputs / r


def save_qkv_saved_bytes_per_token(m: ModelSpec, t, r):
    """Bytes one layer stores per token it holds under MaxText's save_qkv_proj (t: tp; r: tp
    with SP, else 1): the layer input (the checkpoint's, sequence-sharded), Q (a d, split over
    tp) and K, V (g d each; KV heads replicate when g < t)."""
    t = np.asarray(t, dtype=float)
    B, h, a, g, d = ACT_BYTES, m.hidden_size, m.num_attention_heads, m.kv_heads, m.attn_head_dim
    return B * h / r + B * a * d / t + 2 * B * d * maximum(g / t, 1)


def recomputed_layer_fraction(m: ModelSpec, L, recompute_num_layers: int | None) -> np.ndarray:
    """Share of layers that ``recompute: full`` recomputes: all of them, or with the block
    method the first N of each model chunk of l / (p v) layers (Megatron-Core
    ``TransformerBlock._checkpointed_forward``, ``recompute_method == 'block'``)."""
    if recompute_num_layers is None:
        return np.ones(len(L))
    per_chunk = m.num_layers / floats(L.pp * L.vpp)
    return minimum(recompute_num_layers, per_chunk) / per_chunk


RECOMPUTE_MODES: tuple[str, ...] = get_args(Recompute)
"""The recompute modes; a mode's code is its place here (``layer_recompute_s`` over runs of modes)."""


def runs_under(recompute, mode: str):
    """Whether the rows run under recompute ``mode``: a bool where ``recompute`` is a mode, else an
    array (``recompute``: each row's mode's code in ``RECOMPUTE_MODES``)."""
    return recompute == mode if isinstance(recompute, str) else recompute == RECOMPUTE_MODES.index(mode)


def layer_recompute_s(mode, block: BlockTime, tp_fwd_s, cp_fwd_s, ep_redo_s, m: ModelSpec, L, sw,
                      kind: LayerKind) -> np.ndarray:
    """Forward time the backward redoes per layer and micro-batch under recompute ``mode`` (or each
    row's, ``mode`` its code in ``RECOMPUTE_MODES``, the term of each mode picked per row): under
    ``full`` the recomputed layers' share (``recomputed_layer_fraction``) of the forward with its
    exposed TP and CP traffic and its all-to-alls (``ep_redo_s``); under ``selective`` the policy's
    share (``selective_recompute_s``), with the all-to-alls again where it redoes ``moe``, and the
    layer's collectives where it saves only the QKV projection; nothing under ``none``."""
    if not isinstance(mode, str):
        return np.select([mode == i for i in range(len(RECOMPUTE_MODES))],
                         [layer_recompute_s(rc, block, tp_fwd_s, cp_fwd_s, ep_redo_s, m, L, sw, kind)
                          for rc in RECOMPUTE_MODES])
    if mode == "full":
        return recomputed_layer_fraction(m, L, sw.recompute_num_layers) * (block.fwd_s + tp_fwd_s + cp_fwd_s
                                                                           + ep_redo_s)
    if mode == "selective":
        recompute = selective_recompute_s(block, sw.selective_recompute, m, kind)
        if "moe" in selective_modules(sw.selective_recompute):
            recompute = recompute + ep_redo_s       # the recomputed layer dispatches and combines again
        if sw.selective_recompute == "save_qkv_proj":
            # the redone forward repeats the layer's collectives; counting the all-gather
            # before the saved QKV projection too makes this an upper bound under SP
            recompute = recompute + tp_fwd_s + cp_fwd_s
        return recompute
    return filled(block.fwd_s, 0.0)
