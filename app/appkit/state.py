"""The current job: widget values <-> a frozen ``Scenario``, the URL, and uploaded files.

Pure helpers (no Streamlit) turn a scenario into widget values and back, so they can be
tested on their own; ``init`` and ``apply_scenario`` write them into the session.
"""

from __future__ import annotations

import base64
import json
import math
import re
import zlib
from dataclasses import dataclass
from pathlib import Path


from perfmodel.spec.cost import CostModel
from perfmodel.spec.errors import InputError, dump_yaml, json_object_unique_keys, parse_data_text, validated
from perfmodel.spec.hardware import HARDWARE_DIR, HardwareSpec, list_hardware_ids, load_hardware, parse_hardware
from perfmodel.spec.headline import Headline, headline_of, headline_spec
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.presets import list_presets, load_model, parse_model
from perfmodel.spec.schedules import schedule_names
from perfmodel.spec.scenario import Scenario, load_scenario, parse_scenario, scenario_to_dict
from perfmodel.spec.software import NAMED_POLICIES, RECOMPUTE_MODULE_CHOICES, Overlap, SoftwareStack
from perfmodel.spec.units import GIGA, KIBI, MEBI

from . import run_inputs

EXAMPLE_SCENARIO = Path(__file__).resolve().parents[2] / "perfmodel" / "data" / "example_scenario.yaml"
MAX_UPLOAD_MIB = 1
"""Uploaded files (scenario, hardware YAML, config.json), edited hardware YAML and a link's
unpacked scenario larger than this many MiB are refused. The server's own limit,
``server.maxUploadSize`` in ``app/.streamlit/config.toml`` (Streamlit's unit is the MiB), is
the same number: it refuses a bigger upload while it streams in, before it is in memory."""
MAX_UPLOAD_BYTES = MAX_UPLOAD_MIB * MEBI
MAX_QUERY_CHARS = 64 * KIBI
"""A link's scenario (``?s=``) longer than this is refused before it is decoded. The example
scenario takes ~500 characters, one with inline hardware and model ~6,000; 64 Ki characters
unpack to at most ~50 MB (deflate's ratio is at most ~1,032:1), and unpacking stops at
``MAX_UPLOAD_BYTES`` anyway."""
MAX_DATA_DEPTH = 64
"""Nesting deeper than this in a link or an uploaded file is refused (a scenario with inline
hardware and model nests 6 deep; a Hugging Face config.json ~4)."""
MAX_DATA_VALUES = 100_000
"""A link or file holding more values than this, counting each YAML alias as often as it is
used, is refused (the largest catalogue hardware spec holds ~400)."""
MAX_WIDGET_INT = 2**53 - 1
"""The largest whole number a browser's number field holds exactly (JavaScript's
``Number.MAX_SAFE_INTEGER``); the model's integer arithmetic is 64-bit."""
QUERY_KEY = "s"
"""URL query parameter that carries the scenario (zlib + URL-safe base64 of its JSON)."""
MODEL_SOURCES = ("Preset", "Custom", "Uploaded")
HW_SOURCES = ("Catalogue", "Headline numbers", "Edit YAML", "Upload YAML")
HEADLINE_FIELDS = ("peak_bf16_tflop_per_s", "hbm_capacity_gib", "hbm_bandwidth_gb_per_s", "scale_up_domain_size",
                   "scale_up_gb_per_s", "nic_gbit_per_s", "usd_per_gpu_hour")
"""Hardware from headline numbers (``perfmodel.spec.headline``): widget key ``hl_<field>``."""
CUSTOM_INT_FIELDS = ("num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "head_dim",
                     "ffn_hidden_size", "vocab_size", "num_experts", "top_k", "expert_ffn_hidden_size",
                     "num_shared_experts", "num_dense_layers", "interleave_step", "mtp_layers",
                     "attention_window", "full_attention_every")
"""Custom-model number fields (widget key ``m_<field>``); 0 means 'default' or 'no MoE'."""
LAYOUT_FIELDS = ("tp", "pp", "vpp", "cp", "ep", "etp")
DEFAULT_SCHEDULE = "default"


def schedule_choices() -> tuple[str, ...]:
    """The schedule selectbox: ``default`` is a scenario that names none (1f1b, interleaved by
    vpp), then every schedule record (``perfmodel.spec.schedules``)."""
    return (DEFAULT_SCHEDULE,) + schedule_names()


# --------------------------------------------------------------------------- pure helpers
def encode_query(data: dict) -> str:
    raw = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def decode_query(text: str) -> Scenario:
    """The scenario of a link, or InputError("link", ...). Bounded before any work: the text's
    length, then the unpacked size (``inflate``), then nesting, value count and numbers
    (``check_data``); ``parse_scenario`` opens no file."""
    if len(text) > MAX_QUERY_CHARS:
        raise InputError("link", f"the scenario in the URL is {len(text):,} characters; the limit is "
                                 f"{MAX_QUERY_CHARS:,}")
    try:
        packed = base64.b64decode(text + "=" * (-len(text) % 4), altchars=b"-_", validate=True)
    except ValueError:
        raise InputError("link", "the scenario in the URL is damaged (not URL-safe base64)") from None
    try:
        raw = inflate(packed, MAX_UPLOAD_BYTES, "link")
    except zlib.error:
        raise InputError("link", "the scenario in the URL is damaged (not zlib data)") from None
    try:
        data = json.loads(raw, object_pairs_hook=json_object_unique_keys)   # a repeated key: refused, as in files
    except RecursionError:
        raise InputError("link", f"the scenario in the URL nests deeper than {MAX_DATA_DEPTH} levels") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise InputError("link", "the scenario in the URL is damaged (not JSON)") from None
    except ValueError as exc:   # e.g. a whole number of more than 4,300 digits
        raise InputError("link", f"the scenario in the URL cannot be read ({str(exc).split(';')[0][:120]})") from None
    check_data(data, "link")
    return parse_scenario(data)


def inflate(packed: bytes, limit_bytes: int, field: str) -> bytes:
    """zlib data unpacked, or InputError as soon as it passes ``limit_bytes``: a few kilobytes
    can unpack to megabytes, so the output is bounded, not measured afterwards."""
    d = zlib.decompressobj()
    raw = d.decompress(packed, limit_bytes + 1)
    if len(raw) > limit_bytes:
        raise InputError(field, f"the scenario in the URL unpacks to more than {limit_bytes / MEBI:g} MiB")
    if not d.eof or d.unused_data:
        raise zlib.error("the stream is cut short or has trailing bytes")
    return raw


def check_data(data, field: str) -> None:
    """Refuse parsed data the app cannot show or the model cannot size, with InputError naming
    ``field`` and the place: nesting deeper than ``MAX_DATA_DEPTH``, more than ``MAX_DATA_VALUES``
    values (a YAML alias counts each time it is used, so an alias bomb stops here), whole
    numbers beyond ``MAX_WIDGET_INT``, numbers that are not finite. At most ``MAX_DATA_VALUES``
    steps, whatever the input."""
    stack = [(data, ())]
    seen = 0
    while stack:
        node, where = stack.pop()
        seen += 1
        if seen > MAX_DATA_VALUES:
            raise InputError(field, f"holds more than {MAX_DATA_VALUES:,} values")
        if len(where) > MAX_DATA_DEPTH:
            raise InputError(field, f"nests deeper than {MAX_DATA_DEPTH} levels")
        if isinstance(node, dict):
            stack.extend((v, (*where, str(k)[:40])) for k, v in node.items())
        elif isinstance(node, (list, tuple)):
            stack.extend((v, (*where, i)) for i, v in enumerate(node))
        elif isinstance(node, bool):
            continue
        elif isinstance(node, int) and abs(node) > MAX_WIDGET_INT:
            raise InputError(field, f"{_place(where)}: a {len(str(abs(node)))}-digit whole number; the app's number "
                                    f"fields hold at most {MAX_WIDGET_INT:,} (2^53 - 1)")
        elif isinstance(node, float) and not math.isfinite(node):
            raise InputError(field, f"{_place(where)}: {node} is not a finite number")


def _place(where: tuple) -> str:
    return ".".join(str(w) for w in where) or "the value"


def parse_text(text: str, field: str, json_text: bool = False):
    """YAML (or JSON) text from a user, parsed and bounded (size, then ``check_data``), or
    InputError naming ``field``."""
    size = len(text.encode())
    if size > MAX_UPLOAD_BYTES:
        raise InputError(field, f"the text is {size / KIBI:,.0f} KiB; the limit is {MAX_UPLOAD_MIB} MiB")
    try:
        data = parse_data_text(text, field, json_text=json_text)
    except InputError:
        raise
    except RecursionError:
        raise InputError(field, f"the text nests deeper than {MAX_DATA_DEPTH} levels") from None
    except ValueError as exc:   # e.g. a whole number of more than 4,300 digits
        raise InputError(field, f"the text cannot be read ({str(exc).splitlines()[0][:120]})") from None
    check_data(data, field)
    return data


def model_fields(m: ModelSpec) -> dict:
    """Custom-model widget values for a model spec."""
    moe = m.moe
    return {
        "m_name": m.name, "m_num_layers": m.num_layers, "m_hidden_size": m.hidden_size,
        "m_num_attention_heads": m.num_attention_heads, "m_num_query_groups": m.kv_heads,
        "m_head_dim": m.head_dim or 0, "m_ffn_hidden_size": m.ffn_hidden_size, "m_vocab_size": m.vocab_size,
        "m_gated_mlp": m.gated_mlp, "m_tied_embeddings": m.tied_embeddings,
        "m_num_experts": moe.num_experts if moe else 0, "m_top_k": moe.top_k if moe else 1,
        "m_expert_ffn_hidden_size": moe.expert_ffn_hidden_size if moe else m.ffn_hidden_size,
        "m_num_shared_experts": moe.num_shared_experts if moe else 0,
        "m_num_dense_layers": moe.num_dense_layers if moe else 0,
        "m_interleave_step": moe.interleave_step if moe else 1, "m_mtp_layers": m.mtp_layers,
        "m_attention_window": m.attention_window or 0, "m_full_attention_every": m.full_attention_every or 0,
    }


def model_from_fields(v: dict) -> ModelSpec:
    """The custom-model widgets as a ModelSpec, or InputError."""
    data = {
        "name": v.get("m_name") or "custom", "num_layers": v["m_num_layers"], "hidden_size": v["m_hidden_size"],
        "num_attention_heads": v["m_num_attention_heads"], "num_query_groups": v["m_num_query_groups"] or None,
        "head_dim": v["m_head_dim"] or None, "ffn_hidden_size": v["m_ffn_hidden_size"],
        "vocab_size": v["m_vocab_size"], "gated_mlp": bool(v["m_gated_mlp"]),
        "tied_embeddings": bool(v["m_tied_embeddings"]), "mtp_layers": v["m_mtp_layers"],
        "attention_window": v.get("m_attention_window") or None,
        "full_attention_every": v.get("m_full_attention_every") or None,
    }
    if v["m_num_experts"]:
        data["moe"] = {"num_experts": v["m_num_experts"], "top_k": v["m_top_k"],
                       "expert_ffn_hidden_size": v["m_expert_ffn_hidden_size"],
                       "num_shared_experts": v["m_num_shared_experts"], "num_dense_layers": v["m_num_dense_layers"],
                       "interleave_step": v.get("m_interleave_step") or 1}
    return parse_model(data)


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


OVERLAP_KINDS = ("tp", "cp", "ep", "pp", "dp", "fsdp")


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
    """The widget values of the software options (the stack selector and every option)."""
    return {
        "stack": sw.stack or "",   # "": no preset, every option at its default (Megatron-Core's)
        "attention_backend": sw.attention_backend, "attention_dropout": sw.attention_dropout,
        **overlap_widget_values(sw.overlap),
        "fsdp_collectives_per_layer": sw.fsdp_collectives_per_layer, "fsdp_list_api": sw.fsdp_list_api,
        "moe_dispatcher": sw.moe_dispatcher, "grad_reduce_in_fp32": sw.grad_reduce_in_fp32,
        "moe_router_fusion": sw.moe_router_fusion, "moe_permute_fusion": sw.moe_permute_fusion,
        "moe_expert_capacity_factor": sw.moe_expert_capacity_factor or 0.0,
        "moe_pad_expert_input_to_capacity": sw.moe_pad_expert_input_to_capacity,
        "moe_load_imbalance": sw.moe_load_imbalance,
        "elementwise_kernels": sw.elementwise_kernels, "optimizer_kernels": sw.optimizer_kernels,
        "fp8_casts": sw.fp8_casts, "cuda_graphs": sw.cuda_graphs,
        "selective_recompute": ([sw.selective_recompute] if isinstance(sw.selective_recompute, str)
                                else list(sw.selective_recompute)),
        "recompute_num_layers": sw.recompute_num_layers or 0,
        "activation_offload_layers": sw.activation_offload_layers,
        "pipeline_layout": sw.pipeline_layout or "",
        "cross_entropy": sw.cross_entropy,
    }


def stack_widget_values(name: str, current: dict) -> dict:
    """The software widgets for a newly chosen stack: the preset's options, with the job's own
    (pipeline layout, recompute layers, offload, load imbalance) kept from ``current``."""
    v = software_widget_values(SoftwareStack(stack=name or None))
    for key in ("recompute_num_layers", "activation_offload_layers", "pipeline_layout", "moe_load_imbalance"):
        if key in current:
            v[key] = current[key]
    return v


def widget_values(sc: Scenario) -> dict:
    """Every widget value that reproduces ``sc`` (plus the non-widget ``_uploaded_model``)."""
    p, sw = sc.parallelism, sc.software
    v: dict = {
        "num_gpus": sc.num_gpus, "seq_length": sc.seq_length, "global_batch_size": sc.global_batch_size,
        "micro_batch_size": sc.micro_batch_size, "recompute": sc.recompute, "precision": sc.precision,
        **software_widget_values(sw),
        "sequence_parallel": p.sp, "zero_stage": p.zero_stage, "scenario_name": sc.name,
        "pipeline_schedule": p.pipeline_schedule or DEFAULT_SCHEDULE,
        "training_tokens_b": (sc.training_tokens or 0.0) / GIGA,
        **{k: getattr(p, k) for k in LAYOUT_FIELDS},
    }
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
    v.update(run_inputs.widget_values(sc))
    if isinstance(sc.hardware, str):
        v.update(hw_source="Catalogue", hardware_id=sc.hardware, hw_yaml_text=hardware_text(sc.hardware),
                 **headline_fields(sc.hardware))
    else:   # an inline spec (edited, uploaded or from headline numbers): its YAML goes into the editor, never to a file
        base = sc.hardware.reference_id if sc.hardware.reference_id in list_hardware_ids() else "h100-sxm"
        v.update(hw_source="Edit YAML", hw_yaml_text=hardware_spec_yaml(sc.hardware), **headline_fields(base))
    return v


def check_upload_size(name: str, size: int) -> None:
    if size > MAX_UPLOAD_BYTES:
        raise InputError(name, f"the file is {size / KIBI:,.0f} KiB; the limit is {MAX_UPLOAD_MIB} MiB")


def upload_text(raw: bytes, label: str) -> str:
    """An upload's bytes as text: at most MAX_UPLOAD_BYTES of UTF-8, else InputError naming ``label``."""
    check_upload_size(label, len(raw))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(label, "the file is not UTF-8 text") from None


def hardware_from_text(text: str, origin: str = "hardware YAML") -> HardwareSpec:
    """Validate hardware YAML (``parse_hardware``) into an inline spec. It lives in the session
    and in the scenario (link, download); nothing is written to disk, whatever its ``id``."""
    data = parse_text(text, origin)
    if not isinstance(data, dict):
        raise InputError(origin, "must be a YAML mapping")
    return parse_hardware(data, origin=origin)


SELECTIVE_RECOMPUTE_OPTIONS = NAMED_POLICIES + RECOMPUTE_MODULE_CHOICES
"""The sidebar's selective-recompute choices: torchtitan's or MaxText's policy, or Megatron-Core modules."""


def selective_recompute_value(chosen) -> str | tuple[str, ...]:
    """The multiselect's list as the scenario field: a named policy alone, else the modules."""
    chosen = list(chosen)
    named = [c for c in chosen if c in NAMED_POLICIES]
    if named:
        if len(chosen) > 1:
            raise InputError("software.selective_recompute", f"{named[0]} is a whole policy on its own; it does not "
                                                    "combine with other choices")
        return named[0]
    return "core_attn" if chosen == ["core_attn"] else tuple(chosen)


def scenario_from_values(v: dict) -> Scenario:
    """Widget values -> Scenario, or InputError naming the field."""
    src = v["model_source"]
    if src == "Preset":
        model: str | dict = v["model_preset"]
    elif src == "Custom":
        model = model_from_fields(v).model_dump(mode="json", exclude_none=True)
    else:
        if not v.get("_uploaded_model"):
            raise InputError("model", "upload a Hugging Face config.json (or choose Preset or Custom)")
        model = v["_uploaded_model"]
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
    tokens = v.get("training_tokens_b") or 0.0
    data = {
        "name": v.get("scenario_name") or "scenario", "hardware": hardware, "num_gpus": int(v["num_gpus"]),
        "model": model, "seq_length": int(v["seq_length"]), "global_batch_size": int(v["global_batch_size"]),
        "micro_batch_size": int(v["micro_batch_size"]),
        "parallelism": {**{k: int(v[k]) for k in LAYOUT_FIELDS}, "sequence_parallel": bool(v["sequence_parallel"]),
                        "zero_stage": int(v["zero_stage"]),
                        "pipeline_schedule": None if v.get("pipeline_schedule", DEFAULT_SCHEDULE) == DEFAULT_SCHEDULE
                        else v["pipeline_schedule"]},
        "recompute": v["recompute"], "precision": v["precision"],
        "software": {
            "stack": v.get("stack") or None,
            "attention_backend": v.get("attention_backend", "flash"),
            "attention_dropout": bool(v.get("attention_dropout", False)),
            "overlap": overlap_from_values(v),
            "fsdp_collectives_per_layer": int(v.get("fsdp_collectives_per_layer", 1)),
            "fsdp_list_api": bool(v.get("fsdp_list_api", False)),
            "moe_dispatcher": v.get("moe_dispatcher", "alltoall"),
            "grad_reduce_in_fp32": bool(v.get("grad_reduce_in_fp32", True)),
            "moe_router_fusion": bool(v.get("moe_router_fusion", False)),
            "moe_permute_fusion": bool(v.get("moe_permute_fusion", False)),
            "moe_expert_capacity_factor": float(v.get("moe_expert_capacity_factor", 0.0)) or None,
            "moe_pad_expert_input_to_capacity": bool(v.get("moe_pad_expert_input_to_capacity", False)),
            "moe_load_imbalance": float(v.get("moe_load_imbalance", 1.0)),
            "elementwise_kernels": v.get("elementwise_kernels", "fused"),
            "optimizer_kernels": v.get("optimizer_kernels", "fused"),
            "fp8_casts": v.get("fp8_casts", "separate"),
            "cuda_graphs": bool(v.get("cuda_graphs", False)),
            "selective_recompute": selective_recompute_value(v.get("selective_recompute", ["core_attn"])),
            "recompute_num_layers": int(v.get("recompute_num_layers", 0)) or None,
            "activation_offload_layers": int(v.get("activation_offload_layers", 0)),
            "pipeline_layout": str(v.get("pipeline_layout", "")).strip() or None,
            "cross_entropy": v.get("cross_entropy", "fused"),
        },
    }
    if tokens > 0:
        data["training_tokens"] = float(tokens) * GIGA
    data.update(run_inputs.sections_from_values(v))
    return parse_scenario(data)


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
