"""Calibration profiles: fitted efficiencies that replace a hardware spec's defaults, and the one
place that decides which efficiencies a prediction uses.

A profile is a YAML file, written by ``python -m calibration`` (``perfmodel calibrate``)::

    format: perfmodel-calibration-profile/1
    hardware_id: h100-sxm
    efficiency: {gemm: ..., attention: ..., ..., collectives: [...], sources: {...}}
    quality: {gemm.fp8: "9 points, median |error| 3.1%, worst ...", ...}

``efficiency`` has exactly the schema of a hardware YAML's ``efficiency:`` block. Several
``collectives`` entries for one (op, fabric, num_gpus) are regimes of one curve (NCCL protocols
and algorithms), in order of increasing busbw: the collective takes the fastest.

The choice (``ProfileChoice``) is the same everywhere, API, CLI and app: ``"auto"`` (the
default) takes the project's profile for a catalogue spec, or for the spec it is a
``variant_of``, where one exists; ``None`` (CLI ``--profile none``) keeps the hardware spec's own
efficiencies; a path names a profile file the user fitted. A spec given inline (edited or
uploaded hardware) under ``"auto"`` keeps the profile of the catalogue spec it derives from
(its own id, else its ``variant_of``) when its efficiency block is that spec's unchanged: the
fitted fractions of peak apply to the edited peaks as they are, and what the profile holds in
absolute units of the fabric (collective fits' bus bandwidth and latency, the fabrics' fitted
latencies) is scaled by the ratio of the edited fabric's figure to the catalogue spec's
(``scaled_to``). An edited efficiency block is the user's and is kept; a spec that derives from no
catalogue spec has no profile, and the note says so.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Literal, Union

from pydantic import BaseModel, ConfigDict

from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import InputError, read_data_file, validated
from perfmodel.spec.hardware import HardwareSpec, list_hardware_ids, load_hardware
from perfmodel.spec.limits import Name
from perfmodel.spec.paths import PROFILES_DIR

PROFILE_FORMAT = "perfmodel-calibration-profile/1"
PROFILE_DIR = Path(os.environ.get("PERFMODEL_PROFILE_DIR", PROFILES_DIR))
"""The project's profiles, ``<hardware-id>.yaml`` (the environment variable points elsewhere)."""
ProfileChoice = Union[Literal["auto"], None, str, Path]
AUTO = "auto"


class Profile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["perfmodel-calibration-profile/1"] = PROFILE_FORMAT
    hardware_id: Name
    efficiency: Efficiencies
    quality: dict[str, str] = {}
    """One line per fitted group: points, median and worst relative error."""


def load_profile(path) -> Profile:
    """A profile file (a one-line InputError naming it if it is not one)."""
    p = Path(path)
    return validated(Profile, read_data_file(p, f"profile({p.name})"), f"profile({p.name})", "must be a mapping")


def apply_profile(spec: HardwareSpec, profile: Profile) -> HardwareSpec:
    """The spec with its efficiency block replaced by the profile's; the profile must be for the
    spec or for the spec it is a variant of."""
    if profile.hardware_id not in (spec.id, spec.reference_id):
        raise InputError("profile", f"profile is for {profile.hardware_id!r}, hardware is {spec.id!r}")
    return spec.model_copy(update={"efficiency": profile.efficiency})


@functools.lru_cache(maxsize=32)
def _catalogue_profile(hw_id: str) -> tuple[Efficiencies | None, str]:
    hw = load_hardware(hw_id)
    for ref in dict.fromkeys((hw.id, hw.reference_id)):
        path = PROFILE_DIR / f"{ref}.yaml"
        if path.exists():
            return load_profile(path).efficiency, f"calibration profile calibration/profiles/{ref}.yaml"
    return None, f"hardware spec defaults (no calibration profile for {hw_id})"


@functools.lru_cache(maxsize=32)
def _file_profile(path: str) -> Profile:
    return load_profile(path)


def efficiencies_for(hw: HardwareSpec, profile: ProfileChoice = AUTO) -> tuple[Efficiencies, str]:
    """(the efficiencies a prediction on ``hw`` uses, a note saying where they come from)."""
    if profile is None or profile == "none":
        return hw.efficiency, "hardware spec defaults (calibration profile off)"
    if profile == AUTO:
        if hw.id in list_hardware_ids() and load_hardware(hw.id) == hw:
            eff, note = _catalogue_profile(hw.id)
            return (hw.efficiency if eff is None else eff), note
        return _inline_efficiencies(hw)
    prof = _file_profile(str(profile))
    return apply_profile(hw, prof).efficiency, f"calibration profile {Path(profile).name}"


def _inline_efficiencies(hw: HardwareSpec) -> tuple[Efficiencies, str]:
    """An inline (edited or uploaded) spec's efficiencies under ``"auto"`` and why (module docstring)."""
    ids = list_hardware_ids()
    refs = [r for r in dict.fromkeys((hw.id, hw.variant_of)) if r in ids]
    base = next((load_hardware(r) for r in refs if load_hardware(r).efficiency == hw.efficiency), None)
    if base is None:
        why = (f"its efficiency block differs from {refs[0]}'s, so no calibration profile applies" if refs else
               "it derives from no catalogue spec (id or variant_of), so no calibration profile applies")
        return hw.efficiency, f"the inline hardware spec's own efficiencies ({why})"
    eff, note = _catalogue_profile(base.id)
    if eff is None:
        return hw.efficiency, f"{note}; the inline spec derives from {base.id}"
    eff, scaled = scaled_to(eff, base, hw)
    return eff, (f"{note}, of {base.id} which this inline spec derives from"
                 + (f"; fabric figures scaled: {scaled}" if scaled else ""))


def _ratio(new: float, old: float) -> float:
    return new / old if old > 0 else 1.0


def scaled_to(eff: Efficiencies, base: HardwareSpec, hw: HardwareSpec) -> tuple[Efficiencies, str]:
    """``eff``, fitted on ``base``, for ``hw``: collective fits' bus bandwidth scaled by the ratio
    of ``hw``'s per-GPU fabric bandwidth to ``base``'s (scale-up per direction; scale-out NICs per
    GPU x line rate), their latencies and the fabrics' fitted latencies by the ratio of the specs'
    latencies; fractions of peak unchanged (they apply to ``hw``'s own peaks). Also the words
    naming each ratio that is not 1."""
    bw = {"scale_up": _ratio(hw.scale_up.bandwidth_bytes_per_s, base.scale_up.bandwidth_bytes_per_s),
          "scale_out": _ratio(hw.scale_out.bandwidth_bytes_per_s, base.scale_out.bandwidth_bytes_per_s)}
    lat = {"scale_up": _ratio(hw.scale_up.latency_s, base.scale_up.latency_s),
           "scale_out": _ratio(hw.scale_out.latency_s, base.scale_out.latency_s)}
    words = ", ".join([f"{k.replace('_', '-')} bandwidth x{r:.3g}" for k, r in bw.items() if r != 1.0]
                      + [f"{k.replace('_', '-')} latency x{r:.3g}" for k, r in lat.items() if r != 1.0])
    if not words:
        return eff, ""
    fits = tuple(f.model_copy(update={"busbw_bytes_per_s": f.busbw_bytes_per_s * bw[f.fabric],
                                      "latency_s": f.latency_s * lat[f.fabric]}) for f in eff.collectives)
    return eff.model_copy(update={"collectives": fits,
                                  "scale_up_latency_s": eff.scale_up_latency_s * lat["scale_up"],
                                  "scale_out_latency_s": eff.scale_out_latency_s * lat["scale_out"]}), words


def profile_lookup(profile: ProfileChoice = AUTO):
    """``hardware id -> efficiencies`` under one choice, for studies that visit several specs."""
    def lookup(hw_id: str) -> Efficiencies:
        return efficiencies_for(load_hardware(hw_id), profile)[0]
    return lookup
