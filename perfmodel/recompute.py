"""Selective activation recompute: which forward work the backward redoes, and what stays stored.

Two policies (scenario field ``selective_recompute``, used with ``recompute: selective``):

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
"""

from __future__ import annotations

import numpy as np

from .compute import BlockTime
from .model import ModelSpec
from .workload import ACT_BYTES, FP32_BYTES, OpKind


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


def selective_recompute_s(block: BlockTime, policy: str, m: ModelSpec) -> np.ndarray:
    """Forward time the backward redoes per layer and micro-batch under a selective policy."""
    if policy == "core_attn":
        return block.attn_fwd_s
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
    wv_out = B * d * np.maximum(g / t, 1)                 # KV heads replicate when g < t
    reduce_scatter_outputs = np.where(t > 1, 2 * B * h, 0.0)
    return B * h / r + per_tp_shard / t + wv_out + B * h + reduce_scatter_outputs / r
