"""The Calibration page's model calls, cached on their frozen inputs like ``appkit.cached``:
fitted efficiency curves, an uploaded log's fit, the validation report, software histories."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

import perfmodel as pm
from perfmodel.spec.errors import InputError

from .cached import CACHE, REPO, _profile
from .state import parse_text


# ------------------------------------------------------------------------ calibration
def published_runs_path() -> Path:
    """The project's copy of the published runs."""
    p = REPO / "perfmodel" / "data" / "published_runs.yaml"
    if p.exists():
        return p
    raise InputError("published runs", "perfmodel/data/published_runs.yaml not found")


def microbenchmarks_path() -> Path:
    p = REPO / "calibration" / "data" / "microbenchmarks.yaml"
    if p.exists():
        return p
    raise InputError("microbenchmarks", "calibration/data/microbenchmarks.yaml not found")


@st.cache_data(**CACHE)
def validation_view(use_profile: bool) -> dict:
    """Predicted against measured tokens/s per GPU for every runnable published case."""
    path = published_runs_path()
    report = pm.validate(path, profile=_profile(use_profile))
    shown = path.relative_to(REPO)
    return {"path": str(shown),
            "results": [r.to_dict() for r in report.results],
            "skipped": [s.__dict__ for s in report.skipped],
            "mape": report.mape(), "by_hardware": report.by_hardware(), "by_gpu": report.by_gpu(),
            "by_source": report.by_source(), "what_if": report.what_if()}


@st.cache_data(**CACHE)
def fit_view(hardware_id: str) -> dict:
    """Fitted efficiency curves against the measured points of one GPU (published, and suite runs)."""
    from calibration.published import fit_published
    path = microbenchmarks_path()
    fits = [f for f in fit_published(path, hardware_ids=(hardware_id,), out_dir=None) if f.hardware_id == hardware_id]
    if not fits:
        raise InputError("hardware", f"no published fit for {hardware_id}")
    cal = fits[0].calibration
    points = _fit_points(cal)
    params = {g.group: g.params for g in cal.groups}
    return {"points": points, "params": params, "left_out": list(fits[0].left_out), "path": path.name}


MAX_UPLOAD_RECORDS = 5_000
"""Records of one uploaded file that are fitted: a suite run writes about 400, an nccl-tests log
two per size (out of place, in place). The 1 MiB upload limit bounds the file; this bounds the
least-squares problems built from it."""


def _fit_points(cal) -> list[dict]:
    return [{"group": p.group, "label": p.label, "x": p.x, "measured": p.measured, "fitted": p.fitted,
             "quantity": p.quantity, "source": p.source, "in_fit": p.in_fit, "rel_error": p.rel_error}
            for g in cal.groups for p in g.points]


@st.cache_data(**CACHE)
def upload_fit_view(text: str, name: str, hardware_id: str) -> dict:
    """An uploaded nccl-tests log or result file (its text: nothing is read from or written to
    disk, and ``name`` is only a label) fitted on a catalogue spec: the fitted points, the
    fitted parameters, and the profile's text for ``perfmodel predict --profile``."""
    from calibration.fit import fit_efficiencies, quality_lines
    from calibration.parsers import looks_like_nccl_tests, parse_nccl_tests, results_from_data
    from calibration.profile import profile_text
    from perfmodel.spec.hardware import list_hardware_ids, load_hardware

    if hardware_id not in list_hardware_ids():
        raise InputError("hardware", f"unknown hardware {hardware_id!r}")
    label = name if len(name) <= 64 else name[:61] + "..."
    if looks_like_nccl_tests(text):
        results = parse_nccl_tests(text, origin=label)
    else:
        data = parse_text(text, "uploaded file", json_text=label.lower().endswith(".json"))
        results = results_from_data(data, label, hardware_id)
    if not results.records:
        raise InputError("uploaded file", "no records to fit")
    if len(results.records) > MAX_UPLOAD_RECORDS:
        raise InputError("uploaded file", f"{len(results.records):,} records; the app fits at most "
                                          f"{MAX_UPLOAD_RECORDS:,} (use perfmodel calibrate)")
    spec = load_hardware(hardware_id)
    cal = fit_efficiencies([results], spec)
    return {"points": _fit_points(cal), "params": {g.group: g.params for g in cal.groups},
            "sources": {k: v for k, v in cal.efficiencies.sources.items() if not v.startswith("spec default")},
            "not_fitted": {k: v for k, v in cal.efficiencies.sources.items() if v.startswith("not fitted")},
            "profile_yaml": profile_text(hardware_id, cal.efficiencies, quality=quality_lines(cal)),
            "records": len(results.records)}


@st.cache_data(**CACHE)
def software_history_view(use_profile: bool) -> list[dict]:
    """Each published software history with perfmodel's prediction for its layout."""
    return pm.software_histories(profile=_profile(use_profile))
