"""Calibration profiles: fitted ``Efficiencies`` for one hardware id, with their sources.

A profile is a YAML file::

    format: perfmodel-calibration-profile/1
    hardware_id: h100-sxm
    efficiency: {gemm: ..., attention: ..., ..., collectives: [...], sources: {...}}
    quality: {gemm.fp8: "9 points, median |error| 3.1%, worst ...", ...}

``efficiency`` has exactly the schema of a hardware YAML's ``efficiency:`` block, so
``apply_profile`` swaps it into a ``HardwareSpec``. Several ``collectives`` entries for one
(op, fabric, num_gpus) are regimes of one curve (NCCL protocols/algorithms), in order of
increasing busbw: the collective takes the fastest, t(S) = min_i(latency_i + factor*S/busbw_i).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict

from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import InputError, validated, write_text_file
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.limits import Name

from .results import read_mapping

PROFILE_FORMAT = "perfmodel-calibration-profile/1"
SIGNIFICANT_DIGITS = 5
"""Written precision of fitted values (fits are good to a few percent at best)."""


class Profile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["perfmodel-calibration-profile/1"] = PROFILE_FORMAT
    hardware_id: Name
    efficiency: Efficiencies
    quality: dict[str, str] = {}
    """One line per fitted group: points, median and worst relative error."""


def write_profile(path, hardware_id: str, efficiencies: Efficiencies, sources: dict[str, str] | None = None,
                  quality: dict[str, str] | None = None, field: str = "--output", inputs=()) -> Path:
    """Write a profile; ``sources`` are merged over ``efficiencies.sources``. A path that is a
    directory, one of ``inputs``, unwritable or on a full device is a one-line InputError
    naming ``field``."""
    eff = efficiencies.model_copy(update={"sources": {**efficiencies.sources, **(sources or {})}})
    profile = Profile(hardware_id=hardware_id, efficiency=eff, quality=quality or {})
    header = (f"# Calibration profile for {hardware_id}: perfmodel efficiencies fitted to measurements.\n"
              "# Written by `python -m calibration`; see docs/calibration.md.\n")
    data = _rounded(profile.model_dump(mode="json", exclude_none=True))   # an unset bwd_half_seq is not written
    return write_text_file(Path(path), header + yaml.safe_dump(data, sort_keys=False, width=120), field, inputs)


def _rounded(data, digits: int = SIGNIFICANT_DIGITS):
    """Floats to ``digits`` significant digits, so that profiles read and diff cleanly."""
    if isinstance(data, float):
        return float(f"{data:.{digits}g}")
    if isinstance(data, dict):
        return {k: _rounded(v, digits) for k, v in data.items()}
    if isinstance(data, list):
        return [_rounded(v, digits) for v in data]
    return data


def load_profile(path) -> Profile:
    return validated(Profile, read_mapping(Path(path)), f"profile({Path(path).name})", "must be a mapping")


def apply_profile(spec: HardwareSpec, profile: Profile) -> HardwareSpec:
    """The spec with its efficiency block replaced by the profile's."""
    if profile.hardware_id != spec.id:
        raise InputError("profile", f"profile is for {profile.hardware_id!r}, hardware is {spec.id!r}")
    return spec.model_copy(update={"efficiency": profile.efficiency})
