"""Named software stacks: a framework's documented defaults as a preset of software options.

``perfmodel/data/stacks.yaml`` holds one preset per framework (and release, where its defaults
differ): every option it sets, each with the document, config file or source file (by version)
it comes from. A scenario names one (``software: {stack: torchtitan-compile}``) and may
override any option; ``perfmodel.spec.software.SoftwareStack`` resolves the name when the
scenario is parsed, so a stack always holds concrete options. Options a preset leaves out keep
the defaults of ``SoftwareStack`` (Megatron-Core's); the per-job refinements (recompute layer
count, activation offload, pipeline layout) are the job's, never a preset's.

This module reads the file only; whether a preset's options are valid is ``SoftwareStack``'s
to say (``tests/formulas/test_stacks.py`` loads every preset through it).
"""

from __future__ import annotations

import functools

from perfmodel.spec.errors import safe_load_yaml
from perfmodel.spec.paths import DATA_DIR

STACKS_FILE = DATA_DIR / "stacks.yaml"
STACKS_FORMAT = "perfmodel-stacks/1"
PER_JOB_OPTIONS = ("recompute_num_layers", "activation_offload_layers", "pipeline_layout", "moe_load_imbalance")
"""Options that describe one job (its layout, its routing) rather than a framework: no preset
sets them."""


@functools.lru_cache(maxsize=1)
def _stacks() -> dict:
    data = safe_load_yaml(STACKS_FILE.read_text())
    if data.get("format") != STACKS_FORMAT:
        raise ValueError(f"{STACKS_FILE.name}: format must be {STACKS_FORMAT}")
    return data["stacks"]


def list_stacks() -> tuple[str, ...]:
    """Preset names, in the file's order (the default stack first)."""
    return tuple(_stacks())


def stack_info(name: str) -> dict:
    """A preset's label, framework, release and summary (no options)."""
    s = _stacks()[name]
    return {k: s.get(k, "") for k in ("label", "framework", "release", "summary")}


def stack_options(name: str) -> dict:
    """The options a preset sets, as a ``software:`` mapping (``overlap`` a mapping of kinds)."""
    out: dict = {}
    for key, entry in _stacks()[name]["options"].items():
        if key == "overlap":
            out[key] = {kind: e["value"] for kind, e in entry.items()}
        else:
            out[key] = entry["value"]
    return out


def stack_sources(name: str) -> dict[str, str]:
    """Where each option of a preset comes from (``overlap.<kind>`` for the overlap kinds)."""
    out: dict[str, str] = {}
    for key, entry in _stacks()[name]["options"].items():
        if key == "overlap":
            out.update({f"overlap.{kind}": e["source"] for kind, e in entry.items()})
        else:
            out[key] = entry["source"]
    return out


def unknown_stack_reason(name) -> str:
    shown = name if len(str(name)) <= 64 else f"{str(name)[:61]}..."
    return f"unknown stack {shown!r}; known stacks: {', '.join(list_stacks())}"
