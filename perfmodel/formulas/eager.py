"""PyTorch's element-wise operations of torchtitan's Llama block: the bytes their kernels move,
counted kernel by kernel, eager (``elementwise_kernels: eager``, at the fraction of the STREAM
rate those kernels reach, measured) and what ``torch.compile`` leaves unfused of them
(``elementwise_kernels: compiled``; docs/model.md, section 3)."""

from __future__ import annotations

from perfmodel.formulas.ops import ACT_BYTES, FP32_BYTES, Op, OpKind
from perfmodel.spec.model import ModelSpec


_B, _F = ACT_BYTES, FP32_BYTES
EAGER_RMSNORM_FWD_BYTES_PER_ELEMENT = (_B + _F) + (_F + _F) + _F + (_F + _F) + (_F + _B) + (_B + _B)
"""An eager RMSNorm's forward bytes per element (36; ``eager_elementwise_ops``)."""
EAGER_RMSNORM_FWD_KERNELS = 8
EAGER_RMSNORM_BWD_BYTES_PER_ELEMENT = ((_B + _B) + (_B + _B) + (_B + _F) + (_F + _F) + (_F + _F) + (_F + _F)
                                       + (_F + _F + _F) + (_F + _B))
"""Its backward bytes per element (56; ``eager_elementwise_ops``)."""
EAGER_RMSNORM_BWD_KERNELS = 12


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
    norm_bytes = EAGER_RMSNORM_FWD_BYTES_PER_ELEMENT
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
    norm_bwd_bytes = EAGER_RMSNORM_BWD_BYTES_PER_ELEMENT

    ops = [Op("norm", OpKind.MEMORY, bytes_per_token=2 * norm_bytes * h, kernels=2 * EAGER_RMSNORM_FWD_KERNELS,
              bwd_bytes_per_token=2 * norm_bwd_bytes * h, bwd_kernels=2 * EAGER_RMSNORM_BWD_KERNELS,
              stream_class="norm"),
           Op("attention/rope", OpKind.MEMORY, bytes_per_token=rope_bytes * (rope_q + rope_k), kernels=2 * 3,
              bwd_bytes_per_token=rope_bytes * (rope_q + rope_k), stream_class="rope")]
    if repeat:
        ops.append(Op("attention/repeat_kv", OpKind.MEMORY, bytes_per_token=repeat, kernels=2,
                      bwd_bytes_per_token=repeat, stream_class="repeat_kv"))
    return ops, act


COMPILED_ROPE_FWD_BYTES_PER_ELEMENT = (ACT_BYTES + FP32_BYTES) + (FP32_BYTES + FP32_BYTES)
"""Rotary embedding under ``torch.compile``, forward, per element of Q and K: the fp32 upcast, a
generated kernel (reads 2, writes 4), then the complex multiply, which Inductor does not generate
and runs as PyTorch's own kernel (reads 4, writes 4): any node reading or writing a complex tensor
falls back to ATen, only the views into and out of complex are lowered
(torch/_inductor/lowering.py ``unsupported_input_tensor`` and
``fallback_node_due_to_unsupported_type``, in every version read from 2023 to 2026, and the ATen
kernel in the compiled step check of PyTorch 2.11 below; torchtitan issue #15, 'Rope embeddings
with complex number generates compile warning', on this very function, open).
14 bytes; the cast back is counted with what it fuses into (``compiled_rope_ops``)."""


def compiled_rope_ops(m: ModelSpec) -> list[Op]:
    """The rotary embedding and repeat_kv of torchtitan's Llama block under ``torch.compile``.

    Norms, SwiGLU and residual adds fuse as ``fused`` counts them; these do not. Per token, with
    Q of width q = a d and K of width k = g d (the MLA rope parts as in ``eager_elementwise_ops``),
    b = 2 and 4 bytes, forward:

    - upcast and complex multiply of Q and K: 14 (q + k) (``COMPILED_ROPE_FWD_BYTES_PER_ELEMENT``);
    - Q cast back to bf16: 4 + 2 per element of q;
    - K cast back, fused with repeat_kv's copy where g < a: read 4 k, write 2 q (2 k without GQA);
    - V's repeat_kv copy where g < a: read 2 k, write 2 q.

    Backward, the same bytes reversed: the incoming Q gradient upcast (2 + 4 per element of q);
    K's summed over the repeats and upcast (read 2 q, write 4 k); the complex multiply by the
    conjugate (ATen again, 8 per element); the cast back to bf16 (6 per element of q + k) for the
    GEMM gradients; V's summed over the repeats (read 2 q, write 2 k). Forward and backward come
    to the same bytes.

    These kernels run at the STREAM rate. In the compiled step check on an H100
    (calibration/results/nvidia-h100-80gb-hbm3-2026-11-27/step_check_llama3-8b_4l_s8192_compiled/
    kernels.txt, PyTorch 2.11, 8,192 tokens a micro-batch) the seven generated kernels of one
    layer's forward and backward (names ending in ``view_as_complex``, ``clone_expand``,
    ``squeeze_sum``) and the four ATen ``elementwise_kernel`` calls of the complex multiply (128
    over 32 layer passes, 63 us each) took 664 us; this count, 2 x 118,784 bytes a token for
    Llama 3 8B, is 1.95 GB, 648 us at that suite's STREAM rate (3.0 TB/s). So no ``stream_class``.
    """
    B, F = ACT_BYTES, FP32_BYTES
    if m.mla is not None:
        q, k, repeat = m.num_attention_heads * m.mla.qk_rope_head_dim, m.mla.qk_rope_head_dim, False
    else:
        a, g, d = m.num_attention_heads, m.kv_heads, m.attn_head_dim
        q, k, repeat = a * d, g * d, g < a
    k_out = q if repeat else k                               # K written at the query heads when repeated
    rope_bytes = COMPILED_ROPE_FWD_BYTES_PER_ELEMENT * (q + k) + (F + B) * q + F * k + B * k_out
    ops = [Op("attention/rope", OpKind.MEMORY, bytes_per_token=rope_bytes, kernels=2 + 2 + 2,
              bwd_bytes_per_token=rope_bytes, bwd_kernels=2 + 2 + 2)]
    if repeat:
        v_copy = B * k + B * q                               # V: read g d, write a d
        ops.append(Op("attention/repeat_kv", OpKind.MEMORY, bytes_per_token=v_copy, kernels=1,
                      bwd_bytes_per_token=v_copy, bwd_kernels=1))
    return ops
