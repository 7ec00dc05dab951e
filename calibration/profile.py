"""Writing calibration profiles. The format, and reading and applying a profile, are
perfmodel's (``perfmodel.spec.profile``): calibration writes what perfmodel reads."""

from __future__ import annotations

from pathlib import Path

import yaml

from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import write_text_file
from perfmodel.spec.profile import Profile, apply_profile, load_profile  # noqa: F401  (calibration's API)

SIGNIFICANT_DIGITS = 5
"""Written precision of fitted values (fits are good to a few percent at best)."""


def write_profile(path, hardware_id: str, efficiencies: Efficiencies, sources: dict[str, str] | None = None,
                  quality: dict[str, str] | None = None, field: str = "--output", inputs=()) -> Path:
    """Write a profile; ``sources`` are merged over ``efficiencies.sources``. A path that is a
    directory, one of ``inputs``, unwritable or on a full device is a one-line InputError
    naming ``field``."""
    text = profile_text(hardware_id, efficiencies, sources, quality)
    return write_text_file(Path(path), text, field, inputs)


def profile_text(hardware_id: str, efficiencies: Efficiencies, sources: dict[str, str] | None = None,
                 quality: dict[str, str] | None = None) -> str:
    """The profile file's text (what ``write_profile`` writes; the app offers it as a download)."""
    eff = efficiencies.model_copy(update={"sources": {**efficiencies.sources, **(sources or {})}})
    profile = Profile(hardware_id=hardware_id, efficiency=eff, quality=quality or {})
    header = (f"# Calibration profile for {hardware_id}: perfmodel efficiencies fitted to measurements.\n"
              "# Written by `python -m calibration`; see docs/calibration.md.\n")
    data = _rounded(profile.model_dump(mode="json", exclude_none=True))   # an unset bwd_half_seq is not written
    return header + yaml.safe_dump(data, sort_keys=False, width=120)


def _rounded(data, digits: int = SIGNIFICANT_DIGITS):
    """Floats to ``digits`` significant digits, so that profiles read and diff cleanly."""
    if isinstance(data, float):
        return float(f"{data:.{digits}g}")
    if isinstance(data, dict):
        return {k: _rounded(v, digits) for k, v in data.items()}
    if isinstance(data, list):
        return [_rounded(v, digits) for v in data]
    return data
