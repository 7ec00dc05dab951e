"""The current job: widget values <-> a frozen ``Scenario``, the URL, and uploaded files.

Pure helpers (no Streamlit) turn a scenario into widget values and back, so they can be
tested on their own; ``init`` and ``apply_scenario`` write them into the session. Text from
users (links, uploads) is bounded in ``appkit.untrusted``, whose helpers are re-exported here.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path


from perfmodel.spec.cost import CostModel
from perfmodel.spec.errors import InputError, dump_yaml, validated
from perfmodel.spec.hardware import HARDWARE_DIR, HardwareSpec, list_hardware_ids, load_hardware, parse_hardware
from perfmodel.spec.headline import Headline, headline_of, headline_spec
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.presets import list_presets, load_model, parse_model
from perfmodel.spec.scenario import Scenario, load_scenario, parse_scenario, scenario_to_dict
from perfmodel.spec.software import Overlap, SoftwareStack

from . import job_form, run_inputs, software_form
from .job_labels import DEFAULT_SCHEDULE  # noqa: F401  (tests read it as state.DEFAULT_SCHEDULE)
from .untrusted import (  # noqa: F401  (the pages and tests read them as state.X)
    MAX_QUERY_CHARS, MAX_UPLOAD_BYTES, MAX_UPLOAD_MIB, QUERY_KEY, check_data, check_upload_size, decode_query,
    encode_query, parse_text, upload_text)

EXAMPLE_SCENARIO = Path(__file__).resolve().parents[2] / "perfmodel" / "data" / "example_scenario.yaml"
MODEL_SOURCES = ("Preset", "Custom", "Uploaded")
HW_SOURCES = ("Catalogue", "Headline numbers", "Edit YAML", "Upload YAML")
HEADLINE_FIELDS = ("peak_bf16_tflop_per_s", "hbm_capacity_gib", "hbm_bandwidth_gb_per_s", "scale_up_domain_size",
                   "scale_up_gb_per_s", "nic_gbit_per_s", "usd_per_gpu_hour")
"""Hardware from headline numbers (``perfmodel.spec.headline``): widget key ``hl_<field>``."""


# --------------------------------------------------------------------------- pure helpers
def model_fields(m: ModelSpec) -> dict:
    """Custom-model widget values for a model spec (generated from its schema, ``job_form``)."""
    return job_form.model_widget_values(m)


def model_from_fields(v: dict) -> ModelSpec:
    """The custom-model widgets as a ModelSpec, or InputError."""
    return parse_model(job_form.model_from_values(v))


def hardware_text(hw_id: str) -> str:
    """The catalogue file of a known id (ids come from ``list_hardware_ids``, never from a user)."""
    return (HARDWARE_DIR / f"{hw_id}.yaml").read_text() if hw_id in list_hardware_ids() else ""


def headline_fields(hw_id: str) -> dict:
    """The headline widgets' values for a catalogue spec (the form starts from it)."""
    h = headline_of(load_hardware(hw_id))
    return {"hl_name": f"custom {hw_id}",
            **{f"hl_{k}": (int(h[k]) if k == "scale_up_domain_size" else float(h[k])) for k in HEADLINE_FIELDS}}


def hardware_from_headline(v: dict) -> HardwareSpec:
    """The headline widgets as an inline spec over the chosen catalogue spec, or InputError."""
    data = {"base": v["hardware_id"], "name": v.get("hl_name") or "custom GPU",
            **{k: v[f"hl_{k}"] for k in HEADLINE_FIELDS}}
    return headline_spec(validated(Headline, data, "headline hardware"))


def hardware_spec_yaml(hw: HardwareSpec) -> str:
    return dump_yaml(hw.model_dump(mode="json", exclude_none=True))


OVERLAP_KINDS: tuple[str, ...] = tuple(Overlap.model_fields)


def overlap_widget_values(ov: Overlap) -> dict:
    """One number widget per kind (``ov_<kind>``); TP's ideal chunked overlap is a checkbox."""
    out = {f"ov_{k}": float(getattr(ov, k) or 0.0) for k in OVERLAP_KINDS}
    out["ov_tp_ideal"] = ov.tp is None
    return out


def overlap_from_values(v: dict) -> dict:
    defaults = Overlap()
    out = {k: float(v.get(f"ov_{k}", getattr(defaults, k) or 0.0)) for k in OVERLAP_KINDS}
    if v.get("ov_tp_ideal"):
        out["tp"] = None
    return out


def software_widget_values(sw: SoftwareStack) -> dict:
    """The widget values of the software options: the stack selector, the overlap fractions and
    every option the schema generates (``appkit.software_form``)."""
    return {"stack": sw.stack or "",   # "": no preset, every option at its default (Megatron-Core's)
            **overlap_widget_values(sw.overlap), **software_form.widget_values(sw)}


def stack_widget_values(name: str, current: dict) -> dict:
    """The software widgets for a newly chosen stack: the preset's options, with the job's own
    (pipeline layout, recompute layers, offload, load imbalance) kept from ``current``."""
    v = software_widget_values(SoftwareStack(stack=name or None))
    for key in ("recompute_num_layers", "activation_offload_layers", "pipeline_layout", "moe_load_imbalance"):
        if key in current:
            v[key] = current[key]
    return v


def widget_values(sc: Scenario, model: type[Scenario] = Scenario) -> dict:
    """Every widget value that reproduces ``sc`` (plus the non-widget ``_uploaded_model``);
    ``model`` is the scenario's schema (a test's subclass)."""
    v: dict = {**job_form.widget_values(sc, model), **software_widget_values(sc.software)}
    if isinstance(sc.model, str):
        spec = load_model(sc.model)
        preset = sc.model if sc.model in list_presets() else None
        v.update(model_source="Preset" if preset else "Uploaded", model_preset=preset or "llama3-70b",
                 **model_fields(spec))
        if not preset:
            v["_uploaded_model"] = spec.model_dump(mode="json", exclude_none=True)
    else:
        v.update(model_fields(sc.model))
        if sc.model.mla is None:
            v["model_source"] = "Custom"
        else:   # custom fields cannot express MLA: keep the spec as an uploaded model
            v.update(model_source="Uploaded", _uploaded_model=sc.model.model_dump(mode="json", exclude_none=True))
    v.update(run_inputs.widget_values(sc, model))
    if isinstance(sc.hardware, str):
        v.update(hw_source="Catalogue", hardware_id=sc.hardware, hw_yaml_text=hardware_text(sc.hardware),
                 **headline_fields(sc.hardware))
    else:   # an inline spec (edited, uploaded or from headline numbers): its YAML goes into the editor, never to a file
        base = sc.hardware.reference_id if sc.hardware.reference_id in list_hardware_ids() else "h100-sxm"
        v.update(hw_source="Edit YAML", hw_yaml_text=hardware_spec_yaml(sc.hardware), **headline_fields(base))
    return v


def hardware_from_text(text: str, origin: str = "hardware YAML") -> HardwareSpec:
    """Validate hardware YAML (``parse_hardware``) into an inline spec. It lives in the session
    and in the scenario (link, download); nothing is written to disk, whatever its ``id``."""
    data = parse_text(text, origin)
    if not isinstance(data, dict):
        raise InputError(origin, "must be a YAML mapping")
    return parse_hardware(data, origin=origin)


def selective_recompute_value(chosen) -> str | tuple[str, ...]:
    """The multiselect's list as the scenario field: a named policy alone, else the modules."""
    return next(o for o in software_form.options() if o.key == "selective_recompute").from_widget(chosen)


def scenario_from_values(v: dict, model: type[Scenario] = Scenario) -> Scenario:
    """Widget values -> Scenario (or ``model``, a test's subclass), or InputError naming the field."""
    src = v["model_source"]
    if src == "Preset":
        model_spec: str | dict = v["model_preset"]
    elif src == "Custom":
        model_spec = model_from_fields(v).model_dump(mode="json", exclude_none=True)
    else:
        if not v.get("_uploaded_model"):
            raise InputError("model", "upload a Hugging Face config.json (or choose Preset or Custom)")
        model_spec = v["_uploaded_model"]
    hw_src = v["hw_source"]
    if hw_src == "Catalogue":
        hardware = v["hardware_id"]
    elif hw_src == "Edit YAML":
        hardware = hardware_from_text(v.get("hw_yaml_text") or "", "hardware YAML")
    elif hw_src == "Headline numbers":
        hardware = hardware_from_headline(v)
    else:
        if not v.get("_hw_uploaded_text"):
            raise InputError("hardware", "upload a hardware YAML file (or choose Catalogue)")
        hardware = hardware_from_text(v["_hw_uploaded_text"], "uploaded hardware YAML")
    own = job_form.scenario_values(v, model)
    data = {
        **own, "hardware": hardware, "model": model_spec,
        "software": {
            "stack": v.get("stack") or None,
            "overlap": overlap_from_values(v),
            **software_form.software_values(v),
        },
    }
    data.update(run_inputs.sections_from_values(v, model))
    return validated(model, data, "scenario")


@dataclass(frozen=True)
class JobInputs:
    """What every page works from: the scenario and how to price and calibrate it."""

    scenario: Scenario | None
    error: str | None
    cost_model: CostModel
    use_profile: bool

    def key(self, **extra) -> str:
        """A frozen, hashable cache key (JSON) for ``cached`` functions: the scenario without its
        ``purpose`` and ``studies`` (the pages' options, which the views take as arguments), so a
        page option changed elsewhere leaves every other page's results cached."""
        d = {k: v for k, v in scenario_to_dict(self.scenario).items() if k not in ("purpose", "studies")}
        return json.dumps({"scenario": d,
                           "cost": self.cost_model.model_dump(mode="json"),
                           "use_profile": self.use_profile, **extra}, sort_keys=True)


def default_scenario() -> Scenario:
    return load_scenario(EXAMPLE_SCENARIO)


def scenario_yaml(sc: Scenario) -> str:
    return dump_yaml(scenario_to_dict(sc))


def download_name(name: str) -> str:
    """The scenario download's file name: its name with each run of anything but letters, digits,
    '-' and '_' (a path's '/' and '..' included) made one '_', at most 64 characters, never empty."""
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_")[:64] or "scenario"
    return f"{stem}.yaml"
