"""Model presets (``perfmodel/data/models.yaml``) and Hugging Face ``config.json`` import."""

from __future__ import annotations

import functools
from pathlib import Path

from pydantic import ValidationError

from perfmodel.spec.errors import InputError, pydantic_message, read_data_file, safe_load_yaml
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.paths import DATA_DIR

PRESETS_FILE = DATA_DIR / "models.yaml"


@functools.lru_cache(maxsize=1)
def _presets() -> dict:
    return safe_load_yaml(PRESETS_FILE.read_text())["models"]


def list_presets() -> list[str]:
    return sorted(_presets())


def preset_source(preset_id: str) -> str:
    return _presets()[preset_id].get("source", "")


@functools.lru_cache(maxsize=128)
def load_model(ref: str) -> ModelSpec:
    """A preset id (never a path: see ``load_model_file``)."""
    presets = _presets()
    if isinstance(ref, str) and ref in presets:
        data = {k: v for k, v in presets[ref].items() if k != "source"}
        return ModelSpec.model_validate(data)
    shown = ref if len(str(ref)) <= 64 else f"{str(ref)[:61]}..."
    raise InputError("model", f"unknown model preset {shown!r}; known presets: {', '.join(list_presets())}")


def load_model_file(path: str | Path) -> ModelSpec:
    """A Hugging Face config.json the person running perfmodel names (never a link or upload)."""
    from perfmodel.spec.hf_config import model_from_hf_config

    return model_from_hf_config(read_data_file(Path(path), "model.config.json"))


def parse_model(data: dict) -> ModelSpec:
    try:
        return ModelSpec.model_validate(data)
    except ValidationError as exc:
        raise InputError("model", pydantic_message(exc)) from None
