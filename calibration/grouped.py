"""Grouped (MoE expert) GEMMs: the half_dim at which they saturate, from published rates.

Expert GEMMs run many small problems (one cuBLAS call per expert, or one grouped kernel) and
reach less of the peak than one dense GEMM of the same per-expert shape. The step model
treats them as dense GEMMs with their own, larger half_dim (``grouped_gemm_half_dim``,
``perfmodel.formulas.compute.gemm_efficiency``). This module finds it from
``calibration/data/grouped_gemm.yaml``: the record with one kernel per expert and a pure
GEMM timing fixes d; records whose time also covers other work (routing, permutation)
only bound it, and are reported as consistency checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scipy.optimize import brentq

from perfmodel.formulas.compute import gemm_roofline_s
from perfmodel.spec.errors import InputError, read_data_file
from perfmodel.spec.hardware import HardwareSpec

DATA = Path(__file__).resolve().parent / "data" / "grouped_gemm.yaml"


@dataclass(frozen=True)
class GroupedFit:
    half_dim: float
    source_id: str
    checks: tuple[str, ...]
    """One line per bounding record: its measured time against the fitted model's."""


def _model_time_s(rec: dict, d: float, hw: HardwareSpec) -> float:
    eff = hw.efficiency.model_copy(update={"grouped_gemm_half_dim": d})
    E, p = rec["experts"], rec["precision"]
    gemms = [(rec["m"], rec["n"], rec["k"])]
    if "second_gemm" in rec:
        gemms.append((rec["m"], rec["second_gemm"]["n"], rec["second_gemm"]["k"]))
    t = 0.0
    for m, n, k in gemms:
        t_math, t_mem = gemm_roofline_s(m, n, k, E, p, hw, eff, grouped=True)
        kernels = E * rec["kernels_per_expert"] if rec["kernels_per_expert"] else 1
        t += kernels * eff.kernel_overhead_s + max(float(t_math), float(t_mem))
    return t


def _measured_time_s(rec: dict) -> float:
    if "time_s" in rec:
        return float(rec["time_s"])
    flop = 2.0 * rec["m"] * rec["n"] * rec["k"] * rec["experts"]
    return flop / (rec["tflops"] * 1e12)


def fit_grouped_half_dim(hw: HardwareSpec, path: Path = DATA) -> GroupedFit:
    data = read_data_file(path, "grouped_gemm")
    recs = [r for r in data["records"] if r["hardware"] == hw.id]
    exact = [r for r in recs if "tflops" in r]
    if not exact:
        raise InputError("grouped_gemm", f"no pure grouped-GEMM timing for {hw.id} in {Path(path).name}")
    rec = exact[0]
    t_meas = _measured_time_s(rec)
    d = brentq(lambda d: _model_time_s(rec, d, hw) - t_meas, 0.0, 1e6)
    checks = tuple(f"{r['id']}: measured {_measured_time_s(r) * 1e3:.3f} ms >= model {_model_time_s(r, d, hw) * 1e3:.3f} ms"
                   for r in recs if r is not rec)
    return GroupedFit(half_dim=float(d), source_id=rec["id"], checks=checks)
