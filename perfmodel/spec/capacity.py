"""Capacity classes: how rented GPUs are held (on demand, reserved for one or three years, spot),
each a record of what the code asks of it (``cost.capacity``), and the preemption of spot
capacity (``cost.preemption``), which enters goodput beside hardware failures
(``perfmodel.formulas.goodput.preempted``).

No reserved or spot price is sourced in the hardware specs: a class whose price a spec lacks is
unavailable for it (a one-line error naming ``cost.capacity``), unless you give your own price
(``cost.usd_per_gpu_hour``). No price is invented.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

from perfmodel.spec.limits import MAX_FAILURES_PER_HOUR, MAX_SECONDS, real_field

CapacityClass = Literal["on_demand", "reserved_1y", "reserved_3y", "spot"]
CAPACITY_CLASSES: tuple[str, ...] = get_args(CapacityClass)


@dataclass(frozen=True)
class CapacityRecord:
    """What the code asks of a capacity class."""

    name: str
    price_field: str | None
    """The ``PriceSpec`` field holding its price per GPU-hour; None: the on-demand price basis
    (``cost.cloud_class``)."""
    preemptible: bool
    """The provider may take the capacity back (spot): preemptions enter goodput."""
    term_years: float
    """The commitment: you pay for the term whether you use it or not (0: none)."""


CAPACITY: dict[str, CapacityRecord] = {
    "on_demand": CapacityRecord("on_demand", None, False, 0.0),
    "reserved_1y": CapacityRecord("reserved_1y", "reserved_1y_usd_per_gpu_hour", False, 1.0),
    "reserved_3y": CapacityRecord("reserved_3y", "reserved_3y_usd_per_gpu_hour", False, 3.0),
    "spot": CapacityRecord("spot", "spot_usd_per_gpu_hour", True, 0.0),
}

HOURS_PER_MONTH = 730.5
"""A Julian month, 8766 h / 12."""
SPOT_PREEMPTIONS_PER_NODE_HOUR_DEFAULT = 0.20 / HOURS_PER_MONTH
"""AWS Spot Instance Advisor: 'frequency of interruption represents the rate at which Spot has
reclaimed capacity during the trailing month', in bands of <5%, 5-10%, 10-15%, 15-20% and >20%
(the advisor's data description, quoted by grailbio/base cloud/spotadvisor). The default is the
floor of the top band, 20% of instances a month (2.74e-4 per instance-hour): the advisor gives
bands, not rates, so set the rate of your instance type and region."""
SPOT_NOTICE_S_DEFAULT = 120.0
"""AWS: a Spot Instance interruption notice is issued two minutes before EC2 stops or
terminates the instance (EC2 user guide, 'Spot Instance interruption notices')."""


class Preemption(BaseModel):
    """How often spot capacity is taken back, and the warning given. Unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    preemptions_per_node_hour: real_field(MAX_FAILURES_PER_HOUR, 0.0, exclusive_minimum=False) = \
        SPOT_PREEMPTIONS_PER_NODE_HOUR_DEFAULT
    """Preemptions per node (instance) per hour; a preemption anywhere stops the synchronous job."""
    notice_s: real_field(MAX_SECONDS, 0.0, exclusive_minimum=False) = SPOT_NOTICE_S_DEFAULT
    """Warning before the capacity goes: when it covers a checkpoint write, the job checkpoints
    and loses no work; otherwise it loses the work since its last checkpoint, as on a failure."""
