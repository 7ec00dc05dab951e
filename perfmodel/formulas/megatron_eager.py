"""Megatron-Core's eager PyTorch paths for the parts of a layer its fused kernels leave out: the
unfused rotary embedding, MLA's assembly of query, key and value (fused or eager), the unfused bias
add after a projection, the per-expert bias loop, the clamp of a clamped GLU and the routed
experts' padding for a low-precision grouped GEMM (Transformer Engine's input quantisation is
``perfmodel.formulas.fp8_casts``)
(``perfmodel.spec.megatron_paths`` says which run; ``ModelSpec.mla``, ``linear_bias`` and
``clamped_glu`` say whether the model has them).

Bytes are counted kernel by kernel from the Megatron-Core source (core_v0.15.0, the same in 0.17.0
and 0.18.0), per element of the tensor each kernel walks, with b = 2 bytes (bf16 activations);
a kernel that reads x and writes y moves x + y. Autograd's backward kernels are counted from
PyTorch's derivative formulas (``tools/autograd/derivatives.yaml``): a broadcast operand's gradient
is a reduction over the broadcast dimension (reads the gradient once), views and narrows of a
gradient move nothing, two gradients of one tensor are summed in a kernel of their own.
"""

from __future__ import annotations

import dataclasses

from perfmodel.formulas.ops import ACT_BYTES, FP32_BYTES, MLA_QKV_OP, Op, OpKind
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.software import SoftwareStack

B = ACT_BYTES

ROPE_FWD_BYTES_PER_ELEMENT = (B + B) + (B / 2 + B / 2) + (B + B) + (B + B) + (B + B + B) + (B + B)
"""``_apply_rotary_pos_emb_bshd`` (rope_utils.py), forward, per element of Q or K:
``t * cos_`` (read, write), ``_rotate_half``: ``-x2`` on half the elements and ``torch.cat((-x2,
x1))`` (read, write), ``* sin_``, the sum of the two products (read 2, write 1), and the final
``torch.cat((t, t_pass))``, which copies t although t_pass is empty (the rotary dim is the head
dim). 24 bytes in 6 kernels; ``cos_`` and ``sin_`` are computed on the [s, 1, 1, d] frequency
table per call (cos or sin, times mscale, cast: 6 small kernels, bytes negligible)."""
ROPE_FWD_KERNELS = 6 + 6
ROPE_BWD_BYTES_PER_ELEMENT = (B + B) + (B / 2 + B / 2) + (B + B) + (B + B) + (B + B + B)
"""Its backward: the gradient times ``sin_`` and times ``cos_`` (read, write each), ``-`` on
half the elements (neg's gradient), the chunk's two halves joined into one gradient (read, write),
and the two gradients of t summed (read 2, write 1); the cats' gradients are narrows. 20 bytes
in 5 kernels."""
ROPE_BWD_KERNELS = 5

BIAS_ADD_FWD_BYTES_PER_ELEMENT = B + B
"""``bias_dropout_add_unfused`` with a bias (fused_bias_dropout.py): ``x = x + bias`` reads and
writes the h-wide output (the bias row is negligible); dropout with p = 0 returns its input
(ATen ``_dropout``) and the residual add is the ``residual`` op's. 1 kernel."""
BIAS_ADD_BWD_BYTES_PER_ELEMENT = B
"""Its backward: the bias gradient sums the incoming gradient over the tokens (read once); x's
gradient passes through. 1 kernel."""

CLAMP_FWD_BYTES_PER_ELEMENT = (B + B) + (B + B)
"""``weighted_bias_quick_geglu_impl`` with ``clamp_value`` (fused_bias_geglu.py), before its
fused activation, per element of the fc1 output (both halves): ``x_glu.clamp`` and
``x_linear.clamp`` (read, write; a kernel each over one half) and ``torch.cat`` of the two (read,
write). 8 bytes in 3 kernels, plus the host-to-device copy of ``torch.tensor(linear_offset)``."""
CLAMP_FWD_KERNELS = 3 + 1
CLAMP_BWD_BYTES_PER_ELEMENT = (B + B + B) + (B + B)
"""Its backward: ``clamp_backward`` on each half reads the gradient and the saved input and
writes (3 per element), and the chunk's two gradients are joined (read, write). 10 bytes in 3
kernels. Autograd keeps the clamp's input (the fc1 output) beside the concatenated copy the
fused activation keeps (``perfmodel.formulas.activations``)."""
CLAMP_BWD_KERNELS = 3


MLA_KV_FUSED_BYTES_PER_ELEMENT = B
"""Megatron-Core's fused MLA rotary kernel for the key and value (``fused_mla_yarn_rope_apply.py``
``ApplyMLARotaryEmbKV``, a Triton kernel, core_v0.15.0 to 0.18.0) reads or writes each element
once. Forward: reads the kv up-projection's output (a (d_nope + d_v) per token) and the shared
rotary key (d_rope), writes a new key (a (d_nope + d_rope): the rotary key broadcast to every head)
and a new contiguous value (a d_v); 1 kernel. Backward (``rotary_bwd_kv_kernel``): reads the key
and value gradients, writes the kv gradient and the rotary key's (summed over the heads in the
kernel); 1 kernel. The query's kernel (``ApplyMLARotaryEmbQ``) rotates the query's d_rope columns
in place, as a fused RoPE does for any attention, and is not counted (``workload._memory_ops``)."""

MLA_INTERLEAVE_FWD_BYTES_PER_ELEMENT = B + B
"""The eager path's MLA step in ``_apply_rotary_pos_emb_bshd`` (rope_utils.py,
``multi_latent_attention``): ``torch.cat((t[..., 0::2], t[..., 1::2]))`` de-interleaves the rotary
part before the rotation (read, write). 1 kernel per tensor (query, key)."""
MLA_INTERLEAVE_BWD_BYTES_PER_ELEMENT = 2 * (B + B / 2 + B / 2) + (B + B + B)
"""Its backward: each strided slice's gradient is ``slice_backward``, a zero-filled full-size
tensor (write) with the half copied in (read, write), and autograd sums the two gradients of t
(read 2, write 1). 14 bytes in 5 kernels per tensor."""
MLA_INTERLEAVE_BWD_KERNELS = 5




def mla_qkv_op(m: ModelSpec, sw: SoftwareStack) -> Op:
    """How Megatron-Core's MLA turns the up-projections' outputs into the attention's query, key
    and value (``MLASelfAttention.get_query_key_value_tensors``, ``qkv_up_proj_and_rope_apply``,
    core_v0.12.0 to 0.18.0), beside the rotation itself. a heads, widths d_nope, d_rope, d_v.

    Fused (``sw.rotary_fusion``, Megatron-Core ``apply_rope_fusion`` with MLA, from 0.13): the
    key/value kernel (``MLA_KV_FUSED_BYTES_PER_ELEMENT``). Eager: the rotation is ``rope_op``; beside it
    the de-interleave of each rotary tensor (``MLA_INTERLEAVE_*``), ``torch.cat([q_no_pe,
    q_pos_emb])`` (read, write a (d_nope + d_rope)), ``torch.cat([k_no_pe, k_pos_emb.expand(...)])``
    (reads a d_nope and the broadcast a d_rope, writes a (d_nope + d_rope)) and
    ``value.contiguous()`` of the strided split of kv (read, write a d_v): 4 kernels forward.
    Backward: the cats' gradients are views; the two ``torch.split`` of the up-projections'
    outputs join their gradients (read, write a (d_nope + d_rope) and a (d_nope + d_v)), and the
    broadcast rotary key's gradient is a sum over the heads (read a d_rope): 3 kernels."""
    x, a = m.mla, m.num_attention_heads
    qk, kv = a * (x.qk_nope_head_dim + x.qk_rope_head_dim), a * (x.qk_nope_head_dim + x.v_head_dim)
    v, r = a * x.v_head_dim, x.qk_rope_head_dim
    if sw.rotary_fusion:
        walked = MLA_KV_FUSED_BYTES_PER_ELEMENT * ((kv + r) + qk + v)
        return Op(MLA_QKV_OP, OpKind.MEMORY, bytes_per_token=walked, kernels=1,
                  bwd_bytes_per_token=walked, bwd_kernels=1)
    rotary = a * r + r
    fwd = (MLA_INTERLEAVE_FWD_BYTES_PER_ELEMENT * rotary + (B + B) * qk + (B + B) * qk + (B + B) * v)
    bwd = MLA_INTERLEAVE_BWD_BYTES_PER_ELEMENT * rotary + (B + B) * qk + (B + B) * kv + B * a * r
    tensors = 2
    return Op(MLA_QKV_OP, OpKind.MEMORY, bytes_per_token=fwd, kernels=tensors + 3,
              bwd_bytes_per_token=bwd, bwd_kernels=tensors * MLA_INTERLEAVE_BWD_KERNELS + 3)


def probs_bytes(sw: SoftwareStack) -> int:
    """Bytes of one routing probability at the experts: fp32 behind the flex dispatcher (DeepEP
    and HybridEP take fp32 probabilities, Megatron-Core token_dispatcher.py ``MoEFlexTokenDispatcher``),
    the router's 16-bit output behind the all-to-all (``moe_router_dtype`` unset)."""
    return FP32_BYTES if sw.moe_dispatcher == "flex" else ACT_BYTES


def expert_bias_bytes_per_element(P: int) -> tuple[float, float]:
    """(forward, backward) bytes per element of the experts' h-wide output of ``TEGroupedMLP._apply_bias``:
    ``torch.cat([t + b * p for each local expert]).to(dtype)`` with P-byte probabilities p.

    R = max(b, P), the dtype of ``b * p`` (type promotion). Forward: ``b * p`` writes R; ``t + b p``
    reads b + R and writes R; the cat reads and writes R; ``.to`` reads R and writes b, a no-op
    when R = b. Backward: the cast back (b to R) and the cast of t's gradient (R to b) when R > b;
    ``b * p``'s two gradients, bias and probability, each a product (read R, write R) and a
    reduction (read R); the per-expert gradients of t joined by the split's backward (read, write).
    bf16 probabilities: 12 and 16 bytes; fp32: 28 and 40."""
    R = max(B, P)
    cast = (R + B) if R > B else 0
    fwd = R + (B + 2 * R) + 2 * R + cast
    bwd = 2 * cast + 2 * (3 * R) + (B + B)
    return fwd, bwd


EXPERT_BIAS_FWD_KERNELS = 2 + 1
"""Per local expert, ``b * p`` and the add; then the cat (the cast is a no-op for bf16). Counted
for one local expert: the loop issues two more per additional expert, which this count leaves out."""
EXPERT_BIAS_BWD_KERNELS = 4 + 1


def rope_op(m: ModelSpec) -> Op:
    """Megatron-Core's unfused rotary embedding over Q and K (``sw.rotary_fusion`` off)."""
    if m.mla is not None:
        q, k = m.num_attention_heads * m.mla.qk_rope_head_dim, m.mla.qk_rope_head_dim
    else:
        q, k = m.num_attention_heads * m.attn_head_dim, m.kv_heads * m.attn_head_dim
    tensors = 2
    return Op("attention/rope", OpKind.MEMORY, bytes_per_token=ROPE_FWD_BYTES_PER_ELEMENT * (q + k),
              kernels=tensors * ROPE_FWD_KERNELS, bwd_bytes_per_token=ROPE_BWD_BYTES_PER_ELEMENT * (q + k),
              bwd_kernels=tensors * ROPE_BWD_KERNELS)


def bias_add_op(m: ModelSpec, sites: int) -> Op:
    """The unfused bias adds of ``sites`` projections into the residual stream (h wide)."""
    h = m.hidden_size
    return Op("residual/bias", OpKind.MEMORY, bytes_per_token=sites * BIAS_ADD_FWD_BYTES_PER_ELEMENT * h,
              kernels=sites, bwd_bytes_per_token=sites * BIAS_ADD_BWD_BYTES_PER_ELEMENT * h, bwd_kernels=sites)


def expert_bias_op(m: ModelSpec, sw: SoftwareStack, routed_copies: float) -> Op:
    """``TEGroupedMLP._apply_bias``: the fc2 bias weighted by each copy's probability, per expert."""
    fwd, bwd = expert_bias_bytes_per_element(probs_bytes(sw))
    elements = routed_copies * m.hidden_size
    return Op("moe/expert_bias", OpKind.MEMORY, bytes_per_token=fwd * elements, kernels=EXPERT_BIAS_FWD_KERNELS,
              bwd_bytes_per_token=bwd * elements, bwd_kernels=EXPERT_BIAS_BWD_KERNELS)


def with_clamp(activation: Op, clamped_elements: float) -> Op:
    """The fused activation op with the eager clamp before it, over ``clamped_elements`` (the
    fc1 output of the routed copies, both halves) per token. The backward of the fused activation
    stays as counted (twice its forward bytes)."""
    return dataclasses.replace(
        activation,
        bytes_per_token=activation.bytes_per_token + CLAMP_FWD_BYTES_PER_ELEMENT * clamped_elements,
        kernels=activation.kernels + CLAMP_FWD_KERNELS,
        bwd_bytes_per_token=2 * activation.bytes_per_token + CLAMP_BWD_BYTES_PER_ELEMENT * clamped_elements,
        bwd_kernels=activation.kernels + CLAMP_BWD_KERNELS)


FP8_PADDING_BYTES_PER_ELEMENT = (B + B) + (B + B)
"""Transformer Engine's ``Fp8Padding`` of the experts' input and ``Fp8Unpadding`` of their output
(``fused_multi_row_padding`` / ``fused_multi_row_unpadding``, one multi-tensor kernel for up to 64
experts, ``common/util/padding.cu``), per element of the routed copies' h-wide rows: each reads
and writes the tensor once (the pad rows, fewer than the alignment per expert, are negligible).
Forward the two copies; backward the same two in reverse (the padding's gradient is an unpadding
and the unpadding's a padding). Beside them the [copies, 1] probabilities are padded too."""
FP8_PADDING_KERNELS = 3
"""Forward: the input's padding, the probabilities' padding, the output's unpadding; backward
their three gradients."""


def fp8_padding_op(m: ModelSpec, sw: SoftwareStack, routed_copies: float) -> Op:
    """``TEGroupedMLP``'s row padding for a low-precision grouped GEMM (``sw.moe_expert_fp8_padding``):
    ``FP8_PADDING_BYTES_PER_ELEMENT`` over the routed copies' h-wide rows and the probabilities'
    padding (read, write one value per copy), each way; runs only in low precision."""
    per_copy = FP8_PADDING_BYTES_PER_ELEMENT * m.hidden_size + 2 * probs_bytes(sw)
    walked = routed_copies * per_copy
    return Op("moe/fp8_padding", OpKind.MEMORY, bytes_per_token=walked, kernels=FP8_PADDING_KERNELS,
              bwd_bytes_per_token=walked, bwd_kernels=FP8_PADDING_KERNELS, low_precision_only=True)


def pads_expert_rows(sw: SoftwareStack) -> bool:
    """Whether ``TEGroupedMLP``'s ``Fp8Padding`` copies run (``MegatronPaths.moe_expert_fp8_padding``):
    Megatron-Core's experts, counts not already aligned (not padded to capacity; HybridEP pads in
    its dispatch, so the copies are no-ops behind it)."""
    hybridep = sw.moe_dispatcher == "flex" and sw.moe_flex_backend == "hybridep"
    return sw.moe_expert_fp8_padding and not sw.moe_pad_expert_input_to_capacity and not hybridep


def megatron_eager_ops(m: ModelSpec, kind_is_moe: bool, sw: SoftwareStack, routed_copies: float) -> list[Op]:
    """The eager ops of one layer beside the fused ones: unfused rotary, MLA's assembly of query,
    key and value (``mla_qkv_op``, fused or eager), unfused bias adds (the attention output's, and
    a dense MLP's down projection's; a MoE layer's experts return no bias), the per-expert bias
    loop of a MoE layer without the TE op fuser, and the experts' row padding for a low-precision
    grouped GEMM (``pads_expert_rows``). Called for
    ``elementwise_kernels: fused`` only (Megatron-Core's Transformer Engine path); the eager and
    compiled paths count their own rotary embedding."""
    ops = [] if sw.rotary_fusion else [rope_op(m)]
    if m.mla is not None:
        ops.append(mla_qkv_op(m, sw))
    if m.linear_bias and not sw.bias_dropout_fusion:
        ops.append(bias_add_op(m, sites=1 if kind_is_moe else 2))
    if m.linear_bias and kind_is_moe and not sw.moe_te_op_fuser:
        ops.append(expert_bias_op(m, sw, routed_copies))
    if kind_is_moe and pads_expert_rows(sw):
        ops.append(fp8_padding_op(m, sw, routed_copies))
    return ops
