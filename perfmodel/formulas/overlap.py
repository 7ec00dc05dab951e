"""Communication/computation overlap, an explicit named input per traffic kind.

For each kind, with overlap fraction phi in [0, 1] and the compute it can hide behind
(its *window*):

    exposed = max(0, t_comm - phi * t_window)

phi = 0 gives the upper bound t_math + t_comm, phi = 1 the lower bound max(t_math, t_comm)
(STYLE.md point 9). Defaults follow how Megatron-Core / NeMo (and FSDP for ZeRO-3) run.

Hidden traffic is not free: a collective's kernels hold SMs (NCCL channels, DeepEP/HybridEP
blocks) that the compute beside it then lacks, so that compute runs ``1 + slowdown`` times
longer while the collective runs (``Efficiencies.overlap_compute_slowdown``). With
``sigma = slowdown / (1 + slowdown)``, the share of its rate the compute loses,

    exposed = max(t_comm - phi * t_window, sigma * t_comm)

The first term is the collective outlasting its window, the second the window stretched by
the collective beside it; phi = 0 still gives t_comm.

A stretch of compute hides one collective at a time: a collective that runs beside it for
``used = min(t_comm, phi * t_window)`` seconds leaves ``t_window - used`` to the next kind that
hides behind the same compute (``window_used_s``). In a layer, TP and CP traffic hide behind
their own GEMMs and attention first, EP traffic behind what they leave of the pass, FSDP
gathers behind what is left of both passes, and the step's data-parallel traffic behind what
is left of the last micro-batch's backward (``perfmodel.engine.evaluate``). So the hidden time never
exceeds the compute, and less compute can never make the step longer: exposing more traffic
costs at most the compute saved (the windows used to be counted once per kind, so faster
compute could expose CP and FSDP traffic at once, and a step could grow by up to one
window per extra kind).
"""

from __future__ import annotations

from dataclasses import replace

from perfmodel.formulas.scalars import filled, floats, maximum, minimum
from perfmodel.spec.software import Overlap


def exposed_s(t_comm, t_window, phi, slowdown=0.0):
    t_comm = floats(t_comm)
    sigma = slowdown / (1.0 + slowdown)
    return maximum(t_comm - phi * floats(t_window), sigma * t_comm)   # sigma * t_comm >= 0


def window_used_s(t_comm, t_window, phi):
    """Seconds of the compute ``t_window`` that a collective of ``t_comm`` with overlap ``phi``
    runs beside: min(t_comm, phi * t_window). The next collective hides behind the rest."""
    return minimum(floats(t_comm), phi * floats(t_window))


def tp_phi(overlap: Overlap, tp):
    if overlap.tp is not None:
        return filled(tp, overlap.tp)
    tp = floats(tp)
    return (tp - 1.0) / tp


def reserved_sm_scale(num_sms: int, reserved_sms: int) -> float:
    """How much longer compute takes on the SMs a framework leaves it when it reserves
    ``reserved_sms`` for communication (``SoftwareStack.moe_comm_reserved_sms``): num_sms /
    (num_sms - reserved). Work spread over fewer SMs takes proportionally longer."""
    if not 0 <= reserved_sms < num_sms:
        raise ValueError(f"software.moe_comm_reserved_sms({reserved_sms}) must be below the GPU's num_sms({num_sms})")
    return num_sms / (num_sms - reserved_sms)


def on_fewer_sms(times: tuple, scale: float) -> tuple:
    """Operation times (``perfmodel.formulas.compute.OpTime``) stretched by ``reserved_sm_scale``."""
    if scale == 1.0:
        return times
    fields = ("fwd_s", "bwd_s", "wgrad_s", "cast_fwd_s", "cast_bwd_s")
    return tuple(replace(t, **{f: scale * getattr(t, f) for f in fields}) for t in times)
