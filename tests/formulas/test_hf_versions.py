"""config.json as Transformers 4 and 5 save it: every supported model_type loads from both, to the
same model (issue 50: a Transformers 5 ``qwen3_moe`` config, which names ``num_local_experts``, was
refused for a missing ``num_experts``). The fixtures are each version's ``save_pretrained`` output
(scripts/save_hf_fixtures.py: transformers 4.57.1 and 5.17.0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perfmodel.spec.errors import InputError
from perfmodel.spec.hf_config import SUPPORTED_MODEL_TYPES, model_from_hf_config

HF = Path(__file__).resolve().parents[1] / "data" / "hf"
VERSIONS = ("transformers-4", "transformers-5")
DEFAULTS_CHANGED = {
    # DeepseekV2Config's default vocab_size is 32000 in 4.57.1 and 102400 in 5.17.0 (the files say so)
    "deepseek_v2": {"vocab_size"},
    # 4.57.1's DeepseekV3Config has no num_nextn_predict_layers (not saved: 0); 5.17.0 saves 1
    "deepseek_v3": {"mtp_layers"},
}
"""Where the two versions' defaults differ, not their spellings: the spec follows each file."""


def _cfg(version: str, model_type: str) -> dict:
    return json.loads((HF / version / f"{model_type}.json").read_text())


def test_the_saved_configs_cover_every_supported_model_type_and_say_their_version():
    for version in VERSIONS:
        assert sorted(p.stem for p in (HF / version).glob("*.json")) == sorted(SUPPORTED_MODEL_TYPES)
        major = version.split("-")[1]
        assert all(_cfg(version, t)["transformers_version"].split(".")[0] == major for t in SUPPORTED_MODEL_TYPES)


def test_the_script_lists_the_supported_model_types():
    text = (HF.parents[2] / "scripts" / "save_hf_fixtures.py").read_text()
    assert all(f'"{t}"' in text for t in SUPPORTED_MODEL_TYPES)


@pytest.mark.parametrize("model_type", SUPPORTED_MODEL_TYPES)
def test_both_versions_load_to_the_same_model(model_type):
    old, new = (model_from_hf_config(_cfg(v, model_type)).model_dump() for v in VERSIONS)
    differ = {k for k in old if old[k] != new[k]}
    assert differ == DEFAULTS_CHANGED.get(model_type, set())


def test_transformers_5_qwen3_moe_names_num_local_experts_and_loads():
    cfg = _cfg("transformers-5", "qwen3_moe")
    assert "num_local_experts" in cfg and "num_experts" not in cfg
    assert model_from_hf_config(cfg).moe.num_experts == cfg["num_local_experts"] == 128


def test_deepseek_v3_aliases_of_transformers_5_load():
    cfg = _cfg("transformers-5", "deepseek_v3")
    aliased = {k: v for k, v in cfg.items() if k not in ("n_routed_experts", "num_nextn_predict_layers")}
    aliased.update(num_local_experts=cfg["n_routed_experts"], num_mtp_layers=3)
    spec = model_from_hf_config(aliased)
    assert spec.moe.num_experts == cfg["n_routed_experts"] and spec.mtp_layers == 3


def test_two_spellings_that_disagree_are_refused_naming_both():
    cfg = {**_cfg("transformers-5", "qwen3_moe"), "num_experts": 64}
    with pytest.raises(InputError, match="'num_experts' .*'num_local_experts'|'num_local_experts' .*'num_experts'"):
        model_from_hf_config(cfg)
    same = {**_cfg("transformers-5", "qwen3_moe"), "num_experts": 128}
    assert model_from_hf_config(same).moe.num_experts == 128
