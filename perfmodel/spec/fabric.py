"""The scale-out network as something you buy: a rail-optimised fat tree of switches, optics and
cables (``fabric:`` in a scenario). Its bill of materials, power and the slow-down of traffic
that crosses an oversubscribed tier are ``perfmodel.formulas.fabric``; the collectives that cross
it, ``perfmodel.formulas.comm``.

NICs per GPU and the NVLink domain come from the hardware spec (``scale_out.nics_per_gpu``,
``scale_up.domain_size``); a fabric states only what the hardware spec does not: tiers, the
oversubscription of the leaf tier, the switch, the transceivers, and prices where you have them.
No price is sourced here: a price left unset is reported as unavailable, never invented.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from perfmodel.spec.errors import validated
from perfmodel.spec.limits import MAX_USD, int_choice, int_field, real_field

# --- bounds (generous multiples of real fabrics) -------------------------------------------
MAX_OVERSUBSCRIPTION = 64.0
"""16x the most oversubscribed leaf tiers described for AI clusters (4:1)."""
MAX_SWITCH_RADIX = 1024
"""8x the largest single-ASIC radix shipping (128 ports of 400G on 51.2 Tb/s ASICs)."""
MAX_PORTS_PER_TRANSCEIVER = 8
MAX_HOP_LATENCY_US = 100.0
MAX_DEVICE_POWER_W = 100_000.0

# --- sourced defaults --------------------------------------------------------------------
SWITCH_RADIX_DEFAULT = 64
"""NVIDIA Quantum-2 QM9700: 64 ports of NDR 400 Gb/s in 32 OSFP cages (QM97XX user manual,
'Interfaces': each OSFP port carries 2 logical InfiniBand ports); the leaf and spine switch of
the DGX SuperPOD H100 reference architecture."""
SWITCH_PORTS_PER_TRANSCEIVER_DEFAULT = 2
"""Twin-port OSFP (2 x 400G) in Quantum-2 and Spectrum-4 switches (NVIDIA MMA4Z00-NS product
specification, 'Overview')."""
NIC_PORTS_PER_TRANSCEIVER_DEFAULT = 1
"""Single-port 400G OSFP in a ConnectX-7 adapter (NVIDIA MMA4Z00-NS400 product specification).
DGX H100 instead carries twin-port transceivers for its eight NICs (DGX SuperPOD H100 reference
architecture, 'Network Fabrics'): set 2 for it."""
SWITCH_TRANSCEIVER_POWER_W_DEFAULT = 15.0
"""Twin-port multimode OSFP: 15 W in every configuration (NVIDIA MMA4Z00-NS-T specification,
'Overview')."""
NIC_TRANSCEIVER_POWER_W_DEFAULT = 8.0
"""Single-port 400G multimode OSFP at 400 Gb/s: 8 W typical, 9 W maximum (NVIDIA MMA4Z00-NS400-T
specification, 'Connectivity Scenarios')."""

Topology = Literal["rail_optimised_fat_tree"]

_Usd = real_field(MAX_USD, 0.0, exclusive_minimum=False)
_Watts = real_field(MAX_DEVICE_POWER_W, 0.0, exclusive_minimum=False)


class FabricSpec(BaseModel):
    """A scale-out fabric: every key optional; unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    topology: Topology = "rail_optimised_fat_tree"
    """Rail-optimised fat tree (folded Clos): NIC i of every host in a scalable unit on leaf i
    (DGX SuperPOD reference architectures)."""
    tiers: int_choice(1, 2, 3) | None = None
    """Switch tiers: 1 (leaves only), 2 (leaf and spine), 3 (leaf, spine, core). None: two where
    they reach the job's NICs, else three (``perfmodel.formulas.fabric.for_job``); a number that
    cannot reach them is an error."""
    oversubscription: real_field(MAX_OVERSUBSCRIPTION, 1.0, exclusive_minimum=False) = 1.0
    """The leaf tier's downlink over uplink bandwidth (2 = 2:1); upper tiers are non-blocking."""
    switch_radix: int_field(MAX_SWITCH_RADIX) = SWITCH_RADIX_DEFAULT
    """Ports of one switch at the NIC's line rate."""
    switch_ports_per_transceiver: int_field(MAX_PORTS_PER_TRANSCEIVER) = SWITCH_PORTS_PER_TRANSCEIVER_DEFAULT
    nic_ports_per_transceiver: int_field(MAX_PORTS_PER_TRANSCEIVER) = NIC_PORTS_PER_TRANSCEIVER_DEFAULT
    hop_latency_us: real_field(MAX_HOP_LATENCY_US, 0.0, exclusive_minimum=False) | None = None
    """Latency added by each extra switch hop a crossing path takes (two per tier crossed: up
    and down). None: no figure is added (no vendor port-to-port latency was found for
    Quantum-2; the hardware's scale-out latency already holds one leaf hop)."""
    switch_power_w: _Watts | None = None
    """Power of one switch without its transceivers. None: unknown (no sourced figure), and the
    fabric's power then counts its optics only, and says so."""
    switch_transceiver_power_w: _Watts = SWITCH_TRANSCEIVER_POWER_W_DEFAULT
    nic_transceiver_power_w: _Watts = NIC_TRANSCEIVER_POWER_W_DEFAULT
    switch_usd: _Usd | None = None
    """Price of one switch. None: no sourced price; the fabric's capex is then unavailable."""
    transceiver_usd: _Usd | None = None
    """Price of one transceiver (either end). None: no sourced price."""
    cable_usd: _Usd | None = None
    """Price of one cable (fibre). None: no sourced price."""


def parse_fabric(data: dict) -> FabricSpec:
    """Validate a mapping into a FabricSpec, or raise a one-line InputError."""
    return validated(FabricSpec, data, "fabric", "must be a mapping")
