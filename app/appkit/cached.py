"""Model calls, cached on frozen inputs (a JSON key), returning plain data for the charts.

Each function takes the ``JobInputs.key()`` JSON string (plus options, also frozen), so a
rerun with unchanged inputs costs a dictionary look-up. Invalid input raises
``perfmodel.spec.errors.InputError``; pages show its one line with ``st.error``.
"""

from __future__ import annotations

import copy
import functools
import json
import threading
from collections import OrderedDict
from pathlib import Path

import streamlit as st

import perfmodel as pm
from perfmodel.api import BREAKDOWN_COMPONENTS
from perfmodel.present.constraints import binding_text, capacity_text, fabric_text, power_cap_text
from perfmodel.present.money import price_text
from perfmodel.present.verdicts import knee_text, scale_verdict_text, sizing_reason_text
from perfmodel.spec.cost import CostModel
from perfmodel.spec.errors import InputError, validated

REPO = Path(__file__).resolve().parents[2]
CACHE = dict(max_entries=256, show_spinner=False)
MAX_CLOUD_POINTS = 2_000
"""The Search page's cloud of layouts is an even sample of at most this many (Vega-Lite draws
5,000 rows at most by default; the front is drawn from all of them)."""
MAX_TIMELINE_BARS = 50_000
"""The pipeline schedule is drawn when it has at most this many bars (2 x pp x vpp x the
micro-batches drawn, at least pp of them): pp 128 draws 32,768; pp 1,024 would draw 2 million."""


MAX_STUDY_RESULTS = 64
"""Study results (compare with search, search, scale, size) kept for every session of this server."""
_RESULTS: OrderedDict = OrderedDict()
_LOCK = threading.Lock()


def remembered(fn):
    """``st.cache_data`` for the studies that feed a progress bar: Streamlit's cache replays the
    calls a cached function makes on elements, and a bar made outside it cannot be replayed, so
    these results are kept here instead (keyed on the same frozen arguments, least recently used
    dropped past ``MAX_STUDY_RESULTS``, a deep copy handed out)."""
    @functools.wraps(fn)
    def wrapper(*args, _progress=None):
        k = (fn.__name__, args)
        with _LOCK:
            if k in _RESULTS:
                _RESULTS.move_to_end(k)
                return copy.deepcopy(_RESULTS[k])
        out = fn(*args, _progress=_progress)
        with _LOCK:
            _RESULTS[k] = out
            while len(_RESULTS) > MAX_STUDY_RESULTS:
                _RESULTS.popitem(last=False)
        return copy.deepcopy(out)
    return wrapper


def _unpack(key: str):
    d = json.loads(key)
    sc = pm.parse_scenario(d["scenario"])
    return sc, CostModel.model_validate(d["cost"]), d["use_profile"], d


def _profile(use_profile: bool):
    """The sidebar's checkbox as ``perfmodel``'s profile choice (the one place that decides)."""
    return "auto" if use_profile else None


# ------------------------------------------------------------------------------- plan
@st.cache_data(**CACHE)
def plan_view(key: str) -> dict:
    """Prediction, memory, roofline and pipeline timeline of the job."""
    sc, cost, use_profile, _ = _unpack(key)
    profile = _profile(use_profile)
    r = pm.resolve(sc, profile=profile)
    eff_note = pm.efficiencies(sc, profile)[1]
    p = pm.predict(sc, profile=profile, cost=cost)
    rl = pm.roofline(sc, profile=profile)
    pp, vpp = sc.parallelism.pp, sc.parallelism.vpp
    drawn = max(pp, min(16, 48 // vpp))
    bars = 2 * pp * vpp * min(drawn, r.num_microbatches)
    tl = pm.timeline(sc, profile=profile, max_microbatches=drawn) if bars <= MAX_TIMELINE_BARS else None
    hw = pm.hardware(sc.hardware) if isinstance(sc.hardware, str) else sc.hardware
    gpu = hw.gpu
    sm = pm.stage_memory(sc, profile=profile)
    return {
        "prediction": p.to_dict(), "price": _price(sc, cost),
        "stage_memory": {"rows": sm.rows(), "totals": list(sm.totals)},
        "model_name": r.job.model.name, "hardware_name": hw.name, "hardware_id": hw.id,
        "usable_hbm_bytes": gpu.hbm_usable_bytes, "hbm_capacity_bytes": gpu.hbm_bytes,
        "efficiency_note": eff_note,
        "roofline": {"points": list(rl.points), "roofs": list(rl.roofs), "ridge": rl.ridge_flop_per_byte},
        "timeline": None if tl is None else {"rows": list(tl.rows), "drawn": tl.num_microbatches_drawn,
                                             "total": tl.num_microbatches_total, "makespan_s": tl.makespan_s,
                                             "bubble_frac": tl.bubble_frac},
        "timeline_bars": bars,
    }


def _price(sc, cost) -> dict:
    """The $/GPU-hour of the scenario's hardware on the cost model's basis, with its source, or why
    it has none."""
    try:
        q = pm.price(sc, cost=cost)
    except InputError as exc:
        return {"usd_per_gpu_hour": None, "basis": cost.cloud_class, "text": str(exc), "source": ""}
    return {"usd_per_gpu_hour": q.usd_per_gpu_hour, "basis": q.basis, "text": price_text(q), "source": q.source}


@st.cache_data(**CACHE)
def fixes_view(key: str) -> dict:
    """Whether the job runs and fits, and the smallest changes that make it (``perfmodel.fit_fixes``)."""
    sc, cost, use_profile, _ = _unpack(key)
    r = pm.fit_fixes(sc, profile=_profile(use_profile), cost=cost)
    return {**r.to_dict(), "scenarios": [pm.scenario_to_dict(f.scenario) for f in r.fixes]}


# ---------------------------------------------------------------------------- compare
@remembered
def compare_view(key: str, hardware_ids: tuple[str, ...], with_search: bool, objective: str,
                 _progress=None) -> list[dict]:
    """The same job on each hardware: as given, and (optionally) with its best layout.

    Each row has ``hardware``, ``layout`` ('as given' | 'best'), the numbers, or ``reason``
    when the job cannot run there.
    """
    sc, cost, use_profile, _ = _unpack(key)
    profile = _profile(use_profile)
    rows = []
    for hw_id in hardware_ids:
        s = sc.model_copy(update={"hardware": hw_id})
        price = _price(s, cost)
        base = {"hardware": hw_id, "hardware_name": pm.hardware(hw_id).name, "price": price,
                "listed_class": pm.hardware(hw_id).price.listed_class,
                "announced": pm.hardware(hw_id).availability == "announced"}
        try:
            p = pm.predict(s, profile=profile, cost=cost)
            reason = "" if p.fits_in_memory else (f"does not fit: {p.memory_per_gpu_bytes / 2**30:,.0f} GiB per GPU "
                                                  f"> {pm.hardware(hw_id).gpu.hbm_usable_gib:,.0f} GiB usable")
            rows.append({**base, "layout": "as given", "fits": p.fits_in_memory, **_numbers(p.to_dict()),
                         "layout_text": _layout_text(s), "reason": reason})
        except InputError as exc:
            rows.append({**base, "layout": "as given", "reason": str(exc)})
        if _progress is not None:
            _progress(len(rows), len(hardware_ids) * (1 + with_search))
        if with_search:
            try:
                r = pm.search(s, pm.SearchOptions(objective=objective, top_k=1), profile=profile, cost=cost)
            except InputError as exc:
                rows.append({**base, "layout": "best", "reason": str(exc)})
                continue
            if r.best is None:
                rows.append({**base, "layout": "best", "reason": f"no layout runs: {r.top_reason()}"})
            else:
                d = r.best.to_dict()
                rows.append({**base, "layout": "best", "fits": True, **_numbers(d), "band": _band(s, d),
                             "layout_text": _layout_text(r.best.scenario), "reason": ""})
    return rows


@st.cache_data(**CACHE)
def compare_stacks_view(key: str, stacks: tuple[str, ...]) -> list[dict]:
    """The same job under each software stack: the stack's options in place of the sidebar's, the
    job's own (pipeline layout, recompute layers, offload, MoE load imbalance) kept. Each row has
    ``stack``, the numbers and the options that differ from the sidebar's, or ``reason``."""
    from perfmodel.spec.software import SoftwareStack
    from perfmodel.spec.stacks import PER_JOB_OPTIONS, stack_info
    sc, cost, use_profile, _ = _unpack(key)
    profile = _profile(use_profile)
    own = {k: getattr(sc.software, k) for k in PER_JOB_OPTIONS}
    current = sc.software.model_dump(mode="json", exclude={"stack"})
    rows = []
    for name in stacks:
        sw = SoftwareStack.model_validate({"stack": name, **own})
        s = sc.model_copy(update={"software": sw})
        theirs = sw.model_dump(mode="json", exclude={"stack"})
        differs = ", ".join(f"{k} {theirs[k]}" for k in theirs if theirs[k] != current[k])
        base = {"stack": name, "stack_label": stack_info(name)["label"], "layout": "as given",
                "differs": differs or "(same options as the sidebar)"}
        try:
            p = pm.predict(s, profile=profile, cost=cost)
            rows.append({**base, **_numbers(p.to_dict()),
                         "reason": "" if p.fits_in_memory else "does not fit in memory"})
        except InputError as exc:
            rows.append({**base, "reason": str(exc)})
    return rows


def _numbers(d: dict) -> dict:
    keys = ("step_time_s", "tokens_per_s_per_gpu", "mfu", "memory_per_gpu_bytes", "time_to_train_s",
            "cost_usd", "energy_kwh", "bottleneck", "band")
    return {k: d.get(k) for k in keys}


def _band(scenario, d: dict) -> dict:
    """The error band of a search candidate's figures (a prediction carries its own)."""
    band = pm.band(scenario)
    out = {"tokens_per_s_per_gpu": band.rate(d["tokens_per_s_per_gpu"]), "step_time_s": band.duration(d["step_time_s"])}
    for k in ("time_to_train_s", "cost_usd"):
        if d.get(k) is not None:
            out[k] = band.duration(d[k])
    return out


def _layout_text(s) -> str:
    p = s.parallelism
    return (f"tp{p.tp} pp{p.pp} vpp{p.vpp} cp{p.cp}" + (f" ep{p.ep} etp{p.etp}" if p.ep * p.etp > 1 else "")
            + f" zero{p.zero_stage} mbs{s.micro_batch_size} {s.recompute}")


# ------------------------------------------------------------------------------ peers
@st.cache_data(**CACHE)
def peers_view(keys: tuple[str, ...]) -> list[dict]:
    """Each saved scenario predicted as it stands: its figures, breakdown and price, or why it
    cannot run."""
    out = []
    for key in keys:
        sc, cost, use_profile, _ = _unpack(key)
        p_ = sc.parallelism
        base = {"scenario": sc.name, "price": _price(sc, cost), "training_tokens": sc.training_tokens,
                "job": f"{model_of_name(sc)} on {sc.num_gpus} x {hardware_name(sc)}, tp{p_.tp} pp{p_.pp} cp{p_.cp}, "
                       f"batch {sc.global_batch_size} x {sc.seq_length}, {sc.precision}"}
        try:
            p = pm.predict(sc, profile=_profile(use_profile), cost=cost)
        except InputError as exc:
            out.append({**base, "reason": str(exc), "breakdown": []})
            continue
        d = p.to_dict()
        out.append({**base, **_numbers(d), "goodput_frac": d["goodput_frac"], "layout": "as given",
                    "reason": "" if p.fits_in_memory else "does not fit in memory",
                    "breakdown": [{"scenario": sc.name, "component": k, "seconds": v}
                                  for k, v in d["breakdown_s"].items() if v > 0]})
    return out


def model_of_name(sc) -> str:
    return sc.model if isinstance(sc.model, str) else sc.model.name


def hardware_name(sc) -> str:
    return sc.hardware if isinstance(sc.hardware, str) else sc.hardware.id


# ----------------------------------------------------------------------------- search
@remembered
def search_view(key: str, options_json: str, _progress=None) -> dict:
    """Top layouts, the time-cost Pareto front, every fitting layout (an even sample of at most
    ``MAX_CLOUD_POINTS``) and the reasons layouts were rejected."""
    sc, cost, use_profile, _ = _unpack(key)
    opts = validated(pm.SearchOptions, json.loads(options_json), "search", "must be a mapping")
    r = pm.search(sc, opts, profile=_profile(use_profile), cost=cost, progress=_progress)
    t = r.table   # an even sample of the layouts that fit, at most a few thousand
    time_col = t.time_basis_s
    stride = max(1, -(-len(t) // MAX_CLOUD_POINTS))
    cloud = [{"time_s": float(time_col[i]), "cost_usd": float(t.cost_usd[i]), "mfu": float(t.mfu[i]),
              "num_gpus": int(t.num_gpus[i]), "bottleneck": str(t.bottleneck[i])} for i in range(0, len(t), stride)]
    return {
        "top": [c.to_dict() for c in r.candidates],
        "top_scenarios": [pm.scenario_to_dict(c.scenario) for c in r.candidates],
        "pareto": [c.to_dict() for c in r.pareto],
        "cloud": cloud, "cloud_sampled": len(cloud) < r.num_fit, "num_fitting": r.num_fit,
        "rejected": dict(r.rejected), "num_enumerated": r.num_enumerated, "num_valid": r.num_valid,
        "num_evaluated": r.num_evaluated, "elapsed_s": r.elapsed_s, "cost_basis": r.cost_basis,
        "time_basis": "time_to_train_s" if t.time_to_train_s is not None else "step_time_s",
    }


# ------------------------------------------------------------------------------ scale
@remembered
def scale_view(key: str, gpu_counts: tuple[int, ...], mode: str, objective: str, efficiency_threshold: float,
               value_of_time_usd_per_day: float | None, deadline_s: float | None, max_batch_tokens: float,
               _progress=None) -> dict:
    """The best layout at each GPU count (``perfmodel.scale``), as plain rows, with the knee and
    the verdict in words (the batch limit of ``mode="grow"`` is the scenario's ``studies``)."""
    sc, cost, use_profile, _ = _unpack(key)
    res = pm.scale(sc, gpu_counts, mode=mode, options=pm.SearchOptions(objective=objective, top_k=1),
                   profile=_profile(use_profile), cost=cost, efficiency_threshold=efficiency_threshold,
                   value_of_time_usd_per_day=value_of_time_usd_per_day, deadline_s=deadline_s,
                   max_batch_tokens=max_batch_tokens, progress=_progress)
    out = _plain(res)
    out["price"] = _price(sc, cost)
    out["knee_num_gpus"], out["knee_reason"] = res.knee.num_gpus, knee_text(res.knee)
    out["verdict"]["reason"] = scale_verdict_text(res.verdict)
    for row, p in zip(out["points"], res.points):
        row["breakdown_s"] = dict(p.candidate.breakdown_s) if p.candidate else None
        row["step_time_s"] = p.candidate.step_time_s if p.candidate else None
    return out


# ------------------------------------------------------------------------------- size
@remembered
def size_view(key: str, tokens: float, deadline_s: float | None, budget_usd: float | None,
              hardware_ids: tuple[str, ...], gpu_counts: tuple[int, ...], grow_batch: bool, max_batch_tokens: float,
              _progress=None) -> dict:
    """Per hardware type, the cheapest (GPU count, layout, batch) meeting the deadline and budget
    (``perfmodel.size``; the batch growth and its limit are the scenario's ``studies``), every
    option that runs (for the chart), and each type's $/GPU-hour with its source."""
    sc, cost, use_profile, _ = _unpack(key)
    rows = pm.size(sc, tokens, deadline_s=deadline_s, budget_usd=budget_usd, hardware_ids=hardware_ids,
                   gpu_counts=gpu_counts, profile=_profile(use_profile), cost=cost, grow_batch=grow_batch,
                   max_batch_tokens=max_batch_tokens, progress=_progress).rows
    options = [{"hardware": r.hardware_id, "num_gpus": o.num_gpus, "time_to_train_s": o.time_to_train_s,
                "cost_usd": o.cost_usd, "batch_tokens": o.global_batch_size * sc.seq_length,
                "chosen": r.choice is not None and o is r.choice}
               for r in rows for o in r.options]
    prices = {hw: _price(sc.model_copy(update={"hardware": hw}), cost) for hw in hardware_ids}
    return {"rows": [{**_plain(r.to_dict()), "reason": sizing_reason_text(r), "price": prices[r.hardware_id],
                      "listed_class": pm.hardware(r.hardware_id).price.listed_class,
                      "power_text": power_cap_text(r.hardware_id, r.constraints and r.constraints.power_cap),
                      "binding_text": binding_text(r.hardware_id, r.constraints, tokens),
                      "capacity_text": capacity_text(r.hardware_id, r.constraints),
                      "fabric_text": fabric_text(r.hardware_id, r.constraints)} for r in rows],
            "options": options, "seq_length": sc.seq_length}


def _plain(obj):
    """Dataclasses and pydantic models -> JSON-like data (for caching and tables)."""
    import dataclasses

    import numpy as np
    from pydantic import BaseModel
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json", exclude_none=True)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if hasattr(obj, "to_dict"):
            return _plain(obj.to_dict())
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def breakdown_rows(breakdown_s: dict) -> list[dict]:
    """Long-form rows (component, seconds, share) in the model's component order."""
    total = sum(breakdown_s.values()) or 1.0
    return [{"component": k, "seconds": breakdown_s[k], "share": breakdown_s[k] / total}
            for k in BREAKDOWN_COMPONENTS if breakdown_s.get(k, 0.0) > 0]


# ---------------------------------------------------------------------------- diagnose
def _observed(sc, measured_json: str) -> list:
    """The sidebar's job measured by each of the ``measured:`` mappings in ``measured_json``
    (typed figures or an uploaded log's runs; several make a series). A mapping may also hold the
    run's ``num_gpus`` and ``global_batch_size`` and a ``label``."""
    out = []
    for i, m in enumerate(json.loads(measured_json)):
        size = {k: m[k] for k in ("num_gpus", "global_batch_size") if m.get(k)}
        figures = {k: v for k, v in m.items() if k not in ("num_gpus", "global_batch_size", "label")}
        run_sc = pm.parse_scenario(pm.scenario_to_dict(sc) | size) if size else sc
        out.append(pm.observed_run(run_sc, figures, m.get("label") or f"run {i + 1}"))
    return out


@st.cache_data(**CACHE)
def sensitivity_view(key: str) -> dict:
    """What twice as much of each resource buys, and the bottleneck path (``perfmodel.sensitivity``)."""
    sc, _, use_profile, _ = _unpack(key)
    return pm.sensitivity(sc, profile=_profile(use_profile)).to_dict()


@st.cache_data(**CACHE)
def diagnose_view(key: str, measured_json: str) -> dict:
    """Predicted against measured, the ranked causes with their sentences, the scaling series,
    the symptoms and the sensitivity (``perfmodel.diagnose``) of the job as measured."""
    from perfmodel.present.diagnosis import cause_detail, cause_sentence, symptom_sentence
    sc, _, use_profile, _ = _unpack(key)
    d = pm.diagnose(_observed(sc, measured_json), profile=_profile(use_profile))
    out = d.to_dict()
    for row, c in zip(out["causes"], d.causes):
        row["sentence"], row["detail"] = cause_sentence(c, d), cause_detail(c)
    for row, s in zip(out["symptoms"], d.symptoms):
        row["sentence"] = symptom_sentence(s)
    return out


@st.cache_data(**CACHE)
def anchored_view(key: str, measured_json: str, what_if_json: str) -> dict:
    """The what-if (the job with the fields of ``what_if_json`` changed) anchored on the measured
    runs, with its band, beside the plain prediction."""
    sc, cost, use_profile, _ = _unpack(key)
    what_if = pm.parse_scenario(pm.scenario_to_dict(sc) | json.loads(what_if_json))
    ap = pm.predict_anchored(what_if, _observed(sc, measured_json), profile=_profile(use_profile), cost=cost)
    return ap.to_dict()
