"""Activations one GPU stores per layer and micro-batch (Korthikanti et al. 2022, sec. 4.1).

``activation_bytes_per_layer`` generalises the paper's accounting to GQA, gated MLPs, MoE and
MLA, and to Megatron-Core's selective recompute modules and other frameworks' policies; for GPT
shapes with dropout and no FlashAttention it equals their Table 2 exactly
(``korthikanti_activation_bytes_per_layer``). Notation as in ``perfmodel.formulas.memory``.
"""

from __future__ import annotations

import numpy as np

from perfmodel.formulas.recompute import op_sac_saved_bytes_per_token, save_qkv_saved_bytes_per_token
from perfmodel.formulas.scalars import floats, maximum, where
from perfmodel.formulas.workload import ACT_BYTES, LayerKind
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.precision import FORMAT_BYTES, precision_mode
from perfmodel.spec.software import SoftwareStack, selective_modules

DROPOUT_MASK_BYTES = 1
"""Dropout masks are stored as one byte per element (Korthikanti et al. 2022, sec. 4.1)."""
SOFTMAX_BYTES = 2
"""The s x s attention probabilities are 16-bit (Korthikanti et al. 2022, sec. 4.1: 2*a*s^2*b)."""
FP8_BYTES = FORMAT_BYTES["fp8"]
"""An activation cached in FP8 (``SoftwareStack.moe_fp8_activation_cache``)."""


def korthikanti_activation_bytes_per_layer(s, b, h, a, t, sp: bool, recompute: str, flash: bool) -> float:
    """Korthikanti et al. 2022, Table 2 (GPT layer: MHA, 4h GeLU MLP, dropout), bytes.

    none:       sbh(34 + 5as/h)                  t = 1
                sbh(10 + 24/t + 5as/(ht))        tensor parallel
                sbh(34/t + 5as/(ht))             tensor + sequence parallel
    selective:  the 5as/h term is recomputed; full: 2sbh, the layer input (/t with SP).
    FlashAttention never stores the s x s scores, so it removes the 5as/h term too.
    """
    sbh = s * b * h
    if recompute == "full":
        return 2 * sbh / (t if sp else 1)
    scores = 0.0 if (flash or recompute == "selective") else 5 * a * s / h
    replicated, split = 10, 24
    if sp:
        return sbh * ((replicated + split) / t + scores / t)
    return sbh * (replicated + split / t + scores / t)


# A GEMM input kept for the weight-gradient GEMM: the ``saved_gemm_input`` role of the
# precision's record (``perfmodel.spec.precision``). With fp8 (and NVFP4, whose recipes keep an
# fp8/MX copy for the backward), Transformer Engine saves the quantised input tensor, not the
# 16-bit one (TE "Using FP8 with Transformer Engine": Float8Tensor inputs saved for backward);
# norm inputs and attention tensors stay 16-bit.


def activation_bytes_per_layer(m: ModelSpec, kind: LayerKind, s, b, t, sp, cp, etp, recompute: str,
                               precision: str, sw: SoftwareStack, *, hidden_dropout: bool) -> np.ndarray:
    """Bytes one GPU stores for one layer and one micro-batch (Korthikanti et al. 2022, sec. 4.1).

    Tensors are sorted as in the paper: "replicated" ones (norm inputs, GEMM inputs of
    replicated width h, dropout masks) are divided by t only with sequence parallelism;
    head- or ffn-split ones by t always. Each GEMM stores its input; the attention core
    stores Q, K, V and its output; without FlashAttention also the s x s probabilities
    (plus, with ``sw.attention_dropout``, their 1-byte mask and the dropped probabilities:
    2 + 1 + 2 = 5 bytes per score; flash attention regenerates the mask from its RNG state).
    ``hidden_dropout``: the 1-byte masks of the dropout after attention and after the MLP
    (Korthikanti et al. 2022's Table 2 counts them; current recipes train without).
    MoE: every token is copied to k_e experts (balanced routing assumed); the dispatched
    input, the expert MLP's internals and the output before the weighted combine are stored.
    """
    t = floats(t)
    r = where(sp, t, 1.0)
    tokens = s / cp * b
    B, h, a = ACT_BYTES, m.hidden_size, m.num_attention_heads
    G = precision_mode(precision).bytes_of("saved_gemm_input")
    flash, selective_policy = sw.flash_attention, sw.selective_recompute
    if recompute == "full":
        return tokens * B * h / r
    if recompute == "selective" and selective_policy == "op_sac":
        return tokens * op_sac_saved_bytes_per_token(m, t, r)
    if recompute == "selective" and selective_policy == "save_qkv_proj":
        return tokens * save_qkv_saved_bytes_per_token(m, t, r)
    mods = set(selective_modules(selective_policy)) if recompute == "selective" else set()
    mask = DROPOUT_MASK_BYTES * h if hidden_dropout else 0
    mats = 2 if m.gated_mlp else 1
    # attention block, per token
    replicated = (B + G) * h + mask                       # norm input, QKV GEMM input; dropout mask
    if m.mla is not None:
        x = m.mla
        qk = x.qk_nope_head_dim + x.qk_rope_head_dim
        if "layernorm" in mods:                                          # the standalone input norm's
            replicated = replicated - G * h                              # output is freed
        low_rank = 2 * x.q_lora_rank if x.q_lora_rank else 0            # q_down out, q_up in
        low_rank += x.kv_lora_rank + x.qk_rope_head_dim + x.kv_lora_rank  # kv_down out, kv_up in
        replicated = replicated + B * low_rank
        qkv = 0 if "mla_up_proj" in mods else 2 * qk + x.v_head_dim     # freed after the core
        split = B * a * (qkv + x.v_head_dim) / t                       # Q, K, V, core output
    else:
        d, g = m.attn_head_dim, m.kv_heads
        split = (B + G) * a * d / t + B * 2 * d * maximum(g / t, 1)  # Q, core output; K, V
    scores = 0.0
    if not flash and (recompute == "none" or (recompute == "selective" and "core_attn" not in mods)):
        per_score = SOFTMAX_BYTES + (DROPOUT_MASK_BYTES + SOFTMAX_BYTES if sw.attention_dropout else 0)
        scores = per_score * a * s / t                   # a*s keys per query token
    # MLP block, per token
    replicated = replicated + B * h + mask                          # norm input; mask
    routed = 0.0
    if kind is LayerKind.DENSE:
        f = m.ffn_hidden_size
        if "mlp" not in mods:                                       # checkpointed: its input only
            replicated = replicated + G * h                         # MLP input
            split = split + (B * mats * f + G * f) / t              # activation in, down-proj in
    elif "moe" in mods:
        replicated = replicated + B * h                             # the checkpoint's input
    else:
        e = m.moe
        fe, sf = e.expert_ffn_hidden_size, e.num_shared_experts * e.expert_ffn_hidden_size
        if "layernorm" not in mods:                                 # the pre-MLP norm's output
            replicated = replicated + G * h
        replicated = replicated + B * e.num_experts                 # router probabilities
        A = FP8_BYTES if sw.moe_fp8_activation_cache else B         # SwiGLU input kept (sec. 3.3.2)
        if "shared_experts" not in mods:
            split = split + (A * mats * sf + G * sf) / t            # shared experts
        etp = floats(etp)
        act_out = 0 if "moe_act" in mods else G * fe                # fc2 input, freed by moe_act
        # per token entering the layer on this GPU: k_e copies, each seen by etp ranks
        combine_in = 0 if sw.moe_probs_in_activation else B * h     # expert output kept for d(probs)
        # a clamped GLU outside the TE op fuser: autograd keeps the clamp's input and the
        # concatenated clamped copy the fused activation saves (perfmodel.formulas.megatron_eager)
        clamp_copy = B * mats * fe if (m.clamped_glu and not sw.moe_te_op_fuser and "moe_act" not in mods) else 0
        routed = e.top_k * (G * h * etp + A * mats * fe + act_out + combine_in + clamp_copy)
    per_token = replicated / r + split + routed / r + scores
    return tokens * per_token
