"""Hugging Face ``config.json`` (as a dict) -> ``ModelSpec``.

Reads only the keys that set the shapes of weight matrices. Every key read, per ``model_type``:

================================  ==================================================================
family (``model_type``)           keys
================================  ==================================================================
dense, gated MLP                  num_hidden_layers, hidden_size, num_attention_heads,
(llama, mistral, qwen2, qwen3)    num_key_value_heads?, head_dim?, intermediate_size, vocab_size,
                                  tie_word_embeddings?
nemotron (squared ReLU, no gate)  as dense
mixtral, gpt_oss                  dense keys + num_local_experts*, num_experts_per_tok
                                  (gpt_oss: or experts_per_token); experts have width
                                  intermediate_size
qwen2_moe, qwen3_moe              dense keys + num_experts*, num_experts_per_tok,
                                  moe_intermediate_size, shared_expert_intermediate_size?,
                                  decoder_sparse_step?, mlp_only_layers?
deepseek_v2, deepseek_v3          dense keys + q_lora_rank (null allowed), kv_lora_rank,
                                  qk_nope_head_dim, qk_rope_head_dim, v_head_dim,
                                  n_routed_experts*, n_shared_experts, num_experts_per_tok,
                                  moe_intermediate_size, first_k_dense_replace?,
                                  moe_layer_freq?, num_nextn_predict_layers*?
gpt2                              n_layer, n_embd, n_head, n_inner?, vocab_size,
                                  tie_word_embeddings?
gpt_neox                          num_hidden_layers, hidden_size, num_attention_heads,
                                  intermediate_size, vocab_size, tie_word_embeddings?
================================  ==================================================================

Sliding-window attention (llama-like, Mixtral-like and Qwen-MoE families): ``layer_types``?,
``sliding_window``?, ``use_sliding_window``? and ``max_window_layers``? (Qwen), read as
``_window_fields`` describes; a pattern other than "every n-th layer full" is refused.

Transformers 4 and 5 spell some keys differently (5 saves ``qwen3_moe``'s expert count as
``num_local_experts``, 4 as ``num_experts``), and each config class accepts its aliases
(``attribute_map``: ``num_experts`` for ``num_local_experts`` in Mixtral, GPT-OSS and Qwen3-MoE,
``num_local_experts`` for ``n_routed_experts`` and ``num_mtp_layers`` for
``num_nextn_predict_layers`` in DeepSeek-V3 under Transformers 5). ``SPELLINGS`` lists, per key
read, every spelling either version saves or maps; a file may use any one of them (two that
disagree are refused). tests/data/hf/transformers-4 and -5 hold a config of every model_type as
each version's ``save_pretrained`` writes it (scripts/save_hf_fixtures.py).

``*`` marks a key with other spellings (``SPELLINGS``). ``?`` marks a key that may be absent; it then takes the default of the matching
``transformers`` configuration class (``tie_word_embeddings``: true for gpt2, false for the
others; ``n_inner``: 4 x ``n_embd``; ``head_dim``: hidden / heads). Anything this importer
cannot represent (interleaved dense/MoE layers, a shared-expert width that is not a whole
number of experts) is refused with one line, never approximated.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from perfmodel.spec.errors import InputError, pydantic_message
from perfmodel.spec.model import ModelSpec

FIELD = "model.config.json"
"""The field named in every error this module raises."""

GPT2_FFN_OVER_HIDDEN = 4
"""GPT-2 MLP width when ``n_inner`` is null (Radford et al. 2019; HF GPT2Config)."""

_GATED = ("llama", "mistral", "qwen2", "qwen3")
_MIXTRAL_LIKE = ("mixtral", "gpt_oss")
_QWEN_MOE = ("qwen2_moe", "qwen3_moe")
_DEEPSEEK = ("deepseek_v2", "deepseek_v3")
SUPPORTED_MODEL_TYPES = tuple(sorted(
    _GATED + ("nemotron",) + _MIXTRAL_LIKE + _QWEN_MOE + _DEEPSEEK + ("gpt2", "gpt_neox")
))


SPELLINGS = {
    "num_local_experts": ("num_local_experts", "num_experts"),
    "num_experts": ("num_experts", "num_local_experts"),
    "n_routed_experts": ("n_routed_experts", "num_local_experts", "num_experts"),
    "num_nextn_predict_layers": ("num_nextn_predict_layers", "num_mtp_layers"),
}
"""Key read -> the spellings Transformers 4 and 5 save or map to it (``attribute_map`` of
MixtralConfig, GptOssConfig, Qwen3MoeConfig, DeepseekV2Config, DeepseekV3Config in 4.57 and 5.17)."""


def _fail(reason: str) -> InputError:
    return InputError(FIELD, reason)


def _spelled(cfg: dict, key: str) -> str:
    """The spelling of ``key`` this file uses (``SPELLINGS``); ``key`` itself when it has none."""
    present = [k for k in SPELLINGS.get(key, (key,)) if cfg.get(k) is not None]
    if len(present) > 1 and len({repr(cfg[k]) for k in present}) > 1:
        raise _fail("keys " + " and ".join(f"{k!r} ({cfg[k]!r})" for k in present) + " name the same figure "
                    "(Transformers 4 and 5 spellings) and disagree")
    return present[0] if present else key


def _int(cfg: dict, key: str, default: Any = ..., *, allow_zero: bool = False) -> int | None:
    """A positive (or, with ``allow_zero``, non-negative) int; ``default`` when absent or null."""
    if key not in cfg or cfg[key] is None:
        if default is ...:
            raise _fail(f"missing key {key!r} (required for model_type {cfg.get('model_type')!r})")
        return default
    value = cfg[key]
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        kind = "a non-negative integer" if allow_zero else "a positive integer"
        raise _fail(f"key {key!r} must be {kind}, got {value!r}")
    return value


def _bool(cfg: dict, key: str, default: bool) -> bool:
    value = cfg.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _fail(f"key {key!r} must be true or false, got {value!r}")
    return value


def _name(cfg: dict) -> str:
    name = cfg.get("_name_or_path")
    if isinstance(name, str) and name:
        return name
    archs = cfg.get("architectures")
    if isinstance(archs, list) and archs and isinstance(archs[0], str):
        return archs[0]
    return str(cfg["model_type"])


def _dense_fields(cfg: dict, *, gated: bool, tie_default: bool = False, mla: bool = False) -> dict:
    """Fields shared by every Llama-like decoder (names as in transformers' LlamaConfig)."""
    h = _int(cfg, "hidden_size")
    a = _int(cfg, "num_attention_heads")
    g = _int(cfg, "num_key_value_heads", None)
    head_dim = _int(cfg, "head_dim", None)
    if g is not None and not mla and a % g:
        raise _fail(f"key 'num_attention_heads' ({a}) is not a multiple of 'num_key_value_heads' ({g})")
    if head_dim is None and not mla and h % a:
        raise _fail(f"key 'hidden_size' ({h}) is not divisible by 'num_attention_heads' ({a}) "
                    "and no 'head_dim' is given")
    if head_dim is not None and h % a == 0 and head_dim == h // a:
        head_dim = None  # the contract's default; keeps imported specs equal to presets
    return dict(
        name=_name(cfg),
        num_layers=_int(cfg, "num_hidden_layers"),
        hidden_size=h,
        num_attention_heads=a,
        num_query_groups=g,
        head_dim=head_dim,
        ffn_hidden_size=_int(cfg, "intermediate_size"),
        gated_mlp=gated,
        vocab_size=_int(cfg, "vocab_size"),
        tied_embeddings=_bool(cfg, "tie_word_embeddings", tie_default),
    )


def _leading_dense_layers(cfg: dict, num_layers: int) -> int:
    """Qwen-MoE layout -> number of leading dense layers, or refuse an interleaved layout.

    A Qwen layer i is MoE when i is not in ``mlp_only_layers`` and
    ``(i + 1) % decoder_sparse_step == 0`` (transformers' Qwen2MoeDecoderLayer).
    """
    step = _int(cfg, "decoder_sparse_step", 1)
    dense = cfg.get("mlp_only_layers") or []
    if not isinstance(dense, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and 0 <= i < num_layers for i in dense
    ):
        raise _fail(f"key 'mlp_only_layers' must be a list of layer indices below {num_layers}, got {dense!r}")
    if step != 1:
        raise _fail(f"key 'decoder_sparse_step' is {step}: interleaved dense/MoE layers are not "
                    "supported (only leading dense layers)")
    k = len(set(dense))
    if sorted(set(dense)) != list(range(k)):
        raise _fail(f"key 'mlp_only_layers' is {sorted(set(dense))}: only leading dense layers "
                    f"(0..k-1) are supported")
    return k


def _moe(cfg: dict, experts_key: str, top_k_key: str, **rest) -> dict:
    """The ``moe`` mapping, with top-k checked against the expert count in the file's own key names."""
    num_experts, top_k = _int(cfg, experts_key), _int(cfg, top_k_key)
    if top_k > num_experts:
        raise _fail(f"key {top_k_key!r} ({top_k}) exceeds {experts_key!r} ({num_experts})")
    return dict(num_experts=num_experts, top_k=top_k, **rest)


def _mixtral_like(cfg: dict) -> dict:
    fields = _dense_fields(cfg, gated=True)
    top_k_key = "num_experts_per_tok"
    if cfg.get("model_type") == "gpt_oss" and cfg.get(top_k_key) is None:
        top_k_key = "experts_per_token"   # the name in OpenAI's original gpt-oss config
    fields["moe"] = _moe(cfg, _spelled(cfg, "num_local_experts"), top_k_key,
                         expert_ffn_hidden_size=fields["ffn_hidden_size"])
    return fields


def _qwen_moe(cfg: dict) -> dict:
    fields = _dense_fields(cfg, gated=True)
    fe = _int(cfg, "moe_intermediate_size")
    shared = _int(cfg, "shared_expert_intermediate_size", 0, allow_zero=True)
    if shared % fe:
        raise _fail(f"key 'shared_expert_intermediate_size' ({shared}) is not a multiple of "
                    f"'moe_intermediate_size' ({fe})")
    fields["moe"] = _moe(
        cfg, _spelled(cfg, "num_experts"), "num_experts_per_tok",
        expert_ffn_hidden_size=fe,
        num_shared_experts=shared // fe,
        num_dense_layers=_leading_dense_layers(cfg, fields["num_layers"]),
    )
    return fields


def _deepseek(cfg: dict) -> dict:
    fields = _dense_fields(cfg, gated=True, mla=True)
    fields["num_query_groups"] = None   # MLA: num_key_value_heads does not shape any weight
    fields["head_dim"] = None
    fields["mla"] = dict(
        q_lora_rank=_int(cfg, "q_lora_rank", None),
        kv_lora_rank=_int(cfg, "kv_lora_rank"),
        qk_nope_head_dim=_int(cfg, "qk_nope_head_dim"),
        qk_rope_head_dim=_int(cfg, "qk_rope_head_dim"),
        v_head_dim=_int(cfg, "v_head_dim"),
    )
    fields["mtp_layers"] = _int(cfg, _spelled(cfg, "num_nextn_predict_layers"), 0, allow_zero=True)
    experts_key = _spelled(cfg, "n_routed_experts")
    if cfg.get(experts_key) is None:
        return fields   # DeepSeek configs write null routed experts for a dense model
    freq = _int(cfg, "moe_layer_freq", 1)
    if freq != 1:
        raise _fail(f"key 'moe_layer_freq' is {freq}: interleaved dense/MoE layers are not supported")
    num_dense = _int(cfg, "first_k_dense_replace", 0, allow_zero=True)
    if num_dense > fields["num_layers"]:
        raise _fail(f"key 'first_k_dense_replace' ({num_dense}) exceeds "
                    f"'num_hidden_layers' ({fields['num_layers']})")
    fields["moe"] = _moe(
        cfg, experts_key, "num_experts_per_tok",
        expert_ffn_hidden_size=_int(cfg, "moe_intermediate_size"),
        num_shared_experts=_int(cfg, "n_shared_experts", allow_zero=True),
        num_dense_layers=num_dense,
    )
    return fields


GPT_OSS_SWIGLU_LIMIT = 7.0
"""transformers ``GptOssConfig`` default ``swiglu_limit``: the GLU's clamp (``ModelSpec.clamped_glu``)."""


def _gpt2(cfg: dict) -> dict:
    h = _int(cfg, "n_embd")
    return dict(
        name=_name(cfg),
        num_layers=_int(cfg, "n_layer"),
        hidden_size=h,
        num_attention_heads=_int(cfg, "n_head"),
        ffn_hidden_size=_int(cfg, "n_inner", GPT2_FFN_OVER_HIDDEN * h),
        gated_mlp=False,
        vocab_size=_int(cfg, "vocab_size"),
        tied_embeddings=_bool(cfg, "tie_word_embeddings", True),
    )


def _window_from_layer_types(cfg: dict, num_layers: int) -> dict:
    types = cfg["layer_types"]
    known = ("sliding_attention", "full_attention")
    if not isinstance(types, list) or len(types) != num_layers or any(x not in known for x in types):
        raise _fail(f"key 'layer_types' must list {num_layers} entries of {' or '.join(known)}, got {types!r}")
    if "sliding_attention" not in types:
        return {}
    full = [i + 1 for i, x in enumerate(types) if x == "full_attention"]
    every = full[0] if full else None
    if full and full != list(range(every, num_layers + 1, every)):
        raise _fail(f"key 'layer_types' keeps full attention in layers {full} (counted from 1): only "
                    "every n-th layer can be full (full_attention_every)")
    return dict(attention_window=_int(cfg, "sliding_window"), full_attention_every=every)


def _window_fields(cfg: dict, num_layers: int) -> dict:
    """Sliding-window attention -> ``attention_window`` and ``full_attention_every``.

    transformers writes the per-layer pattern as ``layer_types`` (sliding_attention or
    full_attention); without it: Mistral and Mixtral window every layer when ``sliding_window``
    is set; Qwen windows layers from ``max_window_layers`` on when ``use_sliding_window`` is
    true; GPT-OSS alternates, windowed first (GptOssConfig)."""
    model_type = cfg["model_type"]
    if cfg.get("layer_types") is not None:
        return _window_from_layer_types(cfg, num_layers)
    if model_type == "gpt_oss":
        return dict(attention_window=_int(cfg, "sliding_window"), full_attention_every=2)
    if model_type in ("mistral", "mixtral"):
        return dict(attention_window=_int(cfg, "sliding_window", None))
    if model_type in ("qwen2", "qwen3") + _QWEN_MOE and _bool(cfg, "use_sliding_window", False):
        first = _int(cfg, "max_window_layers", num_layers, allow_zero=True)
        if first >= num_layers:
            return {}
        if first > 0:
            raise _fail(f"key 'max_window_layers' is {first}: full attention in the first layers and "
                        "windows after them is not representable (only every n-th layer full)")
        return dict(attention_window=_int(cfg, "sliding_window"))
    return {}


def _fields(cfg: dict) -> dict:
    fields = _shape_fields(cfg)
    if cfg["model_type"] in _GATED + _MIXTRAL_LIKE + _QWEN_MOE:
        fields.update(_window_fields(cfg, fields["num_layers"]))
    if cfg["model_type"] in ("qwen3", "qwen3_moe"):
        # transformers Qwen3Attention / Qwen3MoeAttention always build q_norm and k_norm (QK-Norm)
        fields.update(qk_norm=True)
    if cfg["model_type"] == "gpt_oss":
        # transformers GptOssExperts always carries gate_up_proj_bias and down_proj_bias, and
        # GptOssConfig clamps the GLU at swiglu_limit (default 7.0)
        fields.update(linear_bias=True, clamped_glu=cfg.get("swiglu_limit", GPT_OSS_SWIGLU_LIMIT) is not None)
    return fields


def _shape_fields(cfg: dict) -> dict:
    model_type = cfg["model_type"]
    if model_type in _GATED:
        return _dense_fields(cfg, gated=True)
    if model_type in ("nemotron", "gpt_neox"):
        fields = _dense_fields(cfg, gated=False)
        if model_type == "gpt_neox":
            fields.pop("num_query_groups")
            fields.pop("head_dim")
        return fields
    if model_type in _MIXTRAL_LIKE:
        return _mixtral_like(cfg)
    if model_type in _QWEN_MOE:
        return _qwen_moe(cfg)
    if model_type in _DEEPSEEK:
        return _deepseek(cfg)
    return _gpt2(cfg)


def model_from_hf_config(cfg: dict) -> ModelSpec:
    """Build a ``ModelSpec`` from a Hugging Face ``config.json`` already parsed to a dict.

    Raises ``InputError("model.config.json", ...)`` naming the key and the reason when a key is
    missing, has the wrong type, or describes a layout ``ModelSpec`` cannot represent.
    """
    if not isinstance(cfg, dict):
        raise _fail(f"expected a JSON object, got {type(cfg).__name__}")
    model_type = cfg.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        what = "missing key 'model_type'" if model_type is None else f"unsupported model_type {model_type!r}"
        raise _fail(f"{what}; supported: {', '.join(SUPPORTED_MODEL_TYPES)}")
    fields = {k: v for k, v in _fields(cfg).items() if v is not None}
    try:
        return ModelSpec.model_validate(fields)
    except ValidationError as exc:
        raise _fail(pydantic_message(exc).replace("Value error, ", "")) from None
