"""What the run is for: the targets the scaling verdict and the sizing study judge GPU counts
against. Every key is optional; none means no such target."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from perfmodel.spec.limits import MAX_SECONDS, MAX_USD, real_field
from perfmodel.spec.units import SECONDS_PER_DAY


class Purpose(BaseModel):
    """Targets of the run. Unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value_of_time_usd_per_day: real_field(MAX_USD) | None = None
    """What finishing a day earlier is worth: the scale verdict never buys an hour for more."""
    deadline_days: real_field(MAX_SECONDS / SECONDS_PER_DAY) | None = None
    """Wall-clock days the run must finish within."""
    budget_usd: real_field(MAX_USD) | None = None
    """Dollars the run may cost (the sizing study)."""

    @property
    def deadline_s(self) -> float | None:
        return None if self.deadline_days is None else self.deadline_days * SECONDS_PER_DAY
