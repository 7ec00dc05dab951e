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
uploaded hardware) keeps its own efficiencies under ``"auto"``: a profile fitted to the
catalogue spec would override the edits.
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
        if hw.id not in list_hardware_ids() or load_hardware(hw.id) != hw:
            return hw.efficiency, "the inline hardware spec's own efficiencies"
        eff, note = _catalogue_profile(hw.id)
        return (hw.efficiency if eff is None else eff), note
    prof = _file_profile(str(profile))
    return apply_profile(hw, prof).efficiency, f"calibration profile {Path(profile).name}"


def profile_lookup(profile: ProfileChoice = AUTO):
    """``hardware id -> efficiencies`` under one choice, for studies that visit several specs."""
    def lookup(hw_id: str) -> Efficiencies:
        return efficiencies_for(load_hardware(hw_id), profile)[0]
    return lookup
