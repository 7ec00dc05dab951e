"""Calibration profiles: fitted efficiencies that replace a hardware spec's defaults.

Profiles live in ``calibration/profiles/<hardware-id>.yaml`` (written by ``perfmodel
calibrate``). When one exists for a spec (or for the spec it is a ``variant_of``), predictions use it;
``--no-profile`` turns it off.
"""

from __future__ import annotations

from perfmodel.spec.paths import PROJECT_DIR
import functools
import os
from pathlib import Path

from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.hardware import HardwareSpec, load_hardware

PROFILE_DIR = Path(os.environ.get("PERFMODEL_PROFILE_DIR",
                                  PROJECT_DIR / "calibration" / "profiles"))


def load_profile_efficiency(path: str | Path, hw: HardwareSpec) -> Efficiencies:
    from calibration.profile import apply_profile, load_profile
    return apply_profile(hw, load_profile(path)).efficiency


@functools.lru_cache(maxsize=32)
def efficiency_for_hardware(hw_ref: str) -> Efficiencies | None:
    """The profile's efficiencies for this hardware id, or None (use the spec's defaults).
    A variant without a profile of its own (``variant_of``) uses its reference's. An inline
    spec (not a catalogue id) keeps its own efficiencies: a profile fitted to the catalogue
    spec would override them."""
    if not isinstance(hw_ref, str):
        return None
    hw = load_hardware(hw_ref)
    path = PROFILE_DIR / f"{hw.id}.yaml"
    if not path.exists() and hw.variant_of is not None:
        hw = load_hardware(hw.variant_of)
        path = PROFILE_DIR / f"{hw.id}.yaml"
    if not path.exists():
        return None
    return load_profile_efficiency(path, hw)
