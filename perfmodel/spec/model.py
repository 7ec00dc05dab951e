"""Model architecture as a frozen input (the scenario contract's ``model`` mapping).

Field names follow ``shared/contracts/scenario.md``; defaults follow it too
(``num_query_groups`` = heads, ``head_dim`` = hidden / heads, ``tied_embeddings`` = false).
"""

from __future__ import annotations

import reprlib

from pydantic import BaseModel, ConfigDict, StrictBool, model_validator

from perfmodel.spec.errors import InputError
from perfmodel.spec.limits import (
    MAX_ATTENTION_HEADS,
    MAX_FFN_HIDDEN_SIZE,
    MAX_HEAD_DIM,
    MAX_HIDDEN_SIZE,
    MAX_NUM_EXPERTS,
    MAX_NUM_LAYERS,
    MAX_SEQ_LENGTH,
    MAX_VOCAB_SIZE,
    Name,
    int_field,
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MlaSpec(_Frozen):
    """DeepSeek multi-head latent attention (DeepSeek-V2 report, section 2.1)."""

    q_lora_rank: int_field(MAX_HIDDEN_SIZE) | None = None
    """Rank of the query down-projection; null = queries are not compressed."""
    kv_lora_rank: int_field(MAX_HIDDEN_SIZE)
    """Rank of the joint key/value latent."""
    qk_nope_head_dim: int_field(MAX_HEAD_DIM)
    """Per-head query/key width without rotary embedding."""
    qk_rope_head_dim: int_field(MAX_HEAD_DIM)
    """Per-head decoupled rotary query/key width (the rotary key is shared by all heads)."""
    v_head_dim: int_field(MAX_HEAD_DIM)
    """Per-head value width."""


class MoeSpec(_Frozen):
    """Mixture-of-experts MLP (Shazeer et al. 2017; Fedus et al. 2021)."""

    num_experts: int_field(MAX_NUM_EXPERTS)
    """Routed experts per MoE layer."""
    top_k: int_field(MAX_NUM_EXPERTS)
    """Routed experts each token uses."""
    expert_ffn_hidden_size: int_field(MAX_FFN_HIDDEN_SIZE)
    """Hidden width of one expert's MLP."""
    num_shared_experts: int_field(MAX_NUM_EXPERTS, minimum=0) = 0
    """Always-active experts (DeepSeek style), each of width ``expert_ffn_hidden_size``."""
    num_dense_layers: int_field(MAX_NUM_LAYERS, minimum=0) = 0
    """Leading layers that use the dense MLP (``ffn_hidden_size``) instead of experts."""
    interleave_step: int_field(MAX_NUM_LAYERS) = 1
    """After the leading dense layers, layer j (counted from 0) is MoE when
    ``(j + 1) % interleave_step == 0`` and a dense-MLP layer otherwise: 1 = every layer MoE,
    2 = dense and MoE alternate (Llama 4 Maverick: transformers' interleave_moe_layer_step,
    Megatron-Core moe_layer_freq [0, 1] * 24; Qwen-MoE's decoder_sparse_step counts the same way)."""
    router_num_groups: int_field(MAX_NUM_EXPERTS) | None = None
    """Group-limited routing: the experts split into this many equal groups of consecutive
    experts, and a token picks its top-k among the ``router_group_topk`` best groups only
    (DeepSeek-V3 report sec. 2.1.2, node-limited routing, M = 4 of 8 nodes; HF config ``n_group``;
    Megatron-Core ``--moe-router-num-groups``). null = routing over all experts."""
    router_group_topk: int_field(MAX_NUM_EXPERTS) | None = None
    """Groups a token may route to (HF ``topk_group``; Megatron-Core ``--moe-router-group-topk``)."""

    @model_validator(mode="after")
    def _check(self) -> "MoeSpec":
        if self.top_k > self.num_experts:
            raise ValueError(
                f"top_k({self.top_k}) exceeds num_experts({self.num_experts})"
            )
        g, gk = self.router_num_groups, self.router_group_topk
        if (g is None) != (gk is None):
            raise ValueError("router_num_groups and router_group_topk come together (group-limited routing)")
        if g is not None:
            if self.num_experts % g:
                raise ValueError(f"router_num_groups({g}) does not divide num_experts({self.num_experts})")
            if gk > g:
                raise ValueError(f"router_group_topk({gk}) exceeds router_num_groups({g})")
            if self.top_k > gk * (self.num_experts // g):
                raise ValueError(f"top_k({self.top_k}) exceeds the experts of router_group_topk({gk}) groups "
                                 f"of {self.num_experts // g}")
        return self


class ModelSpec(_Frozen):
    """A decoder-only transformer."""

    name: Name = "custom"
    """Label shown in outputs."""
    num_layers: int_field(MAX_NUM_LAYERS)
    """Transformer layers (l)."""
    hidden_size: int_field(MAX_HIDDEN_SIZE)
    """Model width (h)."""
    num_attention_heads: int_field(MAX_ATTENTION_HEADS)
    """Query heads (a)."""
    num_query_groups: int_field(MAX_ATTENTION_HEADS) | None = None
    """Key/value heads (GQA); null = ``num_attention_heads`` (MHA)."""
    head_dim: int_field(MAX_HEAD_DIM) | None = None
    """Per-head width; null = ``hidden_size / num_attention_heads``."""
    ffn_hidden_size: int_field(MAX_FFN_HIDDEN_SIZE)
    """Dense MLP width (for MoE models, the width of the dense layers)."""
    gated_mlp: StrictBool = False
    """True = SwiGLU-style MLP with three weight matrices; false = GeLU with two."""
    vocab_size: int_field(MAX_VOCAB_SIZE)
    """Vocabulary size (V)."""
    tied_embeddings: StrictBool = False
    """True = the output layer reuses the input embedding matrix."""
    mla: MlaSpec | None = None
    """DeepSeek multi-head latent attention, if used."""
    moe: MoeSpec | None = None
    """Mixture of experts, if used."""
    mtp_layers: int_field(MAX_NUM_LAYERS, minimum=0) = 0
    """Multi-token-prediction layers (DeepSeek-V3 uses 1)."""
    attention_window: int_field(MAX_SEQ_LENGTH) | None = None
    """Sliding-window attention: a query attends to at most this many of the latest tokens,
    itself included (Beltagy et al. 2020; Mistral 7B, Jiang et al. 2023); null = full causal
    attention in every layer."""
    full_attention_every: int_field(MAX_NUM_LAYERS) | None = None
    """With ``attention_window``: layers n, 2n, 3n, ... (counted from 1) keep full attention
    (GPT-OSS: 2, Gemma 3: 6); null = every layer uses the window."""
    linear_bias: StrictBool = False
    """The linear layers carry biases (Megatron-Core ``add_bias_linear``): GPT-OSS's QKV, output
    and expert projections (HF openai/gpt-oss-120b ``attention_bias``, the experts'
    ``gate_up_proj_bias`` and ``down_proj_bias``). Priced where the framework adds them in kernels
    of their own (``perfmodel.formulas.megatron_eager``); their few parameters are not counted."""
    clamped_glu: StrictBool = False
    """The gated activation clamps its inputs before gating (Megatron-Core
    ``activation_func_clamp_value``; GPT-OSS: the gate at most 7, the linear half within +-7,
    Megatron-Bridge ``GPTOSSProvider`` v0.2.0 and ``GPTOSSBridge`` v0.4.2+)."""
    qk_norm: StrictBool = False
    """Queries and keys are RMS-normalised per head before the rotary embedding (Qwen3, dense and
    MoE: Qwen3 Technical Report, arXiv 2505.09388, sec. 2, "QK-Norm"; transformers ``Qwen3Attention``
    ``q_norm``/``k_norm``; Megatron-Core ``qk_layernorm``, set by Megatron-Bridge's Qwen3 providers).
    Two more norm kernels a layer (``perfmodel.formulas.workload.qk_norm_op``). MLA's latent norms
    are part of MLA and counted without it."""

    @model_validator(mode="after")
    def _check(self) -> "ModelSpec":
        a = self.num_attention_heads
        g = self.num_query_groups or a
        if a % g:
            raise ValueError(
                f"num_attention_heads({a}) is not a multiple of num_query_groups({g})"
            )
        if self.head_dim is None and self.mla is None and self.hidden_size % a:
            raise ValueError(
                f"hidden_size({self.hidden_size}) is not divisible by "
                f"num_attention_heads({a}); give head_dim explicitly"
            )
        if self.full_attention_every is not None and self.attention_window is None:
            raise ValueError("full_attention_every is set but attention_window is not; "
                             "give the window width or drop full_attention_every")
        if self.full_attention_every == 1:
            raise ValueError("full_attention_every(1) leaves no windowed layer; drop attention_window")
        if self.moe is not None and self.moe.num_dense_layers > self.num_layers:
            raise ValueError(
                f"moe.num_dense_layers({self.moe.num_dense_layers}) exceeds "
                f"num_layers({self.num_layers})"
            )
        if self.moe is not None and self.moe.interleave_step > self.num_layers - self.moe.num_dense_layers:
            raise ValueError(
                f"moe.interleave_step({self.moe.interleave_step}) leaves no MoE layer among the "
                f"{self.num_layers - self.moe.num_dense_layers} after the leading dense ones"
            )
        return self

    # Resolved defaults (the contract's "omitted = ..." rules), in one place.
    @property
    def kv_heads(self) -> int:
        return self.num_query_groups or self.num_attention_heads

    @property
    def attn_head_dim(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def num_windowed_layers(self) -> int:
        """Layers whose attention uses the sliding window (all but every n-th one)."""
        if self.attention_window is None:
            return 0
        n = self.full_attention_every
        return self.num_layers - (self.num_layers // n if n else 0)

    @property
    def num_moe_layers(self) -> int:
        if self.moe is None:
            return 0
        return (self.num_layers - self.moe.num_dense_layers) // self.moe.interleave_step

    @property
    def num_dense_mlp_layers(self) -> int:
        return self.num_layers - self.num_moe_layers


def require_positive_int(field: str, value) -> int:
    """Coerce a user value to a positive int or raise a one-line InputError."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(field, f"must be a positive integer, got {reprlib.repr(value)}")
    return value
