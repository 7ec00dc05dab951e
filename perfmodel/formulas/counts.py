"""Parameter and FLOP counts per token, derived from the operation inventory of
``perfmodel.formulas.workload`` (so the two can never disagree). Notation as there.

Training FLOPs per token = (1 + backward factor) x forward, recompute excluded (the MFU
convention); the attention core's share depends on the keys each query sees
(``mean_keys_per_query``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from perfmodel.formulas.ops import FLOP_PER_MAC
from perfmodel.formulas.scalars import floats, where
from perfmodel.formulas.workload import (
    BACKWARD_OVER_FORWARD,
    MEMO_SIZE,
    LayerKind,
    Op,
    OpKind,
    head_weight_op,
    layer_kinds,
    mtp_extra_ops,
    mtp_layer_kind,
    weight_ops,
)
from perfmodel.spec.model import ModelSpec


# ---------------------------------------------------------------------------------- parameters
def _norm_params(m: ModelSpec) -> int:
    """Per layer: two norms of width h (scale only; LayerNorm biases are < 0.01% and ignored)."""
    return 2 * m.hidden_size


@functools.lru_cache(maxsize=MEMO_SIZE)
def layer_params(m: ModelSpec, kind: LayerKind) -> int:
    return sum(op.params for op in weight_ops(m, kind)) + _norm_params(m)


@functools.lru_cache(maxsize=MEMO_SIZE)
def layer_active_params(m: ModelSpec, kind: LayerKind) -> float:
    return sum(op.params * (op.tokens_frac if op.expert else 1.0) for op in weight_ops(m, kind)) + _norm_params(m)


def embedding_params(m: ModelSpec) -> int:
    return m.vocab_size * m.hidden_size


def output_params(m: ModelSpec) -> int:
    """Output projection, zero when tied to the embedding; plus the final norm."""
    return (0 if m.tied_embeddings else m.vocab_size * m.hidden_size) + m.hidden_size


def mtp_params(m: ModelSpec) -> int:
    """MTP modules share embedding and output head with the main model (DeepSeek-V3, sec. 2.2)."""
    per = layer_params(m, mtp_layer_kind(m)) + sum(o.params for o in mtp_extra_ops(m)) + 2 * m.hidden_size
    return m.mtp_layers * per


@dataclass(frozen=True)
class ParamCount:
    embedding: int
    layers: int
    output: int
    mtp: int
    active_layers: float

    @property
    def total(self) -> int:
        """Published convention: main model only (DeepSeek-V3's 671B excludes its 14B MTP module)."""
        return self.embedding + self.layers + self.output

    @property
    def active(self) -> float:
        """Parameters a token uses: embeddings, attention, dense/shared MLP, top-k experts."""
        return self.embedding + self.active_layers + self.output

    @property
    def stored(self) -> int:
        """Everything held in memory, MTP included."""
        return self.total + self.mtp


@functools.lru_cache(maxsize=MEMO_SIZE)
def param_count(m: ModelSpec) -> ParamCount:
    kinds = layer_kinds(m)
    return ParamCount(
        embedding=embedding_params(m),
        layers=sum(layer_params(m, k) for k in kinds),
        output=output_params(m),
        mtp=mtp_params(m),
        active_layers=sum(layer_active_params(m, k) for k in kinds),
    )


# --------------------------------------------------------------------------------------- FLOPs
def mean_keys_per_query(seq_length, causal: bool, window: int | None = None):
    """Keys one query attends to, averaged over the sequence (s_kv).

    Full attention: s/2 under the causal mask (Megatron-Bridge >= 25.09), s without it
    (Megatron-LM 2021 eq. 3, NeMo <= 25.07). A sliding window of w < s keys: query x sees
    min(x, w) keys, so the mean is (w^2/2 + (s - w) w) / s = w - w^2 / (2 s) under the mask
    (equal to s/2 at w = s), and w without it.
    """
    s = floats(seq_length)
    full = s / 2 if causal else s
    if window is None:
        return full
    w = float(window)
    return where(w >= s, full, w - w * w / (2 * s) if causal else w)


def attention_layer_mix(op: Op) -> tuple[tuple[float, int | None], ...]:
    """(share of layers, window) of the full-attention and the windowed layers an op stands for."""
    if op.attn_window is None or op.attn_window_share == 0:
        return ((1.0, None),)
    return ((1.0 - op.attn_window_share, None), (op.attn_window_share, op.attn_window))


def attention_fwd_flop_per_token(op: Op, seq_length, causal: bool, window: int | None = None):
    """Attention core forward FLOPs per query token of one layer class: 2 matmuls of
    2*a*d*s_kv each (s_kv: ``mean_keys_per_query``)."""
    return (FLOP_PER_MAC * op.attn_heads * (op.attn_qk_dim + op.attn_v_dim)
            * mean_keys_per_query(seq_length, causal, window))


def mean_attention_fwd_flop_per_token(op: Op, seq_length, causal: bool) -> float:
    """``attention_fwd_flop_per_token`` averaged over the full and windowed layers."""
    return float(sum(share * attention_fwd_flop_per_token(op, seq_length, causal, w)
                     for share, w in attention_layer_mix(op)))


@functools.lru_cache(maxsize=MEMO_SIZE)
def layer_fwd_flop_per_token(m: ModelSpec, kind: LayerKind, seq_length: int, causal: bool) -> float:
    total = 0.0
    for op in weight_ops(m, kind):
        if op.kind is OpKind.GEMM:
            total += op.fwd_flop_per_token
        elif op.kind is OpKind.ATTENTION:
            total += mean_attention_fwd_flop_per_token(op, seq_length, causal)
    return total


@dataclass(frozen=True)
class FlopCount:
    """Training FLOPs per token (forward + backward, no recompute), by part."""

    layers: float
    output: float
    mtp: float

    @property
    def total(self) -> float:
        return self.layers + self.output + self.mtp


@functools.lru_cache(maxsize=MEMO_SIZE)
def training_flop_per_token(m: ModelSpec, seq_length: int, causal: bool = True) -> FlopCount:
    """Model FLOPs per token = (1 + backward factor) x forward; recompute excluded (MFU convention)."""
    train = 1 + BACKWARD_OVER_FORWARD
    layers = sum(layer_fwd_flop_per_token(m, k, seq_length, causal) for k in layer_kinds(m))
    output = head_weight_op(m).fwd_flop_per_token
    mtp = m.mtp_layers * (
        layer_fwd_flop_per_token(m, mtp_layer_kind(m), seq_length, causal)
        + sum(op.fwd_flop_per_token for op in mtp_extra_ops(m))
        + output
    )
    return FlopCount(layers=train * layers, output=train * output, mtp=train * mtp)


def megatron_flop_per_token(m: ModelSpec, seq_length: int) -> float:
    """Korthikanti et al. 2022 eq. 7 per token, 72*l*h^2*(1 + s/(6h) + V/(12*h*l)).

    Valid only for GPT-style models (MHA, ffn = 4h, non-gated); an independent cross-check.
    """
    l, h, s, V = m.num_layers, m.hidden_size, seq_length, m.vocab_size
    return 72 * l * h**2 * (1 + s / (6 * h) + V / (12 * h * l))
