"""The site a cluster must fit: its power envelope and its power usage effectiveness
(``facility:`` in a scenario; ``perfmodel size --power-mw``). The formulas that turn them into a
GPU count are ``perfmodel.formulas.power``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from perfmodel.spec.errors import validated
from perfmodel.spec.limits import MAX_RATIO, real_field

MAX_POWER_MW = 100_000.0
"""20x the largest campuses announced for AI training (about 5 GW)."""
MAX_GPU_POWER_W = 10_000.0
"""3x the largest ``tdp_w`` in hardware/ (3 kW)."""


class Facility(BaseModel):
    """A power envelope. Unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    power_mw: real_field(MAX_POWER_MW) | None = None
    """The site's power envelope in MW, facility power (what the grid connection delivers:
    IT load x PUE). None: no power limit."""
    pue: real_field(MAX_RATIO, 1.0, exclusive_minimum=False) | None = None
    """Power usage effectiveness of the site, facility power over IT power. None: the cost
    section's (``cost.pue``, default ``perfmodel.spec.cost.PUE_GENERAL``), so the site and its
    energy bill share one PUE; given, sizing prices the energy at it too."""
    gpu_power_cap_w: real_field(MAX_GPU_POWER_W) | None = None
    """A power limit per GPU (``nvidia-smi -pl``): lower clocks, lower peaks, less power per node,
    more GPUs under the envelope (``perfmodel.formulas.power.capped``). None: the GPU's TDP."""


def parse_facility(data: dict) -> Facility:
    """Validate a mapping into a Facility, or raise a one-line InputError."""
    return validated(Facility, data, "facility", "must be a mapping")
