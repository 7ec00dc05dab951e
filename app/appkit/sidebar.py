"""The job editor in the sidebar, shown on every page, so all pages share one job.

Widgets take their values from Session State only (never ``value=``), so a loaded scenario
(URL, upload) is applied by writing Session State before the widgets are drawn.
"""

from __future__ import annotations

import json
import traceback
from collections.abc import Callable

import streamlit as st

from perfmodel.spec.cost import CostModel
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import list_hardware_ids
from perfmodel.spec.hf_config import model_from_hf_config
from perfmodel.spec.presets import list_presets, load_model
from perfmodel.spec.scenario import parse_scenario
from perfmodel.spec.stacks import list_stacks, stack_info

from . import job_form, run_inputs, software_form, state
from .form_widgets import draw
from .job_labels import BATCH, CLUSTER, FILE, MODEL, MOE
from .page import plain
from .software_labels import OVERLAP_HELP
from .widget_store import GROUP_KEY, GROUPS
from .widget_store import apply as _apply
from .widget_store import keep as _keep
from .widget_store import restore as _restore

_NON_WIDGET = ("_uploaded_model", "_hw_uploaded_text", "_fabric_other", "_cost_preemption")
STACK_CHOICES = ("", *list_stacks())
"""The stack selector's choices: "" is no preset, every option at its default (Megatron-Core's)."""


def stack_label(name: str) -> str:
    return "none (Megatron-Core defaults)" if not name else f"{name}: {stack_info(name)['label']}"

NAME_MAX_CHARS = 128
"""Scenario and custom-model names typed in the sidebar (the longest catalogue name has 90)."""


def load_scenario(sc) -> None:
    """Put a scenario into the sidebar's widgets (call from a callback, before they are drawn)."""
    _apply(state.widget_values(sc))


def load_scenario_data(data: dict) -> None:
    """``load_scenario`` of a scenario mapping (a search result); an invalid one leaves the
    sidebar as it is and says why above it."""
    try:
        load_scenario(parse_scenario(data))
    except InputError as exc:
        st.session_state["_notice"] = f"The layout was not loaded: {exc}"


def init() -> None:
    """First run of a session: the URL's scenario, else the built-in example."""
    if st.session_state.get("_initialised"):
        return
    st.session_state["_initialised"] = True
    _apply({"cost_basis": "listed", "usd_per_gpu_hour": 0.0, "use_profile": True})
    _apply(state.widget_values(state.default_scenario()))
    text = st.query_params.get(state.QUERY_KEY)
    if text:
        try:
            _apply(state.widget_values(state.decode_query(text)))
        except InputError as exc:
            st.session_state["_notice"] = f"The scenario in the link was not loaded (the example is shown): {exc}"


# ------------------------------------------------------------------------------ callbacks
def _on_model_source() -> None:
    if st.session_state["model_source"] == "Custom":
        _apply(state.model_fields(load_model(st.session_state["model_preset"])))


def _on_stack() -> None:
    """A newly chosen stack sets every software option to its preset (the job's own kept)."""
    _apply(state.stack_widget_values(st.session_state["stack"], dict(st.session_state)))


def _on_hw_source() -> None:
    if st.session_state["hw_source"] == "Edit YAML":
        st.session_state["hw_yaml_text"] = state.hardware_text(st.session_state["hardware_id"])
    elif st.session_state["hw_source"] == "Headline numbers":
        _apply(state.headline_fields(st.session_state["hardware_id"]))


_HEADLINE_LABELS = (("peak_bf16_tflop_per_s", "Peak BF16, dense (TFLOP/s)", 50.0),
                    ("hbm_capacity_gib", "HBM (GiB)", 8.0), ("hbm_bandwidth_gb_per_s", "HBM bandwidth (GB/s)", 100.0),
                    ("scale_up_domain_size", "Scale-up domain (GPUs)", 8),
                    ("scale_up_gb_per_s", "Scale-up per GPU, one way (GB/s)", 50.0),
                    ("nic_gbit_per_s", "NICs per GPU, one way (Gb/s)", 100.0),
                    ("usd_per_gpu_hour", "Price (USD per GPU-hour)", 0.25))


def _read_upload(key: str, label: str) -> str | None:
    f = st.session_state.get(key)
    if f is None:
        return None
    state.check_upload_size(label, f.size)
    try:
        return f.getvalue().decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(label, "the file is not UTF-8 text") from None


def _upload_handler(upload_key: str, label: str, error_key: str, use: Callable[[str], None]) -> Callable[[], None]:
    """on_change callback: read the upload, hand its text to ``use``, keep any one-line error.
    Callbacks run before the script, outside its last line of defence, so this is their own."""
    def handler() -> None:
        st.session_state.pop(error_key, None)
        try:
            text = _read_upload(upload_key, label)
            if text is not None:
                use(text)
        except InputError as exc:
            st.session_state[error_key] = str(exc)
        except Exception as exc:  # noqa: BLE001 - one line in the page, the traceback in the server log
            traceback.print_exc()
            st.session_state[error_key] = f"{label}: the file could not be used ({type(exc).__name__})"
    return handler


def _use_model_config(text: str) -> None:
    cfg = state.parse_text(text, "config.json", json_text=True)
    if not isinstance(cfg, dict):
        raise InputError("config.json", "must be a JSON object")
    spec = model_from_hf_config(cfg)
    st.session_state["_uploaded_model"] = spec.model_dump(mode="json", exclude_none=True)


def _use_hardware_yaml(text: str) -> None:
    state.hardware_from_text(text, "uploaded hardware YAML")
    st.session_state["_hw_uploaded_text"] = text


def _use_scenario_yaml(text: str) -> None:
    _apply(state.widget_values(parse_scenario(state.parse_text(text, "scenario YAML"))))


_on_model_upload = _upload_handler("model_upload", "config.json", "_model_upload_error", _use_model_config)
_on_hw_upload = _upload_handler("hw_upload", "hardware YAML", "_hw_upload_error", _use_hardware_yaml)
_on_scenario_upload = _upload_handler("scenario_upload", "scenario YAML", "_scenario_upload_error",
                                      _use_scenario_yaml)


def _error_if(key: str) -> None:
    if st.session_state.get(key):
        st.error(plain(st.session_state[key]))


# -------------------------------------------------------------------------------- widgets
def _model_widgets() -> None:
    st.radio("Model from", state.MODEL_SOURCES, key="model_source", horizontal=True, on_change=_on_model_source)
    src = st.session_state["model_source"]
    if src == "Preset":
        st.selectbox("Model preset", list_presets(), key="model_preset")
    elif src == "Custom":
        draw(job_form.model_options(), MODEL, 2)
        st.caption(MOE)
        draw(job_form.model_options(), MOE, 2)
    else:
        st.file_uploader(f"Hugging Face config.json (up to {state.MAX_UPLOAD_MIB} MiB)", type=["json"],
                         key="model_upload", on_change=_on_model_upload, max_upload_size=state.MAX_UPLOAD_MIB)
        _error_if("_model_upload_error")
        if st.session_state.get("_uploaded_model"):
            st.caption(f"Using: {plain(st.session_state['_uploaded_model'].get('name', 'uploaded model'))}")


def _hardware_widgets() -> None:
    st.radio("Hardware from", state.HW_SOURCES, key="hw_source", horizontal=True, on_change=_on_hw_source)
    src = st.session_state["hw_source"]
    st.selectbox("Hardware", list_hardware_ids(), key="hardware_id",
                 help="Base spec; 'Headline numbers' and 'Edit YAML' start from it.", disabled=src == "Upload YAML")
    if src == "Headline numbers":
        st.text_input("Name", key="hl_name", max_chars=NAME_MAX_CHARS)
        c = st.columns(2)
        for i, (field, label, step) in enumerate(_HEADLINE_LABELS):
            kw = dict(min_value=1, step=step) if isinstance(step, int) else dict(min_value=0.0, step=step)
            c[i % 2].number_input(label, key=f"hl_{field}", **kw)
        st.caption("The chosen spec with these numbers put in (an inline spec, carried by the link and the YAML); "
                   "latencies, power and efficiencies stay the base's, FP8/FP4 peaks at its ratio to BF16.")
    elif src == "Edit YAML":
        st.text_area("Hardware YAML (validated on every change)", key="hw_yaml_text", height=260)
    elif src == "Upload YAML":
        st.file_uploader(f"Hardware YAML (up to {state.MAX_UPLOAD_MIB} MiB)", type=["yaml", "yml"],
                         key="hw_upload", on_change=_on_hw_upload, max_upload_size=state.MAX_UPLOAD_MIB)
        _error_if("_hw_upload_error")


def _layout_widgets() -> None:
    draw(job_form.options(), CLUSTER, 3)


def _batch_widgets() -> None:
    draw(job_form.options(), BATCH, 2)
    _software_options(BATCH)


def _software_options(group: str) -> None:
    draw(software_form.options(), group, 2)


def _overlap_widgets() -> None:
    st.caption("Fraction of each communication hidden behind compute: exposed = max(0, comm - phi x window).")
    c1, c2 = st.columns(2)
    for i, kind in enumerate(state.OVERLAP_KINDS):
        col = (c1, c2)[i % 2]
        col.number_input(f"{kind} overlap", min_value=0.0, max_value=1.0, step=0.05, key=f"ov_{kind}",
                         help=OVERLAP_HELP.get(kind),
                         disabled=kind == "tp" and bool(st.session_state.get("ov_tp_ideal")))
    st.checkbox("TP: ideal chunked overlap, (tp - 1) / tp", key="ov_tp_ideal",
                help="Transformer Engine userbuffers-style decomposition (Wang et al., ASPLOS 2023)")
    _software_options("Overlap and ZeRO-3")


def _stack_widgets() -> None:
    st.selectbox("Software stack", STACK_CHOICES, key="stack", format_func=stack_label,
                 on_change=_on_stack,
                 help="A framework's documented defaults (perfmodel/data/stacks.yaml, each option with its "
                      "source). Choosing one sets the options in this section and the next two; any of them "
                      "may then be changed, and the scenario keeps the stack with the changes.")
    name = st.session_state.get("stack")
    if name:
        info = stack_info(name)
        st.caption(plain(f"{info['release']}. {info['summary']}"))
    _software_options("Software stack")


def _cost_widgets() -> None:
    run_inputs.draw()
    st.checkbox("Use calibration profile when one exists", key="use_profile")


def _values() -> dict:
    return {k: v for k, v in st.session_state.items() if not k.startswith("_") or k in _NON_WIDGET}


def set_values(values: dict) -> None:
    """Set job values from a page's callback (the sidebar keeps them, drawn or not)."""
    _apply(values)


def open_group(name: str) -> None:
    """Show one of the sidebar's groups (from a callback, before the sidebar is drawn)."""
    st.session_state[GROUP_KEY] = name


def job_editor() -> state.JobInputs:
    """Draw the sidebar and return the job it describes (scenario None with an error). The
    cluster and layout are always drawn; the other groups one at a time (``GROUPS``)."""
    _restore()
    with st.sidebar:
        if st.session_state.get("_notice"):
            st.error(plain(st.session_state.pop("_notice")))
        st.markdown("**Cluster and layout**")
        _layout_widgets()
        group = st.selectbox("Edit", GROUPS, key=GROUP_KEY,
                             help="The job's other settings, one group at a time; every group's values are kept")
        drawn = {"Model": _model_widgets, "Hardware": _hardware_widgets, "Software stack": _stack_widgets,
                 "Batch and precision": _batch_widgets, "Overlap and ZeRO-3": _overlap_widgets,
                 "Failures, start-up, input and cost": _cost_widgets}.get(group)
        if drawn is not None:
            drawn()
        st.session_state["_drawn_group"] = group
        v = _values()
        _keep(v)
        try:
            sc = state.scenario_from_values(v)
            err = None
        except InputError as exc:
            sc, err = None, str(exc)
        cost = sc.cost if sc is not None else CostModel()
        if group == "Scenario file and link":
            draw(job_form.options(), FILE, 1)
            if sc is not None:
                st.download_button("Download scenario YAML", state.scenario_yaml(sc),
                                   file_name=state.download_name(sc.name), mime="application/x-yaml")
            st.file_uploader(f"Load a scenario YAML (up to {state.MAX_UPLOAD_MIB} MiB)", type=["yaml", "yml"],
                             key="scenario_upload", on_change=_on_scenario_upload,
                             max_upload_size=state.MAX_UPLOAD_MIB)
            _error_if("_scenario_upload_error")
            st.caption("The page URL holds the current scenario, with its prices and the pages' options: copy "
                       "it to share this job.")
    if sc is not None:
        enc = state.encode_query(json.loads(json.dumps(state.scenario_to_dict(sc))))
        if st.query_params.get(state.QUERY_KEY) != enc:
            st.query_params[state.QUERY_KEY] = enc
    return state.JobInputs(scenario=sc, error=err, cost_model=cost, use_profile=bool(st.session_state["use_profile"]))
