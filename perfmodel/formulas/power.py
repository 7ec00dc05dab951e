"""Power: how many GPUs a site's envelope holds, and the tokens a megawatt-hour trains.

Notation:

=======  ==========================================================  ============================
P_env    the site's power envelope, facility power, W                 ``Facility.power_mw`` x 1e6
PUE      facility power over IT power                                 ``Facility.pue``
P_node   maximum power of one node (or rack), W                       ``hw.power.node_power_w``
g        GPUs per node (per rack for NVL72 systems)                   ``hw.power.gpus_per_node``
P_net    the scale-out fabric's power per GPU, W (switches where       ``FabricBom.power_w / N``
         known, transceivers)
p        facility power per GPU: (P_node / g + P_net) x PUE
N_max    GPUs the envelope holds, in whole nodes: g floor(P_env / (g p))
=======  ==========================================================  ============================

A site is provisioned for the nameplate (maximum) power of what it holds, not its average draw:
a node at full load must not trip the envelope, so N_max uses P_node at its maximum (the DGX H100
datasheet's 10.2 kW, the GB200 NVL72 rack's ~120 kW). The energy a run uses is the average draw
(``perfmodel.formulas.cost``, ``avg_power_frac``).

Tokens per MWh = tokens / (facility energy in kWh / 1000).
"""

from __future__ import annotations

import math

from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.units import KILO, MEGA


def facility_power_per_gpu_w(hw: HardwareSpec, pue: float, fabric_w_per_gpu: float) -> float:
    """p = (P_node / g + P_net) x PUE: the facility power one GPU takes at full load."""
    return (hw.power.power_per_gpu_w + fabric_w_per_gpu) * pue


def gpus_under_envelope(power_mw: float, per_gpu_facility_w: float, gpus_per_node: int) -> int:
    """N_max = g floor(P_env / (g p)): the GPUs, in whole nodes (racks), the envelope holds."""
    nodes = math.floor(power_mw * MEGA / (gpus_per_node * per_gpu_facility_w) + 1e-9)
    return int(nodes * gpus_per_node)


def tokens_per_mwh(tokens: float, energy_kwh: float) -> float:
    """Tokens trained per MWh of facility energy."""
    return tokens / (energy_kwh / KILO) if energy_kwh > 0 else float("inf")
