"""The run's sections of the scenario in the sidebar: failures and checkpoints, start-up, the input
pipeline and cost (``reliability``, ``startup``, ``input_pipeline``, ``cost``).

``widget_values`` and ``sections_from_values`` are pure (no Streamlit), as in ``state``; ``draw``
draws the widgets. Each widget shows one field in the unit on its label; a scale that is a power
of ten converts it, so a value typed in round-trips exactly. Where a field may be empty (None), 0
in its widget means empty, and its label says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.spec.capacity import CAPACITY_CLASSES
from perfmodel.spec.errors import InputError
from perfmodel.spec.units import GIGA, MEGA


@dataclass(frozen=True)
class Field:
    section: str
    name: str
    key: str
    """Widget key (Session State)."""
    label: str
    scale: float = 1.0
    """Field value = widget value x scale."""
    integer: bool = False
    zero_is_none: bool = False
    fmt: str | None = None
    step: float = 1.0
    help: str = ""


FIELDS = (
    Field("reliability", "gpu_failures_per_gpu_hour", "rel_gpu_rate", "Interruptions per GPU-hour", fmt="%.3e",
          step=1e-6, help="job interruptions charged per GPU, all causes (default: Llama 3, 419 in 54 days on "
                          "16,384 H100s)"),
    Field("reliability", "node_failures_per_node_hour", "rel_node_rate", "Extra per node-hour", fmt="%.3e",
          step=1e-6, help="host, NIC, power supply (0: inside the GPU rate)"),
    Field("reliability", "rack_failures_per_rack_hour", "rel_rack_rate", "Extra per rack-hour", fmt="%.3e",
          step=1e-6, help="NVLink switch trays, power shelves, liquid cooling of a rack"),
    Field("reliability", "gpus_per_node", "rel_gpus_per_node", "GPUs per node", integer=True),
    Field("reliability", "gpus_per_rack", "rel_gpus_per_rack", "GPUs per rack", integer=True),
    Field("reliability", "restart_s", "rel_restart_s", "Restart (s)", step=30.0,
          help="relaunch after a failure, before reading the checkpoint back"),
    Field("reliability", "storage_write_bandwidth_bytes_per_s", "rel_write_gb_s", "Checkpoint write (GB/s)",
          scale=GIGA, step=100.0, help="storage bandwidth the whole job writes a checkpoint at"),
    Field("reliability", "storage_read_bandwidth_bytes_per_s", "rel_read_gb_s", "Checkpoint read (GB/s)",
          scale=GIGA, step=100.0),
    Field("reliability", "per_gpu_io_bandwidth_bytes_per_s", "rel_io_gb_s", "Per-GPU I/O cap (GB/s, 0 = none)",
          scale=GIGA, zero_is_none=True, step=1.0),
    Field("reliability", "checkpoint_bytes_per_param", "rel_ckpt_bytes", "Checkpoint bytes per parameter",
          step=1.0, help="weights and optimizer state (14: bf16 weights, fp32 master, Adam m and v)"),
    Field("reliability", "checkpoint_interval_s", "rel_ckpt_interval_s", "Checkpoint every (s, 0 = Young/Daly)",
          zero_is_none=True, step=60.0, help="0: the optimum, sqrt(2 x write time x mean time between failures)"),
    Field("startup", "launch_s", "su_launch_s", "Launch (s)", step=30.0,
          help="scheduling, process start, rendezvous, communicator set-up"),
    Field("startup", "compile_s", "su_compile_s", "Compilation (s)", step=60.0, help="torch.compile or XLA"),
    Field("startup", "warmup_steps", "su_warmup_steps", "Warm-up steps", integer=True,
          help="steps at the start counted as lost"),
    Field("input_pipeline", "bytes_per_token", "in_bytes_per_token", "Bytes read per token", step=1.0),
    Field("input_pipeline", "storage_read_bytes_per_s_per_gpu", "in_read_gb_s", "Storage read per GPU (GB/s)",
          scale=GIGA, step=0.05),
    Field("input_pipeline", "loader_tokens_per_s_per_gpu", "in_loader_tok_s", "Loader tokens/s per GPU (0 = no limit)",
          zero_is_none=True, step=1000.0, help="what the data-loader workers of one GPU prepare per second"),
    Field("cost", "usd_per_gpu_hour", "usd_per_gpu_hour", "Your price (USD per GPU-hour)",
          zero_is_none=True, step=0.25, help="used with the basis 'own' (and beside TCO, for buy or rent)"),
    Field("cost", "purchase_usd_per_gpu", "cost_purchase", "Purchase price per GPU (USD, 0 = spec's)",
          zero_is_none=True, step=1000.0),
    Field("cost", "amortisation_years", "cost_years", "Amortisation (years)", step=0.5),
    Field("cost", "utilisation_frac", "cost_utilisation", "Utilisation over the life", step=0.05),
    Field("cost", "pue", "cost_pue", "PUE", step=0.05),
    Field("cost", "usd_per_kwh", "cost_usd_per_kwh", "Electricity (USD per kWh)", step=0.01),
    Field("cost", "network_ops_overhead_frac", "cost_network_frac", "Networking and operations (x purchase)",
          step=0.05),
    Field("cost", "avg_power_frac", "cost_power_frac", "Average power (x maximum)", step=0.05),
    Field("cost", "reserved_1y_usd_per_gpu_hour", "cost_reserved_1y", "Reserved 1 y (USD/GPU-h, 0 = none)",
          zero_is_none=True, step=0.25, help="your one-year reserved price; none is sourced in the specs"),
    Field("cost", "reserved_3y_usd_per_gpu_hour", "cost_reserved_3y", "Reserved 3 y (USD/GPU-h, 0 = none)",
          zero_is_none=True, step=0.25, help="your three-year reserved price; none is sourced in the specs"),
    Field("cost", "spot_usd_per_gpu_hour", "cost_spot", "Spot (USD/GPU-h, 0 = none)", zero_is_none=True,
          step=0.25, help="your spot price; none is sourced in the specs"),
)
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


def cost_basis(cost) -> str:
    """The price basis of a cost model (``COST_BASES``)."""
    if cost.mode == "tco":
        return "tco"
    return "own" if cost.usd_per_gpu_hour is not None else cost.cloud_class


def widget_values(sc) -> dict:
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
    for f in FIELDS:
        value = getattr(getattr(sc, f.section), f.name)
        value = 0 if value is None else value
        out[f.key] = int(value) if f.integer else float(value) / f.scale
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


def sections_from_values(v: dict) -> dict:
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
    for f in FIELDS:
        if f.key not in v:
            continue
        x = v[f.key]
        if f.zero_is_none and not x:
            value = None
        else:
            value = int(x) if f.integer else float(x) * f.scale
        out[f.section][f.name] = value
    if basis == "own" and not out["cost"].get("usd_per_gpu_hour"):
        raise InputError("cost.usd_per_gpu_hour", "the price basis 'own' needs your price per GPU-hour (> 0)")
    if basis in ("listed", "hyperscaler", "neocloud"):
        out["cost"]["usd_per_gpu_hour"] = None      # the spec's price of the class; yours is kept for 'own'
    out.update(site_sections(v))
    return out


def draw() -> None:
    """The run widgets, by section (their values live in Session State only)."""
    import streamlit as st

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
        cols = st.columns(2)
        for i, f in enumerate(x for x in FIELDS if x.section == section):
            col = cols[i % 2]
            off = f.key == "usd_per_gpu_hour" and st.session_state.get("cost_basis") not in ("own", "tco")
            if f.integer:
                col.number_input(f.label, min_value=0, step=int(f.step), key=f.key, help=f.help or None)
            else:
                col.number_input(f.label, min_value=0.0, step=f.step, format=f.fmt, key=f.key, help=f.help or None,
                                 disabled=off)


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
