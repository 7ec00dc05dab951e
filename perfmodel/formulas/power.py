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

A power cap per GPU (``facility.gpu_power_cap_w``, P_cap) lowers the clock. Between a published
lower-limit point of the same die (P_0, F_0, ``hw.gpu.power_limit_point``: for the H100 the H100
NVL's 835.5 dense BF16 TFLOP/s at 400 W; GB200 the HGX B200's 2,250 at 1,000 W; GB300 the HGX
B300's 2,250 at 1,100 W; MI355X the MI350X's 2,306.9 at 1,000 W) and the part's TDP (P_1, F_1)
the dense peak is interpolated, F(P_cap) = F_0 + (F_1 - F_0)(P_cap - P_0) /
(P_1 - P_0), every precision by the same clock ratio F(P_cap) / F_1; memory bandwidth is kept. The
node's maximum power falls by g (P_1 - P_cap); a measured training draw above the cap becomes the
cap (the measured steps ran at their power limit). No extrapolation: a cap below P_0, or on a GPU
with no published point, is an error. (At 500 W this gives the 886.8 TFLOP/s and 8.6 kW of
``hardware/h100-sxm-hbm2e-500w.yaml``.)
"""

from __future__ import annotations

import math

from perfmodel.spec.errors import InputError
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


def capped(hw: HardwareSpec, cap_w: float | None) -> HardwareSpec:
    """``hw`` at a power cap of ``cap_w`` per GPU (module notes); ``hw`` itself for None or a cap
    at or above its TDP."""
    gpu = hw.gpu
    if cap_w is None or cap_w >= gpu.tdp_w:
        return hw
    pt = gpu.power_limit_point
    if pt is None:
        raise InputError("facility.gpu_power_cap_w", f"no published peak of {hw.id} below its {gpu.tdp_w:g} W TDP; "
                                                     f"a cap cannot be modelled for it")
    if cap_w < pt.power_w:
        raise InputError("facility.gpu_power_cap_w", f"{cap_w:g} W is below the lowest published point of {hw.id} "
                                                     f"({pt.power_w:g} W); no extrapolation")
    F1 = gpu.peak_dense_tflop_per_s.bf16
    F = pt.bf16_tflop_per_s + (F1 - pt.bf16_tflop_per_s) * (cap_w - pt.power_w) / (gpu.tdp_w - pt.power_w)
    ratio = F / F1
    peaks = {k: None if v is None else v * ratio for k, v in gpu.peak_dense_tflop_per_s.model_dump().items()}
    draw = gpu.training_power_w
    new_gpu = gpu.model_copy(update={"peak_dense_tflop_per_s": gpu.peak_dense_tflop_per_s.model_copy(update=peaks),
                                     "tdp_w": cap_w, "training_power_w": None if draw is None else min(draw, cap_w)})
    node_w = hw.power.node_power_w - hw.power.gpus_per_node * (gpu.tdp_w - cap_w)
    return hw.model_copy(update={"gpu": new_gpu, "power": hw.power.model_copy(update={"node_power_w": node_w})})
