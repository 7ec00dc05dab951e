"""How a measured collective group spans scale-up domains, and what a multi-domain curve says
about the network.

==============  ===========================================================================
n, D            GPUs of the measured group; the domains it spanned
g = n / D       its GPUs per domain
tau_m           measured seconds per byte at large messages: factor(op, n) / busbw, busbw
                the fastest regime's (``fit_forms.fit_collective_group``)
tau(e)          the model's seconds per byte for the same group with the NICs at bus
                efficiency e (``perfmodel.formulas.comm.across_domains_s``, latencies left out)
e*              the NIC efficiency with tau(e*) = tau_m: ``scale_out_bus_efficiency``
==============  ===========================================================================

A nccl-tests log names the host of every rank. Where a host is a whole scale-up domain (HGX
and DGX nodes: the spec has no ``gpus_per_host``), D is the number of hosts; where a domain
spans hosts (NVL72 trays) the log cannot tell and D stays unknown.

A fit replaces the modelled time of the group it measured and of no other
(``CollectiveFit.describes``). What it says about the network reaches every other group through
e*: tau(e) falls as e rises until NVLink, not the NIC, limits the group; a curve measured in
that regime (tau_m at or below the NVLink floor tau(inf)) says nothing about the NICs, and e*
is not set.
"""

from __future__ import annotations

import numpy as np

from perfmodel.formulas.comm import Collective, Fabric, across_domains_s, bus_factor
from perfmodel.spec.efficiency import CollectiveFit
from perfmodel.spec.hardware import HardwareSpec

NETWORK_OPS = ("all_reduce", "all_gather", "reduce_scatter")
"""Collectives whose cross-domain part aggregates every NIC of the group (all-to-all does not)."""
LARGE_BYTES = 2.0**40
"""A message large enough that per-step latencies vanish from seconds per byte."""
MIN_EFFICIENCY = 1e-3


def record_domains(fabric: str, num_hosts: int | None, spec: HardwareSpec) -> int | None:
    """Domains a measured group spanned: 1 inside a domain; the hosts where a host is a domain."""
    if fabric == "scale_up":
        return 1
    if num_hosts and num_hosts >= 2 and spec.scale_up.gpus_per_host is None:
        return num_hosts
    return None


def _tau(op: Collective, n: int, domains: int, spec: HardwareSpec, up_busbw: float, out_busbw: float) -> float:
    g = n // domains
    up, out = Fabric(up_busbw, 0.0), Fabric(out_busbw, 0.0)
    t = across_domains_s(op, LARGE_BYTES, n, g, domains, up, out, spec.scale_up.in_network_reduction)
    return float(t) / LARGE_BYTES


def nic_efficiency(fits: tuple[CollectiveFit, ...], spec: HardwareSpec, scale_up_bus_efficiency: float):
    """e* of one measured group (module table), or (None, why) where its curve does not
    measure the NICs."""
    fit = fits[0]
    if fit.op not in NETWORK_OPS or fit.num_domains is None or fit.num_gpus % fit.num_domains:
        return None, "not a group of whole domains with a known count"
    op, n, d = Collective(fit.op), fit.num_gpus, fit.num_domains
    busbw = max(f.busbw_bytes_per_s for f in fits)
    tau_m = float(bus_factor(op, n)) / busbw
    up = spec.scale_up.bandwidth_bytes_per_s * scale_up_bus_efficiency
    line = spec.scale_out.bandwidth_bytes_per_s

    def tau(e):
        return _tau(op, n, d, spec, up, line * e)

    if tau_m <= tau(1e6) * (1 + 1e-9):
        return None, "the curve is NVLink-bound: it does not measure the NICs"
    if tau(1.0) >= tau_m:
        return 1.0, "faster than the line rate allows: held at 1"
    lo, hi = MIN_EFFICIENCY, 1.0
    for _ in range(60):                     # tau falls with e: bisection on log e
        mid = np.sqrt(lo * hi)
        lo, hi = (mid, hi) if tau(mid) > tau_m else (lo, mid)
    return float(hi), f"{fit.op} over {n} GPUs in {d} domains at {busbw / 1e9:.1f} GB/s busbw"
