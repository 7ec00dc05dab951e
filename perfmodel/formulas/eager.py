"""Eager PyTorch's element-wise operations of a transformer block: the bytes their kernels move,
counted kernel by kernel, and the fraction of the STREAM rate those kernels reach, measured
(``elementwise_kernels: eager``; docs/model.md, section 3)."""

from __future__ import annotations

from perfmodel.formulas.ops import ACT_BYTES, FP32_BYTES, Op, OpKind
from perfmodel.spec.model import ModelSpec


def eager_elementwise_ops(m: ModelSpec, width: int) -> tuple[list[Op], Op]:
    """Eager PyTorch: every elementwise op is its own kernel with its own HBM round trip.

    Counted op by op from torchtitan's Llama block at commit 9dec370 (the version of its
    2024-12 benchmark report): ``torchtitan/models/norms.py`` RMSNorm and
    ``torchtitan/models/llama/model.py`` apply_rotary_emb, repeat_kv and FeedForward. Per
    element, with b = 2 (bf16) and 4 (fp32) bytes:

    - RMSNorm ``(x.float() * rsqrt(x.pow(2).mean(-1) + eps)).type_as(x) * weight``:
      cast (2 + 4), pow (4 + 4), mean (4), x * rsqrt (4 + 4), cast back (4 + 2), * weight
      (2 + 2) = 36 bytes in 8 kernels (the + eps and rsqrt act on one value per token).
      Backward, by autograd's kernels: gradient times weight (2 + 2) and the weight's gradient
      (2 + 2, a reduction over tokens), cast to fp32 (2 + 4), times rsqrt (4 + 4), the rsqrt's
      gradient (4 + 4, a reduction over the row), pow's gradient (4 + 4), the two fp32
      gradients summed (4 + 4 + 4), cast back (4 + 2) = 56 bytes in about 12 kernels.
    - Rotary embedding on Q and K, as complex multiplication in fp32: cast (2 + 4), complex
      multiply (4 + 4), cast back (4 + 2) = 20 bytes in 3 kernels per tensor (view_as_complex,
      view_as_real and reshape are views); its backward is the same three kernels in reverse
      (the conjugate multiply), 20 bytes.
    - repeat_kv with GQA (g < a): expand + reshape copies K and V to a heads: read g d, write
      a d per tensor, 1 kernel each; backward, the sum over the repeats reads a d and writes g d.
    - SwiGLU ``silu(w1 x) * w3 x``: silu (2 + 2), multiply (2 + 2 + 2) per element of the
      width = 10 bytes in 2 kernels; a non-gated GeLU is one kernel of 4 bytes, as fused.

    The first three run at the fraction of the STREAM rate the hardware's
    ``Efficiencies.stream_fractions`` gives their class (measured: RMSNorm's fp32 reductions and
    casts, the rotary embedding's complex multiply and repeat_kv's copies from a broadcast view
    stay under it); SwiGLU's two vectorised kernels run at the full rate (measured 0.92-1.03),
    with twice its forward bytes backward.

    The residual adds are single kernels either way. SDPA's output transpose is free (the
    flash kernel writes it token-major). The loss is eager in torchtitan with or without
    torch.compile (only the transformer blocks are compiled) and is not changed here.
    """
    h, B, F = m.hidden_size, ACT_BYTES, FP32_BYTES
    norm_bytes = (B + F) + (F + F) + F + (F + F) + (F + B) + (B + B)
    if m.mla is not None:
        rope_q = m.num_attention_heads * m.mla.qk_rope_head_dim
        rope_k = m.mla.qk_rope_head_dim                      # one k_pe shared by all heads
        repeat = 0
    else:
        d, a, g = m.attn_head_dim, m.num_attention_heads, m.kv_heads
        rope_q, rope_k = a * d, g * d
        repeat = 2 * (g + a) * d * B if g < a else 0          # K and V: read g d, write a d
    rope_bytes = (B + F) + (F + F) + (F + B)
    if m.gated_mlp:
        act = Op("mlp/activation", OpKind.MEMORY, bytes_per_token=((B + B) + (B + B + B)) * width, kernels=2)
    else:
        act = Op("mlp/activation", OpKind.MEMORY, bytes_per_token=(B + B) * width)
    norm_bwd_bytes = (B + B) + (B + B) + (B + F) + (F + F) + (F + F) + (F + F) + (F + F + F) + (F + B)

    ops = [Op("norm", OpKind.MEMORY, bytes_per_token=2 * norm_bytes * h, kernels=2 * 8,
              bwd_bytes_per_token=2 * norm_bwd_bytes * h, bwd_kernels=2 * 12, stream_class="norm"),
           Op("attention/rope", OpKind.MEMORY, bytes_per_token=rope_bytes * (rope_q + rope_k), kernels=2 * 3,
              bwd_bytes_per_token=rope_bytes * (rope_q + rope_k), stream_class="rope")]
    if repeat:
        ops.append(Op("attention/repeat_kv", OpKind.MEMORY, bytes_per_token=repeat, kernels=2,
                      bwd_bytes_per_token=repeat, stream_class="repeat_kv"))
    return ops, act
