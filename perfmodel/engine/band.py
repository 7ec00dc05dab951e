"""The error band of a prediction: how far the truth may lie from it, read from how far past
predictions lay from published runs.

=========  ==================================================================================
r          log(predicted / measured) tokens/s per GPU of one published run (its residual)
q_p        the p-quantile of r for runs like this one (same GPU generation, dense or MoE)
p10..p90   the band: a measured rate lies between predicted / e^{q_.9} and predicted / e^{q_.1}
           for 80% of such runs; step time, time to train and cost (each proportional to
           1 / rate) between predicted x e^{q_.1} and predicted x e^{q_.9}; p50 is the median
=========  ==================================================================================

The quantiles come from ``perfmodel/data/error_bands.yaml``, which ``perfmodel validate
perfmodel/data/published_runs.yaml --fit-bands perfmodel/data/error_bands.yaml`` derives from the
current model's residuals
(``perfmodel.studies.bands`` says how, and measures the band's coverage on sources it was not
fitted on). The band is about the step model; the failure, start-up and price inputs are taken
as given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.paths import DATA_DIR

BAND_FILE = DATA_DIR / "error_bands.yaml"
BAND_FORMAT = "perfmodel-error-bands/1"
NOMINAL_LOW, NOMINAL_HIGH = 0.10, 0.90
"""The band users see: p10 to p90, a nominal 80% interval."""
ANY_GENERATION = "any"
"""The stratum of a GPU generation no published run is on: offsets of every generation."""

GPU_GENERATION = {
    "a100-sxm-40gb": "ampere", "a100-sxm-80gb": "ampere",
    "h100-sxm": "hopper", "h200-sxm": "hopper", "h800-sxm": "hopper",
    "b200": "blackwell", "b300": "blackwell", "gb200-nvl72": "blackwell", "gb300-nvl72": "blackwell",
    "mi300x": "cdna3", "mi355x": "cdna4",
}
"""GPU architecture of each catalogue GPU (a variant counts as its ``variant_of``): NVIDIA's A100
(Ampere), H100 (Hopper; H200 and H800 are the same GH100 die) and Blackwell architecture
whitepapers; AMD's CDNA 3 and CDNA 4 whitepapers. A GPU not listed (an inline spec of its own)
has generation ``any``."""


def generation_of(hw: HardwareSpec) -> str:
    return GPU_GENERATION.get(hw.reference_id, ANY_GENERATION)


def kind_of(model: ModelSpec) -> str:
    return "moe" if model.moe is not None else "dense"


def _interp(x: float, xs, ys) -> float:
    return float(np.interp(x, xs, ys))


@dataclass(frozen=True)
class ErrorBand:
    """Quantiles of r = log(predicted / measured) for one stratum (a GPU generation, dense or MoE)."""

    stratum: str
    """``<generation>/<dense|moe>``: the runs the band was read from."""
    levels: tuple[float, ...]
    """Probability levels, ascending (0.05 to 0.95)."""
    log_ratio: tuple[float, ...]
    """The quantile of r at each level (non-decreasing)."""
    software_stacks: int
    """Published sources x GPU generations whose offsets the band spans."""
    held_out_coverage: float | None
    """Share of the stratum's published runs the p10-p90 band covered when fitted without their
    source (leave-one-source-out); None when the stratum has no runs."""

    def quantile(self, level: float) -> float:
        """The ``level`` quantile of r (levels outside the stored range take its ends)."""
        return _interp(level, self.levels, self.log_ratio)

    def cdf(self, log_ratio: float) -> float:
        """P(r <= log_ratio), read between the stored levels and held at their ends (0.05, 0.95):
        the band does not claim to know its own tails."""
        r, lv = np.asarray(self.log_ratio), np.asarray(self.levels)
        if log_ratio < r[0]:
            return float(lv[0])
        if log_ratio >= r[-1]:
            return float(lv[-1])
        i = int(np.searchsorted(r, log_ratio, side="right"))   # r[i-1] <= x < r[i]
        span = r[i] - r[i - 1]
        return float(lv[i - 1] + (lv[i] - lv[i - 1]) * (log_ratio - r[i - 1]) / span) if span > 0 else float(lv[i])

    def rate(self, predicted: float) -> dict:
        """{p10, p50, p90} of a rate (tokens/s per GPU) predicted as ``predicted``."""
        return {"p10": predicted * math.exp(-self.quantile(NOMINAL_HIGH)), "p50": predicted * math.exp(-self.quantile(0.5)),
                "p90": predicted * math.exp(-self.quantile(NOMINAL_LOW))}

    def duration(self, predicted: float) -> dict:
        """{p10, p50, p90} of a time or a cost (proportional to 1 / rate) predicted as ``predicted``."""
        return {"p10": predicted * math.exp(self.quantile(NOMINAL_LOW)), "p50": predicted * math.exp(self.quantile(0.5)),
                "p90": predicted * math.exp(self.quantile(NOMINAL_HIGH))}

    def probability_within(self, predicted: float, limit: float) -> float:
        """P(actual <= limit) for a time or cost predicted as ``predicted``: P(r <= log(limit /
        predicted)), held in [0.05, 0.95] (``cdf``)."""
        if not (predicted > 0 and limit > 0):
            raise InputError("limit", f"predicted ({predicted}) and limit ({limit}) must be > 0")
        return self.cdf(math.log(limit / predicted))

    def rank_of(self, predicted_rate: float, measured_rate: float) -> float:
        """Where a measured rate falls among the runs like this one: P(r <= log(predicted /
        measured)). Near 0.5 the measurement is as the model expects; beyond 0.9 (or below 0.1)
        it is slower (or faster) than 80% of the published runs of its stratum."""
        if not (predicted_rate > 0 and measured_rate > 0):
            raise InputError("measured_rate", f"rates must be > 0, got {predicted_rate} and {measured_rate}")
        return self.cdf(math.log(predicted_rate / measured_rate))

    def to_dict(self) -> dict:
        return {"stratum": self.stratum, "levels": list(self.levels), "log_ratio": list(self.log_ratio),
                "software_stacks": self.software_stacks, "held_out_coverage": self.held_out_coverage}


@dataclass(frozen=True)
class BandTable:
    """Every stratum's band (``perfmodel/data/error_bands.yaml``)."""

    levels: tuple[float, ...]
    strata: dict
    """``<generation>/<kind>`` -> ErrorBand."""

    def band(self, generation: str, kind: str) -> ErrorBand:
        """The stratum's band; a generation with no published runs takes the ``any`` stratum."""
        return self.strata.get(f"{generation}/{kind}") or self.strata[f"{ANY_GENERATION}/{kind}"]


def band_table_from_dict(data: dict) -> BandTable:
    """The band table of a parsed ``error_bands.yaml`` (a project file: its shape is checked,
    not trusted blindly)."""
    if not isinstance(data, dict) or data.get("format") != BAND_FORMAT:
        raise InputError("error_bands", f"expected format {BAND_FORMAT}")
    levels = tuple(float(x) for x in data["levels"])
    strata = {}
    for name, s in data["strata"].items():
        q = tuple(float(x) for x in s["log_ratio"])
        if len(q) != len(levels) or any(b < a for a, b in zip(q, q[1:])):
            raise InputError(f"error_bands.strata.{name}", "needs one non-decreasing quantile per level")
        strata[name] = ErrorBand(name, levels, q, int(s["software_stacks"]), s.get("held_out_coverage"))
    return BandTable(levels, strata)


@lru_cache(maxsize=1)
def band_table() -> BandTable | None:
    """The project's band table (read once); None before the first ``--fit-bands`` has written it
    (the fit itself predicts the published runs, and needs no band to do so)."""
    from perfmodel.spec.errors import read_data_file
    if not BAND_FILE.exists():
        return None
    return band_table_from_dict(read_data_file(BAND_FILE, "error_bands"))


def band_for(hw: HardwareSpec, model: ModelSpec) -> ErrorBand | None:
    """The error band of a job on ``hw`` training ``model`` (None without a band table)."""
    table = band_table()
    return None if table is None else table.band(generation_of(hw), kind_of(model))


def band_dict(band: ErrorBand, tokens_per_s_per_gpu: float, step_time_s: float, time_to_train_s: float | None,
              cost_usd: float | None) -> dict:
    """The prediction's ``band``: {figure: {p10, p50, p90}} for the figures it has."""
    out = {"tokens_per_s_per_gpu": band.rate(tokens_per_s_per_gpu), "step_time_s": band.duration(step_time_s)}
    if time_to_train_s is not None:
        out["time_to_train_s"] = band.duration(time_to_train_s)
    if cost_usd is not None:
        out["cost_usd"] = band.duration(cost_usd)
    return out
