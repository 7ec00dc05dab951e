"""Pipeline schedules: 1F1B and interleaved 1F1B, with uneven stages.

========  ====================================================================
p         pipeline stages (pp)
v         virtual stages per rank (vpp)
m         micro-batches per step per pipeline = global_batch / (micro_batch * dp)
t_i       forward + backward time of one micro-batch on stage i
========  ====================================================================

Steady state runs at the slowest stage: m * max_i t_i. The fill and drain add the other
stages once, divided by v when interleaved (each fill step is one chunk of 1/v of a stage):

    bubble = (sum_i t_i - max_i t_i) / v

For equal stages this is (p - 1) * t / v, i.e. the bubble fraction (p - 1) / (v * m) of
Narayanan et al. 2021 (sec. 2.2). The transfers of fill and drain cannot overlap anything:
the first micro-batch's forward crosses all p * v model chunks in turn, so p * v - 1
activation sends lie on the critical path each way (interleaving shrinks the bubble by v
but multiplies the communication by v; Narayanan et al. 2021, sec. 2.2).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StageTimes:
    """Per-micro-batch times of the three representative stages (arrays over layouts)."""

    first_s: np.ndarray
    middle_s: np.ndarray
    last_s: np.ndarray


def slowest_stage_s(st: StageTimes, pp):
    pp = np.asarray(pp)
    return np.where(pp == 1, st.first_s, np.maximum(np.maximum(st.first_s, st.last_s),
                                                    np.where(pp > 2, st.middle_s, 0.0)))


def sum_stages_s(st: StageTimes, pp):
    pp = np.asarray(pp)
    return np.where(pp == 1, st.first_s, st.first_s + st.last_s + np.maximum(pp - 2, 0) * st.middle_s)


def bubble_from_stages_s(sum_s, max_s, vpp):
    """Fill and drain: every stage but the slowest once, in chunks of 1/v: (sum - max) / v."""
    return (np.asarray(sum_s) - np.asarray(max_s)) / np.asarray(vpp, dtype=float)


def bubble_s(st: StageTimes, pp, vpp):
    return bubble_from_stages_s(sum_stages_s(st, pp), slowest_stage_s(st, pp), vpp)


def bubble_fraction(pp, vpp, num_mb):
    """Ideal bubble fraction for equal stages, (p - 1) / (v * m)."""
    return (np.asarray(pp) - 1.0) / (np.asarray(vpp) * np.asarray(num_mb))


def fill_drain_transfers(pp, vpp=1):
    """Activation sends on the critical path of fill and drain: p * v - 1 each way (0 at p = 1)."""
    pp, vpp = np.asarray(pp), np.asarray(vpp)
    return np.where(pp > 1, 2 * (pp * vpp - 1), 0)
