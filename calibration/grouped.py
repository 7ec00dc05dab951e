"""Published grouped-GEMM (MoE expert) rates against the step model's expert GEMMs.

The step model gives every expert GEMM the dense curve of its per-expert shape and one
``kernel_overhead_s`` per expert (``perfmodel.formulas.compute.gemm_time_s``), as the H100 suite
measured: one ``torch.mm`` per expert issued from a CUDA graph, and ``torch._grouped_mm``, run at
dense rates (calibration/results/nvidia-h100-80gb-hbm3-2026-11-22). The published records of
``calibration/data/grouped_gemm.yaml`` time more than that: a per-expert loop issued by the host
(its launch gaps included), or a whole MoE forward (routing, permutation and the activation
included). So they bound the model from above, and this module reports each one's measured
time against the model's; nothing is fitted to them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from perfmodel.formulas.compute import gemm_roofline_s
from perfmodel.spec.errors import read_data_file
from perfmodel.spec.hardware import HardwareSpec

DATA = Path(__file__).resolve().parent / "data" / "grouped_gemm.yaml"


@dataclass(frozen=True)
class GroupedCheck:
    id: str
    measured_s: float
    model_s: float
    """The step model's time for the record's GEMMs alone (dense curve, one kernel overhead per
    expert kernel)."""

    @property
    def ratio(self) -> float:
        """Measured over model time: at least 1 for a record that times more than the GEMMs."""
        return self.measured_s / self.model_s


def model_time_s(rec: dict, hw: HardwareSpec) -> float:
    eff = hw.efficiency
    E, p = rec["experts"], rec["precision"]
    gemms = [(rec["m"], rec["n"], rec["k"])]
    if "second_gemm" in rec:
        gemms.append((rec["m"], rec["second_gemm"]["n"], rec["second_gemm"]["k"]))
    t = 0.0
    for m, n, k in gemms:
        t_math, t_mem = gemm_roofline_s(m, n, k, E, p, hw, eff)
        kernels = E * rec["kernels_per_expert"] if rec["kernels_per_expert"] else 1
        t += kernels * eff.kernel_overhead_s + max(float(t_math), float(t_mem))
    return t


def measured_time_s(rec: dict) -> float:
    if "time_s" in rec:
        return float(rec["time_s"])
    flop = 2.0 * rec["m"] * rec["n"] * rec["k"] * rec["experts"]
    return flop / (rec["tflops"] * 1e12)


def check_published(hw: HardwareSpec, path: Path = DATA) -> tuple[GroupedCheck, ...]:
    """Each published record of ``hw`` against the model's GEMM time."""
    data = read_data_file(path, "grouped_gemm")
    return tuple(GroupedCheck(r["id"], measured_time_s(r), model_time_s(r, hw))
                 for r in data["records"] if r["hardware"] == hw.id)
