"""``python -m calibration fit-published``: profiles fitted to the published curves.

Reads the project's copy of ``shared/data/microbenchmarks.yaml``
(``calibration/data/microbenchmarks.yaml``; ``$PERFMODEL_MICROBENCHMARKS`` overrides it),
keeps each hardware id's records of trust medium or high (the file's rule: low-trust rows
are sanity bounds only), fits them with ``fit``, and writes
``calibration/profiles/<hardware-id>.yaml``. Groups without published data keep the hardware
spec's defaults, and the profile's ``sources`` say so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from perfmodel.errors import InputError
from perfmodel.hardware import load_hardware

from .fit import Calibration, fit_efficiencies, quality_lines
from .parsers import parse_microbenchmarks
from .profile import write_profile
from .results import read_mapping

PUBLISHED_HARDWARE = ("h100-sxm", "h200-sxm", "a100-sxm-80gb", "b200", "gb200-nvl72")
REPO_ROOT = Path(__file__).resolve().parent.parent
PROFILES_DIR = REPO_ROOT / "calibration" / "profiles"


DATA_COPY = REPO_ROOT / "calibration" / "data" / "microbenchmarks.yaml"
SHARED_DATA = REPO_ROOT.parent / "shared" / "data" / "microbenchmarks.yaml"


def default_data_path() -> Path:
    """$PERFMODEL_MICROBENCHMARKS, else the project copy, else shared/ beside the repository."""
    env = os.environ.get("PERFMODEL_MICROBENCHMARKS")
    if env:
        return Path(env)
    return DATA_COPY if DATA_COPY.exists() else SHARED_DATA


@dataclass(frozen=True)
class PublishedFit:
    hardware_id: str
    calibration: Calibration
    left_out: tuple[str, ...]
    path: Path | None


def fit_published(data_path: Path, hardware_ids=PUBLISHED_HARDWARE, out_dir: Path | None = PROFILES_DIR,
                  min_trust: str = "medium") -> list[PublishedFit]:
    """Fit and (when ``out_dir`` is given) write one profile per hardware id."""
    data = read_mapping(Path(data_path))
    name = Path(data_path).name
    out = []
    for hw_id in hardware_ids:
        spec = load_hardware(hw_id)
        pub = parse_microbenchmarks(data, hw_id, origin=name, min_trust=min_trust)
        cal = fit_efficiencies([pub.results], spec,
                               missing_reason=f"no published data of trust >= {min_trust} for {hw_id} in {name}")
        extra = {"left_out": "; ".join(pub.skipped)} if pub.skipped else {}
        path = None
        if out_dir is not None:
            path = write_profile(Path(out_dir) / f"{hw_id}.yaml", hw_id, cal.efficiencies, extra,
                                 quality_lines(cal))
        out.append(PublishedFit(hw_id, cal, pub.skipped, path))
    return out


def require_file(path: Path) -> Path:
    if not Path(path).exists():
        raise InputError("data", f"{path} not found (set PERFMODEL_MICROBENCHMARKS or pass --data)")
    return Path(path)
