"""KV cache bytes (``perfmodel.formulas.kv_cache``), by hand from the model cards."""

from __future__ import annotations

import pytest

from perfmodel.formulas.kv_cache import (
    PAGE_TOKENS,
    kv_bytes_per_sequence,
    kv_bytes_per_token,
    kv_shards,
    max_sequences,
    paged_bytes_per_sequence,
)
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.presets import load_model

BF16 = 2
FP8 = 1
TOKENS_8K = 8192


def test_llama3_70b_gqa_at_8k():
    # 80 layers x 8 KV heads x 128 head dim x 2 (K, V) x 2 bytes = 327,680 bytes per token
    m = load_model("llama3-70b")
    assert kv_bytes_per_token(m, BF16) == 80 * 8 * 128 * 2 * 2 == 327_680
    assert kv_bytes_per_sequence(m, TOKENS_8K, BF16) == 327_680 * 8192 == 2_684_354_560   # 2.5 GiB


def test_deepseek_v3_mla_at_8k():
    # MLA caches the latent d_c = 512 and the RoPE key d_r = 64: 61 x (512 + 64) x 2 bytes
    m = load_model("deepseek-v3")
    assert kv_bytes_per_token(m, BF16) == 61 * (512 + 64) * 2 == 70_272
    assert kv_bytes_per_sequence(m, TOKENS_8K, BF16) == 70_272 * 8192 == 575_668_224


def test_mha_caches_every_head():
    m = load_model("llama2-7b")   # 32 layers, 32 heads of 128, no GQA
    assert kv_bytes_per_token(m, BF16) == 32 * 32 * 128 * 2 * 2


def test_sliding_window_keeps_w_tokens_in_windowed_layers():
    base = load_model("llama3-8b").model_dump()
    m = ModelSpec(**{**base, "attention_window": 4096, "full_attention_every": 2})
    per_layer = 2 * 8 * 128 * BF16
    assert m.num_windowed_layers == 16
    assert kv_bytes_per_sequence(m, TOKENS_8K, BF16) == per_layer * (16 * 8192 + 16 * 4096)
    assert kv_bytes_per_sequence(m, 1000, BF16) == per_layer * 32 * 1000   # shorter than the window


def test_tp_splits_kv_heads_until_one_per_rank_and_never_mla():
    assert kv_shards(load_model("llama3-70b"), 4) == 4
    assert kv_shards(load_model("llama3-70b"), 16) == 8   # 8 KV heads: replicated beyond tp 8
    assert kv_shards(load_model("deepseek-v3"), 8) == 1   # the latent is shared by all heads


def test_paged_cache_rounds_to_blocks_and_counts_sequences():
    m = load_model("llama3-70b")
    assert PAGE_TOKENS == 16
    assert paged_bytes_per_sequence(m, 17, FP8) == 163_840 * 32
    # 10 GiB of cache, 2,000-token sequences of fp8 cache: 163,840 x 2,000 = 327.68 MB each -> 32
    assert max_sequences(10 * 2**30, m, 2000, FP8, tp=1, attention_dp=1) == 32
    assert max_sequences(10 * 2**30, m, 2000, FP8, tp=1, attention_dp=2) == 64
    assert max_sequences(10 * 2**30, m, 2000, FP8, tp=8, attention_dp=1) == 262   # 41 MB per GPU per sequence
    assert max_sequences(-1.0, m, 2000, FP8, tp=1, attention_dp=1) == 0


@pytest.mark.parametrize("model", ["llama3-70b", "deepseek-v3", "mixtral-8x7b"])
def test_sequence_bytes_grow_linearly_without_window(model):
    m = load_model(model)
    assert kv_bytes_per_sequence(m, 2000, BF16) == pytest.approx(2 * kv_bytes_per_sequence(m, 1000, BF16))
