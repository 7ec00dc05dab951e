"""The block-wise FP8 GEMM curve of DeepSeek's training kernels on Hopper, fitted to DeepGEMM's table.

``calibration/data/deepgemm_h800.yaml`` holds DeepGEMM's published H800 rates with their speedups
over DeepSeek's CUTLASS 3.6-based kernels; those kernels' rate is tflops / speedup. The curve is
perfmodel's GEMM form (``perfmodel.spec.efficiency.saturating_gemm_efficiency``) fitted as
``calibration.fit_forms`` fits every GEMM sweep: least squares in relative time, soft-L1 at
``ROBUST_SCALE``, no per-kernel intercept (the table gives rates, not times). The result is the
``fp8_blockwise`` entry of the h100-sxm efficiencies (the H800 is its ``variant_of``).

    python -m calibration.blockwise_fp8
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from calibration.fit_forms import _relative_lsq
from perfmodel.spec.efficiency import saturating_gemm_efficiency
from perfmodel.spec.hardware import load_hardware

DATA = Path(__file__).resolve().parent / "data" / "deepgemm_h800.yaml"


def internal_rates(path: Path = DATA) -> tuple[np.ndarray, ...]:
    """(m, n, k, achieved fraction of the FP8 dense peak) of DeepSeek's CUTLASS 3.6 kernels."""
    doc = yaml.safe_load(path.read_text())
    peak = load_hardware(doc["hardware_id"]).gpu.peak_flop_per_s("fp8")
    rec = np.array(doc["records"], dtype=float)
    _, m, n, k, tflops, speedup = rec.T
    return m, n, k, tflops / speedup * 1e12 / peak


def fit_blockwise(path: Path = DATA) -> tuple[float, float]:
    """(efficiency_max, half_dim) of the block-wise FP8 curve."""
    m, n, k, eff = internal_rates(path)

    def resid(x):
        return eff / saturating_gemm_efficiency(m, n, k, x[0], x[1]) - 1.0   # t_model / t_measured - 1

    e, d = _relative_lsq(resid, [min(1.0, 1.05 * eff.max()), 100.0], [1e-6, 0.0], [1.0, 1e5], robust=True)
    return float(e), float(d)


if __name__ == "__main__":
    e, d = fit_blockwise()
    m, n, k, eff = internal_rates()
    model = saturating_gemm_efficiency(m, n, k, e, d)
    print(f"fp8_blockwise: efficiency_max {e:.4f}, half_dim {d:.2f}; "
          f"median |error| {100 * np.median(np.abs(model / eff - 1)):.1f}%")
