"""The SM clock a long attention phase runs at under the GPU's power limit.

=============  ===========================================================================
r_0            ``Efficiencies.attention_clock_ratio``: the clock a power-capped step leaves
               the attention kernels, over the clock they were benchmarked at
T_c            one layer's attention kernels of one pass (forward or backward, every
               context-parallel ring step of it) timed at r_0, as ``compute`` prices them
tau            ``POWER_CONTROL_RESPONSE_S``: how long the power controller takes to raise
               the clock once the GEMMs stop
P_attn         ``ATTENTION_OWN_POWER_W``: the attention kernels' draw at their own clock
P_lim          ``hw.gpu.tdp_w``, the GPU's power limit
t              the phase's time: min(T_c, tau) + max(T_c - tau, 0) * r_0 where P_lim >= P_attn,
               else T_c
=============  ===========================================================================

In a step the GEMMs hold the GPU at its power limit and the clock it leaves (1,275-1,485 MHz on
a 700 W H100); a stretch of attention kernels alone draws less (611 W at 1,920 MHz), so the
controller raises the clock to theirs within about ``tau``. A short attention phase between
GEMMs runs at the capped clock throughout (r_0, as measured on the 8k step); one much longer
than tau runs at its own clock after the first tau seconds, and the work left after tau takes
r_0 of the time the capped clock would need. Where the limit is below P_attn (a 500 W H100) the
attention is capped too and nothing changes.

Source: calibration/results/nvidia-h100-80gb-hbm3-2026-11-27-long (README and
``clocks_long.csv``). In the 64k-token step the clock alternates every few 100 ms samples
between the GEMM level and 1,875-1,935 MHz in the attention phases, switching from one sample to
the next (05:10:51.271 1,440 MHz, .372 1,920 MHz): tau = one sample, an upper bound. The
in-step flash kernels ran at 0.95 (forward, 108 ms) and 0.98 (backward, 279 ms) of their
isolated rate at 64k, against 0.84-0.92 for the shorter ones (r_0 = 0.887).
"""

from __future__ import annotations

import numpy as np

from perfmodel.formulas.scalars import maximum, minimum
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.hardware import HardwareSpec

POWER_CONTROL_RESPONSE_S = 0.1
"""tau: the sampling interval of ``clocks_long.csv`` (nvidia-smi every 100 ms), over which the
SM clock moves between its GEMM and attention levels in one step (module docstring)."""
ATTENTION_OWN_POWER_W = 611.0
"""P_attn: median board power of the suite's attention group on the 700 W H100, at its 1,920 MHz
median clock (calibration/results/nvidia-h100-80gb-hbm3-2026-11-27-long/README.md, table of
``python -m calibration clocks``)."""


def attention_phase_s(capped_s, eff: Efficiencies, hw: HardwareSpec):
    """t: one layer's attention pass that takes ``capped_s`` at the capped clock (T_c), with the
    clock raised to the kernels' own after ``POWER_CONTROL_RESPONSE_S`` where the GPU's power
    limit allows it (module docstring)."""
    T_c = capped_s if isinstance(capped_s, float) else np.asarray(capped_s, dtype=float)
    r_0, tau = eff.attention_clock_ratio, POWER_CONTROL_RESPONSE_S
    if r_0 >= 1.0 or hw.gpu.tdp_w is None or hw.gpu.tdp_w < ATTENTION_OWN_POWER_W:
        return T_c
    return minimum(T_c, tau) + maximum(T_c - tau, 0.0) * r_0
