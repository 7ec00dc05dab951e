"""Write tests/data/hf/transformers-<major>/<model_type>.json: the config of every model_type
``perfmodel.spec.hf_config`` supports, as this Transformers version's ``save_pretrained`` writes
it. Run once per major version, each in a venv of its own (configs need no torch):

    python -m venv /tmp/hf4 && /tmp/hf4/bin/pip install 'transformers==4.57.1'
    /tmp/hf4/bin/python scripts/save_hf_fixtures.py
    python -m venv /tmp/hf5 && /tmp/hf5/bin/pip install 'transformers==5.17.0'
    /tmp/hf5/bin/python scripts/save_hf_fixtures.py

Each config is the class's defaults, with the few overrides below where a default leaves the model
undefined; the overrides use one spelling, and the version's own ``attribute_map`` decides which
key it saves (Transformers 5 saves ``qwen3_moe``'s expert count as ``num_local_experts``)."""

import tempfile
from pathlib import Path

import transformers
from transformers import AutoConfig

ROOT = Path(__file__).resolve().parents[1]
SUPPORTED_MODEL_TYPES = ("deepseek_v2", "deepseek_v3", "gpt2", "gpt_neox", "gpt_oss", "llama", "mistral", "mixtral",
                         "nemotron", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe")
"""perfmodel.spec.hf_config.SUPPORTED_MODEL_TYPES (tests/formulas/test_hf_versions.py checks they agree);
written out so that this script needs only transformers."""

OVERRIDES = {
    # DeepseekV2Config defaults num_experts_per_tok to None (no routing); 6 is DeepSeek-V2(-Lite)'s config.json
    "deepseek_v2": {"num_experts_per_tok": 6},
    # one spelling for the expert count, which each version maps to the key it saves
    "qwen3_moe": {"num_experts": 128},
}


def main() -> None:
    out = ROOT / "tests" / "data" / "hf" / f"transformers-{transformers.__version__.split('.')[0]}"
    out.mkdir(parents=True, exist_ok=True)
    for model_type in SUPPORTED_MODEL_TYPES:
        cfg = AutoConfig.for_model(model_type, **OVERRIDES.get(model_type, {}))
        with tempfile.TemporaryDirectory() as d:
            cfg.save_pretrained(d)
            (out / f"{model_type}.json").write_text((Path(d) / "config.json").read_text())
        print(f"{out.name}/{model_type}.json")


if __name__ == "__main__":
    main()
