"""The run's sections of the scenario in the sidebar: failures and checkpoints, start-up, the input
pipeline and cost (``reliability``, ``startup``, ``input_pipeline``, ``cost``).

``widget_values`` and ``sections_from_values`` are pure (no Streamlit), as in ``state``; ``draw``
draws the widgets. Each widget shows one field in the unit on its label; a scale that is a power
of ten converts it, so a value typed in round-trips exactly. Where a field may be empty (None), 0
in its widget means empty, and its label says so. The widgets are generated from the sections'
schemas (``appkit.schema_form``); ``LOOKS`` gives their words, keys, steps and scales.
"""

from __future__ import annotations

import functools

from perfmodel.spec.capacity import CAPACITY_CLASSES
from perfmodel.spec.errors import InputError
from perfmodel.spec.scenario import Scenario
from perfmodel.spec.units import GIGA, MEGA

from .schema_form import Look, Option, field_options, read_values


LOOKS: dict[str, dict[str, Look]] = {
    "reliability": {
        "gpu_failures_per_gpu_hour": Look("Interruptions per GPU-hour",
            "job interruptions charged per GPU, all causes (default: Llama 3, 419 in 54 days on 16,384 H100s)",
            key="rel_gpu_rate", step=1e-06, fmt="%.3e"),
        "node_failures_per_node_hour": Look("Extra per node-hour",
            "host, NIC, power supply (0: inside the GPU rate)",
            key="rel_node_rate", step=1e-06, fmt="%.3e"),
        "rack_failures_per_rack_hour": Look("Extra per rack-hour",
            "NVLink switch trays, power shelves, liquid cooling of a rack",
            key="rel_rack_rate", step=1e-06, fmt="%.3e"),
        "gpus_per_node": Look("GPUs per node", key="rel_gpus_per_node"),
        "gpus_per_rack": Look("GPUs per rack", key="rel_gpus_per_rack"),
        "restart_s": Look("Restart (s)",
            "relaunch after a failure, before reading the checkpoint back",
            key="rel_restart_s", step=30.0),
        "storage_write_bandwidth_bytes_per_s": Look("Checkpoint write (GB/s)",
            "storage bandwidth the whole job writes a checkpoint at",
            key="rel_write_gb_s", scale=GIGA, step=100.0),
        "storage_read_bandwidth_bytes_per_s": Look("Checkpoint read (GB/s)",
            key="rel_read_gb_s", scale=GIGA, step=100.0),
        "per_gpu_io_bandwidth_bytes_per_s": Look("Per-GPU I/O cap (GB/s, 0 = none)",
            key="rel_io_gb_s", scale=GIGA, step=1.0),
        "checkpoint_bytes_per_param": Look("Checkpoint bytes per parameter",
            "weights and optimizer state (14: bf16 weights, fp32 master, Adam m and v)",
            key="rel_ckpt_bytes", step=1.0),
        "checkpoint_interval_s": Look("Checkpoint every (s, 0 = Young/Daly)",
            "0: the optimum, sqrt(2 x write time x mean time between failures)",
            key="rel_ckpt_interval_s", step=60.0),
    },
    "startup": {
        "launch_s": Look("Launch (s)",
            "scheduling, process start, rendezvous, communicator set-up",
            key="su_launch_s", step=30.0),
        "compile_s": Look("Compilation (s)", "torch.compile or XLA", key="su_compile_s", step=60.0),
        "warmup_steps": Look("Warm-up steps", "steps at the start counted as lost", key="su_warmup_steps"),
    },
    "input_pipeline": {
        "bytes_per_token": Look("Bytes read per token", key="in_bytes_per_token", step=1.0),
        "storage_read_bytes_per_s_per_gpu": Look("Storage read per GPU (GB/s)",
            key="in_read_gb_s", scale=GIGA, step=0.05),
        "loader_tokens_per_s_per_gpu": Look("Loader tokens/s per GPU (0 = no limit)",
            "what the data-loader workers of one GPU prepare per second",
            key="in_loader_tok_s", step=1000.0),
    },
    "cost": {
        "usd_per_gpu_hour": Look("Your price (USD per GPU-hour)",
            "used with the basis 'own' (and beside TCO, for buy or rent)",
            key="usd_per_gpu_hour", step=0.25),
        "purchase_usd_per_gpu": Look("Purchase price per GPU (USD, 0 = spec's)", key="cost_purchase", step=1000.0),
        "amortisation_years": Look("Amortisation (years)", key="cost_years", step=0.5),
        "utilisation_frac": Look("Utilisation over the life", key="cost_utilisation", step=0.05),
        "pue": Look("PUE", key="cost_pue", step=0.05),
        "usd_per_kwh": Look("Electricity (USD per kWh)", key="cost_usd_per_kwh", step=0.01),
        "network_ops_overhead_frac": Look("Networking and operations (x purchase)", key="cost_network_frac", step=0.05),
        "avg_power_frac": Look("Average power (x maximum)", key="cost_power_frac", step=0.05),
        "reserved_1y_usd_per_gpu_hour": Look("Reserved 1 y (USD/GPU-h, 0 = none)",
            "your one-year reserved price; none is sourced in the specs",
            key="cost_reserved_1y", step=0.25),
        "reserved_3y_usd_per_gpu_hour": Look("Reserved 3 y (USD/GPU-h, 0 = none)",
            "your three-year reserved price; none is sourced in the specs",
            key="cost_reserved_3y", step=0.25),
        "spot_usd_per_gpu_hour": Look("Spot (USD/GPU-h, 0 = none)",
            "your spot price; none is sourced in the specs",
            key="cost_spot", step=0.25),
    },
}
"""Each section's fields as the sidebar shows them: a label in the unit of the widget, the help,
the widget key and step, and a scale (GB/s for bytes/s). A field this table leaves out is drawn
from the schema alone (``appkit.schema_form``): a new field of a run section needs no app code."""
DRAWN_APART = {"cost": ("mode", "cloud_class", "capacity")}
"""Fields with widgets of their own: the price basis and the capacity class (``draw``)."""


SECTIONS = ("reliability", "startup", "input_pipeline", "cost")
PURPOSE = {"purpose_vot": "value_of_time_usd_per_day", "purpose_deadline_days": "deadline_days",
           "purpose_budget": "budget_usd"}
"""Session keys (not widgets, so they outlive a page switch) -> the scenario's ``purpose`` fields.
The Scale and Size pages edit them through ``seeded`` and ``submit_sync``; 0 means none."""
COST_BASES = ("listed", "hyperscaler", "neocloud", "own", "tco")
"""The price basis: the spec's listed rental price, one provider class's on-demand price for every
hardware, your own price, or owning the hardware (``perfmodel.present.money.BASIS_WORDS``)."""
STUDY = {"study_grow_batch": "grow_batch", "study_max_batch_mtokens": "max_batch_tokens",
         "study_objective": "objective", "study_scale_counts": "scale_gpu_counts", "study_scale_mode": "scale_mode",
         "study_size_hardware": "size_hardware", "study_size_counts": "size_gpu_counts",
         "study_search_counts": "search_gpu_counts", "study_compare_hardware": "compare_hardware",
         **{f"study_serve_{k}": f"serve_{k}" for k in (
             "prompt_tokens", "output_tokens", "concurrency", "batching", "ttft_s", "tpot_s", "objectives_at", "tp",
             "weights", "kv_cache", "requests_per_s")}}
"""Session keys (not widgets, so they outlive a page switch) -> the scenario's ``studies`` fields:
the pages' options, carried by the link and the YAML. None means the page's default."""
STUDY_SCALE = {"study_max_batch_mtokens": MEGA}
"""Study keys shown in another unit: field value = session value x scale (millions of tokens)."""
SITE = {"site_power_mw": "power_mw", "site_pue": "pue", "site_gpu_cap_w": "gpu_power_cap_w",
        "fabric_oversubscription": "oversubscription", "fabric_tiers": "tiers"}
"""Session keys (not widgets; the Size page edits them) -> the scenario's ``facility`` (power
envelope in MW, 0 = none; PUE, 0 = the cost section's; a power cap per GPU in W, 0 = none) and
``fabric`` (oversubscription x:1, 0 = no fabric; tiers, 0 = as needed). The fabric's other keys
(switch, prices) ride along in ``_fabric_other``."""
SECTION_TITLES = {"reliability": "Failures and checkpoints", "startup": "Start-up", "input_pipeline": "Input pipeline",
                  "cost": "Cost"}


@functools.lru_cache(maxsize=8)
def options(section: str, model: type[Scenario] = Scenario) -> tuple[Option, ...]:
    """A run section's fields as widgets, generated from its schema (group: the section)."""
    return field_options(model.model_fields[section].annotation, LOOKS[section], section,
                         skip=DRAWN_APART.get(section, ()), path=f"{section}.")


def cost_basis(cost) -> str:
    """The price basis of a cost model (``COST_BASES``)."""
    if cost.mode == "tco":
        return "tco"
    return "own" if cost.usd_per_gpu_hour is not None else cost.cloud_class


def widget_values(sc, model: type[Scenario] = Scenario) -> dict:
    """Every run widget's value for the scenario ``sc`` (with ``cost_basis``, the purpose and
    the study keys)."""
    out = {"cost_basis": cost_basis(sc.cost), "cost_capacity": sc.cost.capacity,
           "_cost_preemption": sc.cost.preemption.model_dump(mode="json", exclude_defaults=True)}
    for key, name in PURPOSE.items():
        out[key] = float(getattr(sc.purpose, name) or 0.0)
    for key, name in STUDY.items():
        value = getattr(sc.studies, name)
        value = list(value) if isinstance(value, tuple) else value
        out[key] = value / STUDY_SCALE[key] if key in STUDY_SCALE else value
    for section in SECTIONS:
        out.update(read_values(getattr(sc, section), options(section, model)))
    out.update(site_values(sc))
    return out


def site_values(sc) -> dict:
    """The ``SITE`` session values of the scenario ``sc``, and its fabric's other keys."""
    fab = sc.fabric
    other = {} if fab is None else fab.model_dump(mode="json", exclude_defaults=True, exclude={"oversubscription",
                                                                                                 "tiers"})
    return {"site_power_mw": float(sc.facility.power_mw or 0.0), "site_pue": float(sc.facility.pue or 0.0),
            "site_gpu_cap_w": float(sc.facility.gpu_power_cap_w or 0.0),
            "fabric_oversubscription": float(fab.oversubscription) if fab else 0.0,
            "fabric_tiers": int(fab.tiers or 0) if fab else 0, "_fabric_other": other}


def site_sections(v: dict) -> dict:
    """The scenario's ``facility`` and ``fabric`` from the ``SITE`` values (absent: none)."""
    out: dict = {"facility": {}}
    if v.get("site_power_mw"):
        out["facility"]["power_mw"] = float(v["site_power_mw"])
    if v.get("site_pue"):
        out["facility"]["pue"] = float(v["site_pue"])
    if v.get("site_gpu_cap_w"):
        out["facility"]["gpu_power_cap_w"] = float(v["site_gpu_cap_w"])
    if v.get("fabric_oversubscription"):
        out["fabric"] = {**(v.get("_fabric_other") or {}), "oversubscription": float(v["fabric_oversubscription"]),
                         "tiers": int(v.get("fabric_tiers") or 0) or None}
    return out


def sections_from_values(v: dict, model: type[Scenario] = Scenario) -> dict:
    """The scenario's run sections from widget values: {section: {field: value}} (the scenario
    parser checks them)."""
    out: dict = {s: {} for s in SECTIONS}
    basis = v.get("cost_basis", "listed")
    out["cost"]["mode"] = "tco" if basis == "tco" else "cloud"
    if basis in ("listed", "hyperscaler", "neocloud"):
        out["cost"]["cloud_class"] = basis
    out["cost"]["capacity"] = v.get("cost_capacity") or "on_demand"
    if v.get("_cost_preemption"):
        out["cost"]["preemption"] = dict(v["_cost_preemption"])
    out["purpose"] = {name: float(v[key]) for key, name in PURPOSE.items() if v.get(key)}
    out["studies"] = {name: (v[key] * STUDY_SCALE[key] if key in STUDY_SCALE else v[key])
                      for key, name in STUDY.items() if v.get(key) is not None}
    for section in SECTIONS:
        out[section].update({o.name: o.from_widget(v[o.key]) for o in options(section, model) if o.key in v})
    if basis == "own" and not out["cost"].get("usd_per_gpu_hour"):
        raise InputError("cost.usd_per_gpu_hour", "the price basis 'own' needs your price per GPU-hour (> 0)")
    if basis in ("listed", "hyperscaler", "neocloud"):
        out["cost"]["usd_per_gpu_hour"] = None      # the spec's price of the class; yours is kept for 'own'
    out.update(site_sections(v))
    return out


def draw() -> None:
    """The run widgets, by section (their values live in Session State only)."""
    import streamlit as st

    from .form_widgets import draw as draw_options

    st.caption("How the run goes beyond its steps: failures, start-up, data and price. They set goodput, "
               "time to train and cost.")
    for section in SECTIONS:
        st.markdown(f"**{SECTION_TITLES[section]}**")
        if section == "cost":
            st.radio("Price basis", COST_BASES, key="cost_basis", horizontal=True,
                     help="listed: each spec's own rental price (its provider class differs between specs); "
                          "hyperscaler or neocloud: that class's on-demand price for every spec, so hardware "
                          "compares on one basis; own: your price per GPU-hour; tco: own the hardware (capital "
                          "+ networking + energy). Every cost shows its $/GPU-hour and source.")
            st.radio("Capacity", CAPACITY_CLASSES, key="cost_capacity", horizontal=True,
                     help="how rented GPUs are held: on demand (the price basis above), reserved for 1 or 3 "
                          "years, or spot (preempted: goodput counts it). Reserved and spot need your price "
                          "below: none is sourced.")
        off = st.session_state.get("cost_basis") not in ("own", "tco")
        draw_options(options(section), section, 2, disabled=frozenset({"usd_per_gpu_hour"} if off else ()))


def seeded(widget, label: str, key: str, store_key: str, default, scale: float = 1.0, **kwargs):
    """A widget inside a form, showing the session value ``store_key`` (a purpose or study key;
    None: ``default``) divided by ``scale``; ``submit_sync`` writes it back when the form is
    submitted (a form's widgets take no callbacks)."""
    import streamlit as st

    stored = st.session_state.get(store_key)
    want = default if stored is None else (list(stored) if isinstance(stored, (list, tuple)) else stored / scale
                                           if isinstance(stored, (int, float)) and not isinstance(stored, bool)
                                           and scale != 1.0 else stored)   # a whole number stays whole
    run = st.session_state.get("_run", 0)
    drawn_last_run = st.session_state.get(f"_drawn_{key}") == run - 1
    # the scenario changed it (a link, an upload, another page), or the widget was not drawn last
    # run (Streamlit has forgotten its value): it starts from the scenario's
    if st.session_state.get(f"_seeded_{key}") != want or not drawn_last_run:
        st.session_state[key] = want
        st.session_state[f"_seeded_{key}"] = want
    st.session_state[f"_drawn_{key}"] = run
    if "options" in kwargs and isinstance(want, list):
        kwargs["options"] = with_values(kwargs["options"], want)
    return widget(label, key=key, **kwargs)


def with_values(options, values: list) -> list:
    """A list widget's options with the scenario's values that are not among them (a link's GPU
    count of 24 where the page lists powers of two): shown and kept, never dropped unseen."""
    extra = [v for v in values if v not in options]
    if not extra:
        return list(options)
    merged = list(options) + extra
    return sorted(merged) if all(isinstance(v, (int, float)) for v in merged) else merged


def submit_sync(pairs: dict, then=None) -> callable:
    """on_click of a form's submit button: each widget key's value into its session key
    (``{widget_key: (store_key, scale, none_value)}``; a value equal to ``none_value`` stores None)."""
    import streamlit as st

    def sync() -> None:
        for key, (store_key, scale, none_value) in pairs.items():
            value = st.session_state.get(key)
            if isinstance(value, tuple):
                value = list(value)
            if isinstance(value, list) and not value:
                continue       # an emptied list is not stored: the page says to pick one, the session stays valid
            if value == none_value:
                stored = None
            elif isinstance(value, (int, float)) and not isinstance(value, bool) and scale != 1.0:
                stored = value * scale   # at scale 1 a whole number stays whole
            else:
                stored = value
            st.session_state[store_key] = stored
            st.session_state[f"_seeded_{key}"] = value
        if then is not None:
            then()
    return sync
