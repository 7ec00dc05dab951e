"""Workload (parameters and FLOPs) against published counts, an independent closed form, and
invariants; plus the Hugging Face config.json importer.

Tiers (shared/STYLE.md sec. 14-16): anchor tests parametrized over (model, quantity, source,
published, rel_tol); cross-checks between two independent counts; hypothesis properties.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.formulas.counts import megatron_flop_per_token, param_count, training_flop_per_token
from perfmodel.formulas.workload import LayerKind, layer_kinds
from perfmodel.spec.errors import InputError
from perfmodel.spec.hf_config import model_from_hf_config
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.presets import list_presets, load_model, load_model_file

HF_DIR = Path(__file__).resolve().parents[1] / "data" / "hf"
GIGA = 1e9
MEGA = 1e6


def _model(ref: str) -> ModelSpec:
    """A preset id, or the name of a config.json fixture under tests/data/hf."""
    if ref.endswith(".json"):
        return model_from_hf_config(json.loads((HF_DIR / ref).read_text()))
    return load_model(ref)


def _embedding_matrices(m: ModelSpec) -> int:
    """Input embedding plus (when untied) the output projection: the 'embedding parameters'."""
    per_matrix = m.vocab_size * m.hidden_size
    return per_matrix if m.tied_embeddings else 2 * per_matrix


def _quantity(m: ModelSpec, quantity: str) -> float:
    pc = param_count(m)
    return {
        "total": pc.total,
        "active": pc.active,
        # Convention of DeepSeek (README_WEIGHTS.md) and OpenAI (gpt-oss model card Table 1):
        # the input embedding is a lookup, not compute, so it is not "activated".
        "active_excl_input_embedding": pc.active - pc.embedding,
        "non_embedding": pc.total - _embedding_matrices(m),
        "embedding": _embedding_matrices(m),
        "mtp": pc.mtp,
    }[quantity]


# ------------------------------------------------------------------------------ anchor tests
# (model, quantity, source, published, rel_tol). rel_tol is 0.5% unless the comment says why.
PARAM_ANCHORS = [
    ("llama3-8b", "total", "HF meta-llama/Meta-Llama-3-8B model page: 8.03B params", 8.03 * GIGA, 0.005),
    ("llama3-70b", "total", "HF meta-llama/Meta-Llama-3-70B model page: 70.6B params", 70.6 * GIGA, 0.005),
    # Arithmetic gives 405.85B; HF meta-llama/Llama-3.1-405B shows 406B; the paper says 405B.
    ("llama3-405b", "total", "HF meta-llama/Llama-3.1-405B model page: 406B params", 406 * GIGA, 0.005),
    # 174.6B here: tied embeddings, no learned position embeddings (25M) and no biases.
    ("gpt3-175b", "total", "Brown et al. 2020, Table 2.1: 175.0B", 175.0 * GIGA, 0.005),
    ("mixtral-8x7b", "total", "Mistral AI, 'Mixtral of experts' (2023-12-11): 46.7B total", 46.7 * GIGA, 0.005),
    ("mixtral-8x7b", "active", "Mistral AI, 'Mixtral of experts' (2023-12-11): 12.9B per token", 12.9 * GIGA, 0.005),
    ("mixtral-8x22b", "total", "Mistral AI, 'Cheaper, Better, Faster, Stronger' (2024-04-17): 141B", 141 * GIGA, 0.005),
    ("mixtral-8x22b", "active", "Mistral AI, 'Cheaper, Better, Faster, Stronger' (2024-04-17): 39B active", 39 * GIGA, 0.005),
    # DeepSeek-V3 total: 671.03B by arithmetic; 1% as the brief allows for the MLA norms we drop.
    ("deepseek-v3", "total", "DeepSeek-V3 report, abstract: 671B total", 671 * GIGA, 0.01),
    # The headline 37B is rounded down. Honest arithmetic on the official config gives 37.55B:
    # DeepSeek's own breakdown (deepseek-ai/DeepSeek-V3 README_WEIGHTS.md) is 36.6B activated
    # *excluding* the 0.93B input embedding (next row, matched to 0.1%), and 36.6 + 0.93 = 37.5.
    # So 37B is met only within 1.5%; the tolerance is 1.6% and the counting is not changed.
    ("deepseek-v3", "active", "DeepSeek-V3 report, abstract: 37B activated per token", 37 * GIGA, 0.016),
    ("deepseek-v3", "active_excl_input_embedding",
     "deepseek-ai/DeepSeek-V3 README_WEIGHTS.md: 36.6B activated (incl. 0.9B output head)", 36.6 * GIGA, 0.005),
    # MTP module without the shared embedding/head: arithmetic 11.61B (one MoE layer 11.51B +
    # the 2h x h projection 0.10B) against a figure printed to 0.1B; 1.5% tolerance.
    ("deepseek-v3", "mtp", "deepseek-ai/DeepSeek-V3 README_WEIGHTS.md: MTP 11.5B unique", 11.5 * GIGA, 0.015),
    ("qwen3-235b-a22b", "total", "HF Qwen/Qwen3-235B-A22B model card: 235B total", 235 * GIGA, 0.005),
    ("qwen3-235b-a22b", "non_embedding", "HF Qwen/Qwen3-235B-A22B model card: 234B non-embedding", 234 * GIGA, 0.005),
    # Arithmetic 22.19B (embeddings included, as Qwen counts them); '22B' is printed to 1B.
    ("qwen3-235b-a22b", "active", "HF Qwen/Qwen3-235B-A22B model card: 22B activated", 22 * GIGA, 0.01),
    ("qwen3-30b-a3b", "total", "HF Qwen/Qwen3-30B-A3B model card: 30.5B total", 30.5 * GIGA, 0.005),
    ("qwen3-30b-a3b", "non_embedding", "HF Qwen/Qwen3-30B-A3B model card: 29.9B non-embedding", 29.9 * GIGA, 0.005),
    # Arithmetic 3.353B against '3.3B' (truncated, not rounded): 1.6% off; 2% tolerance.
    ("qwen3-30b-a3b", "active", "HF Qwen/Qwen3-30B-A3B model card: 3.3B activated", 3.3 * GIGA, 0.02),
    ("gpt-oss-120b", "total", "OpenAI gpt-oss model card (arXiv 2508.10925) Table 1: 116.83B", 116.83 * GIGA, 0.005),
    ("gpt-oss-120b", "active_excl_input_embedding",
     "OpenAI gpt-oss model card Table 1: 5.13B active (unembedding counted, embedding not)", 5.13 * GIGA, 0.005),
    ("nemotron-4-340b", "non_embedding", "Nemotron-4 340B report sec. 2.1: 331.6B non-embedding", 331.6 * GIGA, 0.005),
    ("nemotron-4-340b", "embedding", "Nemotron-4 340B report sec. 2.1: 9.4B embedding", 9.4 * GIGA, 0.005),
    ("nemotron-4-15b", "non_embedding", "Parmar et al. 2024 sec. 2.1: 12.5B non-embedding", 12.5 * GIGA, 0.005),
    # Arithmetic 315.7B (tied embeddings; untied would be 316.5B) against the headline 314B.
    ("grok-1-314b", "total", "xai-org/grok-1 README: 314B parameters", 314 * GIGA, 0.01),
    # Dense and MoE layers alternate (interleave_step 2); the card rounds both figures.
    ("llama4-maverick", "total", "HF meta-llama/Llama-4-Maverick model card: 400B total", 400 * GIGA, 0.01),
    ("llama4-maverick", "active", "HF meta-llama/Llama-4-Maverick model card: 17B active", 17 * GIGA, 0.02),
    # Hugging Face config.json fixtures (tests/data/hf), imported through perfmodel.spec.hf_config.
    ("qwen1.5-moe-a2.7b.json", "total", "HF Qwen/Qwen1.5-MoE-A2.7B model card: 14.3B total", 14.3 * GIGA, 0.005),
    ("qwen1.5-moe-a2.7b.json", "active", "HF Qwen/Qwen1.5-MoE-A2.7B model card: 2.7B activated", 2.7 * GIGA, 0.005),
    ("gpt-neox-20b.json", "total", "HF EleutherAI/gpt-neox-20b model card: 20,556,201,984", 20_556_201_984, 0.005),
    # GPT-2 small: 123.55M here; the 124.44M checkpoint adds 0.79M position embeddings + biases.
    ("gpt2.json", "total", "HF openai-community/gpt2 model card: 124M parameters", 124 * MEGA, 0.005),
]


@pytest.mark.parametrize(
    ("model", "quantity", "source", "published", "rel_tol"),
    PARAM_ANCHORS,
    ids=[f"{a[0]}-{a[1]}" for a in PARAM_ANCHORS],
)
def test_param_count_matches_published(model, quantity, source, published, rel_tol):
    got = _quantity(_model(model), quantity)
    assert got == pytest.approx(published, rel=rel_tol), f"{model} {quantity}: {got:.4e} vs {source}"


# Narayanan et al. 2021, Table 1: (preset, printed "Number of parameters (billion)").
MEGATRON_TABLE1 = [
    ("megatron-1.7b", 1.7), ("megatron-3.6b", 3.6), ("megatron-7.5b", 7.5),
    ("megatron-18.4b", 18.4), ("megatron-39.1b", 39.1), ("megatron-76.1b", 76.1),
    ("megatron-145.6b", 145.6), ("megatron-310.1b", 310.1), ("megatron-529.6b", 529.6),
]
MEGATRON_SEQ_LENGTH = 2048
"""s in Narayanan et al. 2021 sec. 5.1 (also the Table 1 runs)."""


def _megatron_paper_params(m: ModelSpec, s: int) -> float:
    """Narayanan et al. 2021, sec. 5.1: P = 12 l h^2 (1 + 13/(12h) + (V + s)/(12 l h))."""
    l, h, V = m.num_layers, m.hidden_size, m.vocab_size
    return 12 * l * h**2 * (1 + 13 / (12 * h) + (V + s) / (12 * l * h))


@pytest.mark.parametrize(("model", "printed_billion"), MEGATRON_TABLE1)
def test_megatron_table1_params(model, printed_billion):
    """Two honest comparisons.

    1. Against the paper's own formula: it also counts learned position embeddings (s*h) and
       biases + LayerNorm shifts (13h per layer, we keep 2h), which we do not model. That is
       at most 0.35% (1.7B row), so 0.5%.
    2. Against the printed Table 1 value, which is rounded to 0.1B: the paper's formula itself
       gives 1.652B for the '1.7B' row (2.8% away), so the tolerance is the printing's
       half-unit 0.05B plus the 0.5% of (1). Measured: 1.647B (-3.1%) and 3.555B (-1.3%) for the
       two smallest rows, whose allowance is 3.4% and 1.9%; every row from 7.5B up is within
       1% (7.458B, -0.56%) and the four largest within 0.1%.
    """
    m = load_model(model)
    got = param_count(m).total
    assert m.tied_embeddings, "Megatron GPT shares the output layer with the word embedding"
    assert got == pytest.approx(_megatron_paper_params(m, MEGATRON_SEQ_LENGTH), rel=0.005)
    published = printed_billion * GIGA
    assert abs(got - published) <= 0.05 * GIGA + 0.005 * published
    if printed_billion >= 7.5:
        assert got == pytest.approx(published, rel=0.01)


# --------------------------------------------------------------------------------- cross-checks
GPT_STYLE = ["gpt3-175b"] + [row[0] for row in MEGATRON_TABLE1]


@pytest.mark.parametrize("model", GPT_STYLE)
@pytest.mark.parametrize("seq_length", [1024, 2048, 8192])
def test_full_attention_flops_equal_korthikanti_eq7(model, seq_length):
    """MHA, ffn = 4h, non-gated: the per-op sum with full s^2 attention is eq. 7 exactly."""
    m = load_model(model)
    got = training_flop_per_token(m, seq_length, causal=False).total
    assert got == pytest.approx(megatron_flop_per_token(m, seq_length), rel=1e-9)


def _attention_dims(m: ModelSpec) -> tuple[int, int, int]:
    """(query heads, per-head q.k width, per-head value width)."""
    if m.mla is not None:
        return m.num_attention_heads, m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim, m.mla.v_head_dim
    d = m.head_dim or m.hidden_size // m.num_attention_heads
    return m.num_attention_heads, d, d


def _keys_per_query(m: ModelSpec, s: int, causal: bool) -> float:
    """Mean keys a query attends to, averaged over the layers, written out by hand: s/2 (causal)
    or s; a windowed layer (w < s) sees min(x, w) keys at position x, on average w - w^2/(2s)
    causal, w otherwise."""
    full = s / 2 if causal else s
    if m.attention_window is None:
        return full
    w = m.attention_window
    windowed = full if w >= s else (w - w * w / (2 * s) if causal else w)
    n_full = m.num_layers // m.full_attention_every if m.full_attention_every else 0
    share = (m.num_layers - n_full) / m.num_layers
    return (1 - share) * full + share * windowed


@pytest.mark.parametrize("model", list_presets())
def test_causal_is_half_the_attention_core(model):
    """full - causal = the attention core's s/2 per query, over every layer incl. MTP:
    3 (fwd+bwd) x 2 FLOP/MAC x a (d_qk + d_v) x s/2 per layer (w^2/(2s) in windowed layers)."""
    m, s = load_model(model), 4096
    full = training_flop_per_token(m, s, causal=False).total
    causal = training_flop_per_token(m, s, causal=True).total
    a, d_qk, d_v = _attention_dims(m)
    layers = m.num_layers + m.mtp_layers
    gap = _keys_per_query(m, s, False) - _keys_per_query(m, s, True)
    assert causal < full
    assert full - causal == pytest.approx(3 * 2 * a * (d_qk + d_v) * gap * layers, rel=1e-12)


def test_gpt_oss_sliding_window_flops_by_hand():
    """GPT-OSS-120B at s = 4096: 18 of 36 layers see 128 - 128^2/8192 = 126 keys per query
    instead of 2048; per layer and token the attention core's forward is 2 x 64 x 128 x s_kv."""
    m, s = load_model("gpt-oss-120b"), 4096
    assert (m.attention_window, m.full_attention_every, m.num_windowed_layers) == (128, 2, 18)
    full_layer = 2 * 64 * 128 * 2048          # 33,554,432 FLOP
    window_layer = 2 * 64 * 128 * 126         # 2,064,384 FLOP
    saved = 3 * 18 * (full_layer - window_layer)
    unwindowed = m.model_copy(update={"attention_window": None, "full_attention_every": None})
    got = training_flop_per_token(unwindowed, s).total - training_flop_per_token(m, s).total
    assert got == pytest.approx(saved, rel=1e-12)
    assert saved == 1_700_462_592


def test_window_wider_than_sequence_changes_nothing():
    m = load_model("gpt-oss-120b")
    wide = m.model_copy(update={"attention_window": 8192})
    plain = m.model_copy(update={"attention_window": None, "full_attention_every": None})
    assert training_flop_per_token(wide, 8192).total == training_flop_per_token(plain, 8192).total


@pytest.mark.parametrize(("update", "mentions"), [
    ({"full_attention_every": 2}, "attention_window"),
    ({"attention_window": 128, "full_attention_every": 1}, "full_attention_every(1)"),
    ({"attention_window": 0}, "attention_window"),
])
def test_window_fields_validated(update, mentions):
    base = load_model("llama3-8b").model_dump()
    with pytest.raises(Exception) as info:
        ModelSpec.model_validate({**base, **update})
    assert mentions in str(info.value)


@pytest.mark.parametrize(("layers", "every", "windowed"), [(36, 2, 18), (62, 6, 52), (32, None, 32)])
def test_num_windowed_layers(layers, every, windowed):
    m = load_model("llama3-8b").model_copy(
        update={"num_layers": layers, "attention_window": 4096, "full_attention_every": every})
    assert m.num_windowed_layers == windowed


def _closed_form_compute_params(m: ModelSpec) -> float:
    """Weights a token multiplies, written out by hand (no inventory): attention, MLP (dense,
    shared and top-k routed experts, router) over all main-model layers, plus the logits
    projection V*h (which exists whether or not it is tied). Norms and the input embedding
    (a lookup) do not multiply. Shoeybi et al. 2019; DeepSeek-V2 report sec. 2.1 for MLA."""
    h, a = m.hidden_size, m.num_attention_heads
    if m.mla is None:
        d, g = m.head_dim or h // a, m.num_query_groups or a
        attn = h * a * d + 2 * h * g * d + a * d * h
    else:
        x = m.mla
        q = h * x.q_lora_rank + x.q_lora_rank * a * (x.qk_nope_head_dim + x.qk_rope_head_dim) \
            if x.q_lora_rank else h * a * (x.qk_nope_head_dim + x.qk_rope_head_dim)
        kv = h * (x.kv_lora_rank + x.qk_rope_head_dim) + x.kv_lora_rank * a * (x.qk_nope_head_dim + x.v_head_dim)
        attn = q + kv + a * x.v_head_dim * h
    mats = 3 if m.gated_mlp else 2
    dense_mlp = mats * h * m.ffn_hidden_size
    if m.moe is None:
        return m.num_layers * (attn + dense_mlp) + m.vocab_size * h
    e = m.moe
    moe_mlp = mats * h * e.expert_ffn_hidden_size * (e.top_k + e.num_shared_experts) + h * e.num_experts
    n_moe = m.num_layers - e.num_dense_layers
    return e.num_dense_layers * (attn + dense_mlp) + n_moe * (attn + moe_mlp) + m.vocab_size * h


@pytest.mark.parametrize("model", list_presets())
def test_flops_are_6n_plus_attention(model):
    """Kaplan et al. 2020 Table 1: C = 6 N (non-embedding, active) + the attention core, here with
    the causal s/2 and the logits GEMM in N. The per-op sum must agree to 0.1% (the norms in the
    inventory are the only difference; the brief asks for 'a few %')."""
    m, s = load_model(model), 4096
    flops = training_flop_per_token(m, s, causal=True)
    a, d_qk, d_v = _attention_dims(m)
    attention = 3 * 2 * a * (d_qk + d_v) * _keys_per_query(m, s, True) * m.num_layers
    estimate = 6 * _closed_form_compute_params(m) + attention
    assert flops.layers + flops.output == pytest.approx(estimate, rel=1e-3)


@pytest.mark.parametrize("model", list_presets())
def test_active_params_close_to_closed_form(model):
    """The param inventory and the hand count agree (inventory adds norms, input embedding)."""
    m = load_model(model)
    pc = param_count(m)
    compute = pc.active - pc.embedding + (m.vocab_size * m.hidden_size if m.tied_embeddings else 0)
    assert compute == pytest.approx(_closed_form_compute_params(m), rel=1e-3)


def test_mtp_counted_in_stored_not_total():
    m = load_model("deepseek-v3")
    pc = param_count(m)
    assert pc.mtp > 0
    assert pc.stored == pc.total + pc.mtp
    no_mtp = m.model_copy(update={"mtp_layers": 0})
    assert param_count(no_mtp).total == pc.total
    assert training_flop_per_token(m, 4096).mtp > 0
    assert training_flop_per_token(no_mtp, 4096).mtp == 0


def test_dense_model_active_equals_total():
    pc = param_count(load_model("llama3-70b"))
    assert pc.active == pc.total


# ------------------------------------------------------------------------------- HF importer
@pytest.mark.parametrize(
    ("fixture", "preset"),
    [("llama3-8b.json", "llama3-8b"), ("mixtral-8x7b.json", "mixtral-8x7b"),
     ("qwen3-30b-a3b.json", "qwen3-30b-a3b"), ("deepseek-v3.json", "deepseek-v3")],
)
def test_hf_import_round_trip(fixture, preset):
    imported, expected = _model(fixture), load_model(preset)
    got, want = param_count(imported), param_count(expected)
    assert (got.total, got.active, got.stored) == (want.total, want.active, want.stored)
    assert training_flop_per_token(imported, 8192).total == training_flop_per_token(expected, 8192).total
    if preset != "deepseek-v3":  # MLA: the preset spells out num_query_groups; it shapes nothing
        assert imported.model_copy(update={"name": expected.name}) == expected


def test_hf_import_through_load_model_file():
    assert load_model_file(str(HF_DIR / "llama3-8b.json")).hidden_size == 4096
    with pytest.raises(InputError, match="unknown model preset"):
        load_model(str(HF_DIR / "llama3-8b.json"))   # a preset lookup never opens a path


def test_scenario_file_inlines_the_files_it_names(tmp_path):
    """A scenario file may name a config.json and a hardware YAML beside it; they are read
    when the file is loaded and carried inline, so a parsed mapping never names a path."""
    import shutil

    import yaml

    from perfmodel.spec.hardware import HARDWARE_DIR, HardwareSpec
    from perfmodel.spec.model import ModelSpec
    from perfmodel.spec.scenario import load_scenario, parse_scenario

    shutil.copy(HF_DIR / "llama3-8b.json", tmp_path / "cfg.json")
    shutil.copy(HARDWARE_DIR / "h100-sxm.yaml", tmp_path / "my-h100.yaml")
    data = dict(hardware="my-h100.yaml", num_gpus=8, model="cfg.json", seq_length=2048, global_batch_size=8)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(data))
    sc = load_scenario(tmp_path / "s.yaml")
    assert isinstance(sc.hardware, HardwareSpec) and isinstance(sc.model, ModelSpec)
    assert sc.model.hidden_size == 4096
    with pytest.raises(InputError, match="hardware: unknown hardware 'my-h100.yaml'"):
        parse_scenario(data)
    with pytest.raises(InputError, match="model: unknown model preset 'cfg.json'"):
        parse_scenario({**data, "hardware": "h100-sxm"})


def test_hf_qwen2_moe_shared_expert_and_gpt2_defaults():
    qwen = _model("qwen1.5-moe-a2.7b.json")
    assert qwen.moe.num_shared_experts == 4   # 5632 / 1408
    gpt2 = _model("gpt2.json")
    assert gpt2.tied_embeddings and gpt2.ffn_hidden_size == 4 * 768 and not gpt2.gated_mlp


def _load_fixture(name: str) -> dict:
    return json.loads((HF_DIR / name).read_text())


def _without(cfg: dict, key: str) -> dict:
    return {k: v for k, v in cfg.items() if k != key}


BAD_CONFIGS = [
    ("missing hidden_size", _without(_load_fixture("llama3-8b.json"), "hidden_size"), "hidden_size"),
    ("missing model_type", _without(_load_fixture("llama3-8b.json"), "model_type"), "model_type"),
    ("unknown model_type", {**_load_fixture("llama3-8b.json"), "model_type": "bert"}, "bert"),
    ("string int", {**_load_fixture("llama3-8b.json"), "hidden_size": "4096"}, "hidden_size"),
    ("bool int", {**_load_fixture("llama3-8b.json"), "vocab_size": True}, "vocab_size"),
    ("negative", {**_load_fixture("llama3-8b.json"), "num_hidden_layers": -2}, "num_hidden_layers"),
    ("float int", {**_load_fixture("llama3-8b.json"), "intermediate_size": 14336.0}, "intermediate_size"),
    ("bad tie", {**_load_fixture("llama3-8b.json"), "tie_word_embeddings": "no"}, "tie_word_embeddings"),
    ("gqa", {**_load_fixture("llama3-8b.json"), "num_key_value_heads": 5}, "num_key_value_heads"),
    ("head split", {**_without(_load_fixture("llama3-8b.json"), "head_dim"), "hidden_size": 4100}, "hidden_size"),
    ("top-k", {**_load_fixture("mixtral-8x7b.json"), "num_experts_per_tok": 9}, "num_experts_per_tok"),
    ("no experts", _without(_load_fixture("mixtral-8x7b.json"), "num_local_experts"), "num_local_experts"),
    ("interleaved", {**_load_fixture("qwen3-30b-a3b.json"), "decoder_sparse_step": 2}, "decoder_sparse_step"),
    ("sparse dense", {**_load_fixture("qwen3-30b-a3b.json"), "mlp_only_layers": [1, 3]}, "mlp_only_layers"),
    ("bad list", {**_load_fixture("qwen3-30b-a3b.json"), "mlp_only_layers": [99]}, "mlp_only_layers"),
    ("shared width", {**_load_fixture("qwen1.5-moe-a2.7b.json"), "shared_expert_intermediate_size": 5000},
     "shared_expert_intermediate_size"),
    ("moe freq", {**_load_fixture("deepseek-v3.json"), "moe_layer_freq": 2}, "moe_layer_freq"),
    ("dense layers", {**_load_fixture("deepseek-v3.json"), "first_k_dense_replace": 99}, "first_k_dense_replace"),
    ("mla key", _without(_load_fixture("deepseek-v3.json"), "kv_lora_rank"), "kv_lora_rank"),
    ("gpt2 heads", {**_load_fixture("gpt2.json"), "n_head": 7}, "hidden_size"),
    ("not an object", [1, 2, 3], "JSON object"),
]


@pytest.mark.parametrize(("case", "cfg", "mentions"), BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_hf_import_rejects_with_one_line(case, cfg, mentions):
    with pytest.raises(InputError) as info:
        model_from_hf_config(cfg)
    err = info.value
    assert err.field == "model.config.json"
    assert mentions in str(err) and "\n" not in str(err)


GPT_OSS_CONFIG = dict(model_type="gpt_oss", num_hidden_layers=36, hidden_size=2880, num_attention_heads=64,
                      num_key_value_heads=8, head_dim=64, intermediate_size=2880, vocab_size=201088,
                      num_local_experts=128, num_experts_per_tok=4, sliding_window=128,
                      tie_word_embeddings=False)
"""HF openai/gpt-oss-120b config.json, the keys the importer reads."""
ALTERNATING = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(36)]


@pytest.mark.parametrize("cfg", [GPT_OSS_CONFIG, {**GPT_OSS_CONFIG, "layer_types": ALTERNATING}],
                         ids=["implied", "layer_types"])
def test_hf_gpt_oss_imports_its_window(cfg):
    m = model_from_hf_config(cfg)
    preset = load_model("gpt-oss-120b")
    assert (m.attention_window, m.full_attention_every) == (128, 2)
    assert m.model_copy(update={"name": preset.name}) == preset


@pytest.mark.parametrize(("extra", "window", "every"), [
    ({"sliding_window": 4096}, 4096, None),                     # Mistral 7B v0.1: every layer
    ({"sliding_window": None}, None, None),                     # Mistral 7B v0.2+: none
    ({"layer_types": ["full_attention"] * 32, "sliding_window": 4096}, None, None),
    ({"layer_types": ["sliding_attention" if (i + 1) % 4 else "full_attention" for i in range(32)],
      "sliding_window": 1024}, 1024, 4),
])
def test_hf_mistral_window_variants(extra, window, every):
    cfg = {**_load_fixture("llama3-8b.json"), "model_type": "mistral", **extra}
    m = model_from_hf_config(cfg)
    assert (m.attention_window, m.full_attention_every) == (window, every)


def test_hf_qwen_window_only_where_switched_on():
    qwen = _load_fixture("qwen3-30b-a3b.json")
    assert model_from_hf_config({**qwen, "use_sliding_window": False, "sliding_window": 4096}).attention_window is None
    on = {**qwen, "use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 0}
    assert model_from_hf_config(on).attention_window == 4096
    assert model_from_hf_config({**on, "max_window_layers": 48}).attention_window is None


WINDOW_BAD = [
    ("irregular", {**GPT_OSS_CONFIG, "layer_types": ALTERNATING[:-1] + ["sliding_attention"]}, "layer_types"),
    ("unknown type", {**GPT_OSS_CONFIG, "layer_types": ["chunked_attention"] * 36}, "layer_types"),
    ("short list", {**GPT_OSS_CONFIG, "layer_types": ALTERNATING[:10]}, "layer_types"),
    ("no width", _without(GPT_OSS_CONFIG, "sliding_window"), "sliding_window"),
    ("qwen split", {**_load_fixture("qwen3-30b-a3b.json"), "use_sliding_window": True, "sliding_window": 4096,
                    "max_window_layers": 28}, "max_window_layers"),
]


@pytest.mark.parametrize(("case", "cfg", "mentions"), WINDOW_BAD, ids=[c[0] for c in WINDOW_BAD])
def test_hf_window_patterns_refused_with_one_line(case, cfg, mentions):
    with pytest.raises(InputError) as info:
        model_from_hf_config(cfg)
    assert info.value.field == "model.config.json"
    assert mentions in str(info.value) and "\n" not in str(info.value)


def test_hf_deepseek_null_q_lora_and_dense():
    """DeepSeek-V2-Lite style: no query compression; null routed experts = dense model."""
    cfg = {**_load_fixture("deepseek-v3.json"), "q_lora_rank": None, "n_routed_experts": None}
    m = model_from_hf_config(cfg)
    assert m.mla.q_lora_rank is None and m.moe is None and param_count(m).total > 0


# --------------------------------------------------------------------------------- properties
@st.composite
def dense_models(draw) -> ModelSpec:
    g = draw(st.integers(1, 16))
    return ModelSpec(
        num_layers=draw(st.integers(1, 160)),
        hidden_size=draw(st.integers(64, 32768)),
        num_attention_heads=g * draw(st.integers(1, 16)),
        num_query_groups=g,
        head_dim=draw(st.integers(8, 256)),
        ffn_hidden_size=draw(st.integers(64, 131072)),
        gated_mlp=draw(st.booleans()),
        vocab_size=draw(st.integers(1, 262144)),
        tied_embeddings=draw(st.booleans()),
    )


@settings(max_examples=200, deadline=None)
@given(m=dense_models(), s=st.integers(1, 131072), dl=st.integers(1, 8), dh=st.integers(1, 4096),
       causal=st.booleans())
def test_params_and_flops_positive_and_monotone(m, s, dl, dh, causal):
    def measure(spec: ModelSpec) -> tuple[int, float]:
        return param_count(spec).total, training_flop_per_token(spec, s, causal).total

    params, flops = measure(m)
    assert params > 0 and flops > 0
    deeper = measure(m.model_copy(update={"num_layers": m.num_layers + dl}))
    wider = measure(m.model_copy(update={"hidden_size": m.hidden_size + dh}))
    assert deeper[0] > params and deeper[1] > flops
    assert wider[0] > params and wider[1] > flops
    assert training_flop_per_token(m, s, causal=True).total <= training_flop_per_token(m, s, causal=False).total


@pytest.mark.parametrize(("lead", "step", "layers", "expected"), [
    (0, 1, 4, "MMMM"),
    (1, 1, 4, "DMMM"),
    (0, 2, 6, "DMDMDM"),       # Llama 4 Maverick: Megatron moe_layer_freq [0, 1] * 24
    (1, 2, 6, "DDMDMD"),       # the count starts after the leading dense layers
    (0, 3, 6, "DDMDDM"),
])
def test_layer_kinds_interleave(lead, step, layers, expected):
    m = ModelSpec(num_layers=layers, hidden_size=64, num_attention_heads=4, ffn_hidden_size=128,
                  vocab_size=100, moe=dict(num_experts=4, top_k=1, expert_ffn_hidden_size=32,
                                           num_dense_layers=lead, interleave_step=step))
    kinds = "".join("M" if k is LayerKind.MOE else "D" for k in layer_kinds(m))
    assert kinds == expected
    assert m.num_moe_layers == expected.count("M")
    assert m.num_dense_mlp_layers == expected.count("D")


def test_interleave_step_leaving_no_moe_layer_is_refused():
    with pytest.raises(ValueError, match="interleave_step"):
        ModelSpec(num_layers=4, hidden_size=64, num_attention_heads=4, ffn_hidden_size=128, vocab_size=100,
                  moe=dict(num_experts=4, top_k=1, expert_ffn_hidden_size=32, num_dense_layers=2,
                           interleave_step=3))
