"""A rail-optimised fat tree: its bill of materials, its power and capex, and the slow-down of
the traffic that crosses its oversubscribed leaf tier.

Notation:

=====  ===============================================================  ==========================
E      NIC ports (endpoints): N GPUs x NICs per GPU                      ``num_endpoints``
h      GPUs per host (a DGX/HGX node, a GB200 compute tray)              ``gpus_per_host``
r      rails: NIC ports per host, h x NICs per GPU                       ``num_rails``
k      switch radix (ports at the NIC's line rate)                       ``FabricSpec.switch_radix``
o      leaf oversubscription, downlink over uplink bandwidth             ``FabricSpec.oversubscription``
d, u   leaf downlinks and uplinks: d = floor(k o / (1 + o)), u = ceil(d / o)
H      hosts, ceil(N / h); a scalable unit (SU) is d hosts
L      leaves: r x ceil(H / d) (one leaf per rail per SU)
S2     spines: ceil(L u / k) with two tiers; ceil(L u / (k/2)) with three (half down, half up)
S3     core switches (three tiers): ceil(S2 (k/2) / k)
=====  ===============================================================  ==========================

Bill of materials (folded Clos, Leiserson 1985; NVIDIA DGX SuperPOD H100 reference architecture,
'Network Fabrics', table 4: 4 SUs, 1,024 GPUs = 32 leaves, 16 spines, 1,024 leaf-spine cables):

* cables: E (NIC-leaf) + L u (leaf-spine) + S2 (k/2) (spine-core, three tiers)
* switch ports in use: E + 2 L u (+ 2 S2 (k/2)); switch transceivers: ports / ports per
  transceiver (twin-port OSFP: 2); NIC transceivers: E / ports per transceiver
* power: switches x switch power (where known) + transceivers x their power

Crossing the leaf tier (rail-optimised: NIC i of every host of an SU sits on leaf i, so traffic
between the same rail of hosts in one SU stays on its leaf, one hop; NVIDIA's reference
architecture, 'Network Fabrics'). A group's members ``stride`` ranks apart (TP innermost) put
m = clip(d h / stride, 1, n) of its n GPUs, N_leaf = max(1, m / g) of its N scale-up domains,
under one leaf; of the network traffic between its domains a share

    f = (N - N_leaf) / (N - 1)

crosses the spine (the share of a domain's peers under other leaves). When every GPU sends at
once (the collectives of all DP, EP groups at the same time) a leaf's d downlinks each carry B
and its u = d / o uplinks carry the crossing share f d B, so the uplinks are the bottleneck once
f o > 1 (a fluid, max-min bottleneck model of the two links in series, pipelined): the network
part of the collective takes max(1, f o) times as long (``crossing_slowdown``); at f = 1 and
o = 2 the bandwidth halves, and below f = 1/o the oversubscription costs nothing. Point-to-point
sends between ranks ``stride`` apart (pipeline stages, context-parallel rings) cross in the
share f = min(1, stride / (d h)) of pairs. A crossing path takes two more switch hops per tier
above the leaf.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from perfmodel.spec.errors import InputError
from perfmodel.spec.fabric import FabricSpec
from perfmodel.spec.units import MICRO

HOPS_PER_TIER_CROSSED = 2
"""Up to the tier and back down: leaf -> spine -> leaf is two hops more than leaf alone."""


def host_gpus(hw) -> int:
    """h: GPUs per host, the unit whose NICs form the rails (a GB200 compute tray: 4; an HGX
    node: 8, its power unit)."""
    return hw.scale_up.gpus_per_host or hw.power.gpus_per_node


def leaf_ports(fabric: FabricSpec) -> tuple[int, int]:
    """(d, u): a leaf's downlinks and uplinks at oversubscription o: d = floor(k o / (1 + o)),
    u = ceil(d / o) (64 ports at 1:1: 32 and 32; at 2:1: 42 and 21). One tier: all k down
    (tiers None counts as more than one: ``for_job`` settles it)."""
    k, o = fabric.switch_radix, fabric.oversubscription
    if fabric.tiers == 1:
        return k, 0
    d = int(math.floor(k * o / (1.0 + o) + 1e-9))
    return d, int(math.ceil(d / o - 1e-9))


@dataclass(frozen=True)
class FabricBom:
    """Counts of one fabric, with its power and capex (None where no price or power is known)."""

    num_endpoints: int
    num_leaf_switches: int
    num_spine_switches: int
    num_core_switches: int
    num_cables: int
    num_switch_transceivers: int
    num_nic_transceivers: int
    optics_power_w: float
    switch_power_w: float | None
    """None: the switch's power is not known (``FabricSpec.switch_power_w``)."""
    capex_usd: float | None
    """None: a price is missing (switch, transceiver or cable)."""

    @property
    def num_switches(self) -> int:
        return self.num_leaf_switches + self.num_spine_switches + self.num_core_switches

    @property
    def num_transceivers(self) -> int:
        return self.num_switch_transceivers + self.num_nic_transceivers

    @property
    def power_w(self) -> float:
        """Optics, plus the switches where their power is known."""
        return self.optics_power_w + (self.switch_power_w or 0.0)

    def to_dict(self) -> dict:
        return {**self.__dict__, "num_switches": self.num_switches, "num_transceivers": self.num_transceivers,
                "power_w": self.power_w}


def for_job(fabric: FabricSpec, num_gpus: int, gpus_per_host: int, nics_per_gpu: float) -> FabricSpec:
    """``fabric`` with its tiers settled for a job of ``num_gpus``: two when they reach its NICs,
    else three, when none is given (one tier, rails joined only through NVLink, only when asked
    for); as given (checked) otherwise."""
    if fabric.tiers is not None:
        bill_of_materials(num_gpus, gpus_per_host, nics_per_gpu, fabric)
        return fabric
    two = fabric.model_copy(update={"tiers": 2})
    try:
        bill_of_materials(num_gpus, gpus_per_host, nics_per_gpu, two)
        return two
    except InputError:
        return fabric.model_copy(update={"tiers": 3})


def bill_of_materials(num_gpus: int, gpus_per_host: int, nics_per_gpu: float, fabric: FabricSpec) -> FabricBom:
    """Switches, cables and transceivers of a rail-optimised fat tree for ``num_gpus`` GPUs (module
    table); InputError when the tiers cannot reach them."""
    if fabric.tiers is None:
        fabric = for_job(fabric, num_gpus, gpus_per_host, nics_per_gpu)
    k = fabric.switch_radix
    E = int(math.ceil(num_gpus * nics_per_gpu - 1e-9))
    r = max(1, int(math.ceil(gpus_per_host * nics_per_gpu - 1e-9)))
    H = int(math.ceil(num_gpus / gpus_per_host))
    d, u = leaf_ports(fabric)
    if fabric.tiers > 1 and (d < 1 or u < 1 or d + u > k):
        raise InputError("fabric.oversubscription", f"a {k}-port leaf cannot split {fabric.oversubscription:g}:1 "
                                                    f"(downlinks {d}, uplinks {u})")
    L = r * int(math.ceil(H / d))
    S2 = S3 = U2 = 0
    U1 = L * u
    if fabric.tiers == 1 and H > d:
        raise InputError("fabric.tiers", f"one tier of {k}-port leaves reaches {k} hosts per rail; "
                                         f"{H:,} hosts need 2 tiers")
    if fabric.tiers == 2:
        S2 = int(math.ceil(U1 / k))
        if S2 > u:
            raise InputError("fabric.tiers", f"{L} leaves with {u} uplinks each need {S2} spines, more than a "
                                             f"leaf reaches ({u}); {E:,} NIC ports need 3 tiers")
    if fabric.tiers == 3:
        half = k // 2
        S2 = int(math.ceil(U1 / half))
        U2 = S2 * half
        S3 = int(math.ceil(U2 / k))
    cables = E + U1 + U2
    switch_ports = E + 2 * U1 + 2 * U2
    n_sw_x = int(math.ceil(switch_ports / fabric.switch_ports_per_transceiver))
    n_nic_x = int(math.ceil(E / fabric.nic_ports_per_transceiver))
    n_switches = L + S2 + S3
    optics_w = n_sw_x * fabric.switch_transceiver_power_w + n_nic_x * fabric.nic_transceiver_power_w
    switch_w = None if fabric.switch_power_w is None else n_switches * fabric.switch_power_w
    prices = (fabric.switch_usd, fabric.transceiver_usd, fabric.cable_usd)
    capex = None if any(p is None for p in prices) else (
        n_switches * fabric.switch_usd + (n_sw_x + n_nic_x) * fabric.transceiver_usd + cables * fabric.cable_usd)
    return FabricBom(E, L, S2, S3, cables, n_sw_x, n_nic_x, optics_w, switch_w, capex)


# --- traffic that crosses the leaf tier ---------------------------------------------------
def domains_per_leaf(stride, g_in, gpus_per_host: int, fabric: FabricSpec):
    """N_leaf: scale-up domains of a group (members ``stride`` ranks apart, ``g_in`` per domain)
    under one leaf's reach, d h GPUs (one SU)."""
    d, _ = leaf_ports(fabric)
    reach = d * gpus_per_host
    m = np.maximum(reach // np.maximum(np.asarray(stride, dtype=np.int64), 1), 1)
    return np.maximum(m // np.maximum(np.asarray(g_in, dtype=np.int64), 1), 1)


def cross_tier_share(n_domains, n_leaf):
    """f = (N - N_leaf) / (N - 1): the share of a group's network traffic that leaves the leaf
    (0 for one domain, or when every domain of the group sits under one leaf)."""
    N = np.asarray(n_domains, dtype=float)
    Nl = np.minimum(np.asarray(n_leaf, dtype=float), N)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(N > 1, (N - Nl) / np.maximum(N - 1.0, 1.0), 0.0)


def crossing_slowdown(share, oversubscription: float):
    """max(1, f o): the time of a collective's network part over the time on a non-blocking
    fabric, when a share f of every GPU's traffic crosses a tier with o:1 oversubscription."""
    return np.maximum(1.0, np.asarray(share, dtype=float) * oversubscription)


def pair_cross_share(stride, gpus_per_host: int, fabric: FabricSpec):
    """f = min(1, stride / (d h)): the share of rank pairs ``stride`` apart on different leaves."""
    d, _ = leaf_ports(fabric)
    return np.minimum(1.0, np.asarray(stride, dtype=float) / (d * gpus_per_host))


def crossing_latency_s(share, fabric: FabricSpec):
    """Latency a group's network step adds when some of its traffic crosses the leaf tier: two
    hops per tier above the leaf, the longest path (``hop_latency_us``; zero when no figure is given)."""
    tiers = fabric.tiers or 2
    if fabric.hop_latency_us is None or tiers == 1:
        return np.zeros_like(np.asarray(share, dtype=float))
    extra_hops = HOPS_PER_TIER_CROSSED * (tiers - 1)
    return np.where(np.asarray(share, dtype=float) > 0, extra_hops * fabric.hop_latency_us * MICRO, 0.0)


# --- what the job pays for its fabric -------------------------------------------------------
@dataclass(frozen=True)
class FabricShare:
    """A job's fabric in money and energy (``perfmodel.formulas.cost.job_cost``)."""

    power_w: float
    """Optics, and switches where their power is known: drawn whenever the job runs."""
    capex_usd: float | None
    """The fabric's purchase price; None without every price."""


def with_fabric(hw, fabric: FabricSpec | None):
    """``hw`` with ``fabric`` as its scale-out's network (``hw`` itself for None)."""
    if fabric is None:
        return hw
    return hw.model_copy(update={"scale_out": hw.scale_out.model_copy(update={"fabric": fabric})})


def job_fabric(num_gpus: int, hw) -> FabricShare | None:
    """The fabric of ``hw``'s scale-out (a scenario's ``fabric``, bound to the job) for
    ``num_gpus`` GPUs; None without one."""
    fab = hw.scale_out.fabric
    if fab is None:
        return None
    bom = bill_of_materials(int(num_gpus), host_gpus(hw), hw.scale_out.nics_per_gpu, fab)
    return FabricShare(bom.power_w, bom.capex_usd)
