"""The key-value cache of autoregressive serving: bytes per token, per sequence, and how many
sequences a paged cache holds.

=========  ==============================================================================
l          layers                              g      key/value heads (GQA; g = a for MHA)
d          head dim                            b      bytes per cached element
d_c        MLA compressed latent (kv_lora_rank)  d_r  MLA decoupled RoPE key (qk_rope_head_dim)
w          sliding-window width (keys a windowed layer keeps)
s          tokens of a sequence (prompt + generated so far)
=========  ==============================================================================

Per token per layer, multi-head and grouped-query attention cache a key and a value per KV head,
``2 g d b`` (Ainslie et al. 2023, GQA, sec. 2); multi-head latent attention caches the compressed
latent and the shared RoPE key, ``(d_c + d_r) b`` (DeepSeek-AI 2024, DeepSeek-V2 report sec.
2.1.2 and table 1: "(d_c + d_h^R) l" elements per token). A windowed layer keeps at most ``w``
tokens (Beltagy et al. 2020). Paged attention stores the cache in fixed blocks of tokens, so a
sequence holds whole blocks (Kwon et al. 2023, vLLM, sec. 4.1).
"""

from __future__ import annotations

import math

import numpy as np

from perfmodel.spec.model import ModelSpec

KEY_AND_VALUE = 2
"""A GQA/MHA layer caches two tensors per token and KV head: the key and the value."""
PAGE_TOKENS = 16
"""Tokens per KV-cache block: vLLM's default ``block_size`` (vLLM docs, engine arguments,
``--block-size`` default 16 on CUDA; Kwon et al. 2023 sec. 6 uses 16)."""


def kv_elements_per_token_per_layer(m: ModelSpec) -> int:
    """Cached elements per token per layer (before tensor-parallel sharding): ``2 g d`` for
    MHA/GQA, ``d_c + d_r`` for MLA."""
    if m.mla is not None:
        return m.mla.kv_lora_rank + m.mla.qk_rope_head_dim
    return KEY_AND_VALUE * m.kv_heads * m.attn_head_dim


def kv_bytes_per_token_per_layer(m: ModelSpec, kv_bytes_per_element: float) -> float:
    """Cache bytes one token adds to one layer."""
    return kv_elements_per_token_per_layer(m) * kv_bytes_per_element


def kv_bytes_per_token(m: ModelSpec, kv_bytes_per_element: float) -> float:
    """Cache bytes of one token over all layers, with no window (a sequence shorter than w)."""
    return m.num_layers * kv_bytes_per_token_per_layer(m, kv_bytes_per_element)


def kv_bytes_per_sequence(m: ModelSpec, seq_tokens, kv_bytes_per_element: float):
    """Cache bytes of one sequence of ``s`` tokens: full layers hold s tokens, windowed layers
    min(s, w). Works on arrays of s."""
    per_layer = kv_bytes_per_token_per_layer(m, kv_bytes_per_element)
    l_win = m.num_windowed_layers
    l_full = m.num_layers - l_win
    kept_windowed = seq_tokens if m.attention_window is None else np.minimum(seq_tokens, m.attention_window)
    return per_layer * (l_full * seq_tokens + l_win * kept_windowed)


def kv_shards(m: ModelSpec, tp: int) -> int:
    """Ways tensor parallelism splits a token's cache: KV heads split over tp ranks while there are
    at least tp of them (a rank holds g/tp heads), and are replicated beyond that (each rank holds
    one head: vLLM ``num_kv_heads // tp`` floored at 1). MLA's latent is shared by all heads and is
    replicated on every tensor-parallel rank (vLLM and SGLang MLA backends), hence 1."""
    if m.mla is not None:
        return 1
    return min(tp, m.kv_heads)


def paged_bytes_per_sequence(m: ModelSpec, seq_tokens: int, kv_bytes_per_element: float) -> float:
    """Bytes a sequence holds in a paged cache: its tokens rounded up to whole blocks."""
    blocks = math.ceil(seq_tokens / PAGE_TOKENS)
    return float(kv_bytes_per_sequence(m, blocks * PAGE_TOKENS, kv_bytes_per_element))


def max_sequences(cache_bytes_per_gpu: float, m: ModelSpec, seq_tokens: int, kv_bytes_per_element: float,
                  tp: int, attention_dp: int) -> int:
    """Sequences of ``seq_tokens`` a replica's paged cache holds at once: each GPU's cache over the
    bytes per sequence it keeps (its tp shard), times the attention data-parallel groups, which
    hold different sequences. 0 when the weights leave no room."""
    if cache_bytes_per_gpu <= 0:
        return 0
    per_gpu = paged_bytes_per_sequence(m, seq_tokens, kv_bytes_per_element) / kv_shards(m, tp)
    return int(cache_bytes_per_gpu // per_gpu) * attention_dp
