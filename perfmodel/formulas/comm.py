"""Collective communication: alpha-beta times on a two-level topology.

==================  ==================================================================
n                   GPUs in the collective's group
S                   message size in bytes (the whole buffer, nccl-tests convention)
B                   achieved bus bandwidth per GPU, per direction (link x bus efficiency)
alpha               latency of one algorithm step on a fabric (calibrated, per step)
steps(op, n)        ring steps: all-reduce 2(n-1); all-gather, reduce-scatter, all-to-all
                    n-1; send/recv 1; tree all-reduce 2 * ceil(log2 n) (Sanders et al. 2009)
factor(op, n)       bytes each GPU must move per byte of S (nccl-tests PERFORMANCE.md):
                    all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n;
                    send/recv 1
t(op, S, n)         steps * alpha + factor(op, n) * S / B  (Hockney 1994; Thakur et al. 2005)
==================  ==================================================================

Groups are mapped onto the machine with tensor parallelism innermost, then context,
expert, data and pipeline parallelism (Megatron-Core's rank order). A group whose GPUs all
sit in one scale-up domain (NVLink: 8 GPUs, or 72 for NVL72) runs at scale-up speed. A group
of n GPUs that spans N domains, g_in of them in each, runs NCCL's algorithms across domains
(``across_domains_s``), with these symbols:

==================  ==================================================================
g, N                the group's GPUs per domain (g_in) and the domains it spans (n_out)
B_up, B_out         busbw of one GPU's NVLink and of one GPU's NIC(s), per direction
ring                one ring threads all n GPUs; each channel enters and leaves a domain
                    through one NIC, and the channels are spread over the g NICs of the
                    group in each domain (rail-optimised: NIC i on rail i, NCCL's graph
                    search and PXN). Per GPU, a share (g - 1)/g of the ring's traffic goes
                    over NVLink and 1/g over the NIC, at the same time (NCCL pipelines
                    chunks through the ring, so the slower link sets the pace, not the sum):
                    t = steps * alpha + factor(op, n) * S * max((g-1)/(g B_up), 1/(g B_out))
tree (all-reduce)   chain inside each domain, double binary tree across domains (Sanders
                    et al. 2009; NVIDIA/nccl src/graph/trees.cc): each domain sends and
                    receives load(N) * S over its g NICs, load(N) = min(2, N/2) (1 for two
                    domains, 1.5 for three, 2 from four on: the busiest node of the two
                    trees); t = 2((g-1) alpha_up + ceil(log2 N) alpha_out)
                    + S * max(2(g-1)/(g B_up), load(N)/(g B_out))
NVLS-tree           the tree with the intra-domain phase reduced in the NVSwitch (NVLink
                    SHARP, H100 and later): intra bandwidth x NVLS_ALLREDUCE_GAIN, one
                    intra step each way (NCCL tuning.cc: NVLS_TREE latency = intra +
                    2 log2(nNodes) inter)
==================  ==================================================================

All-gather and reduce-scatter across domains run as rings (NCCL runs NVLS and CollNet for
them only with in-network reduction in the network itself, IB SHARP). All-reduce runs the
fastest of ring, tree and (with in-switch reduction) NVLS-tree: NCCL's tuner picks per size
from its own latency + size / bandwidth model (src/graph/tuning.cc), rings at mid sizes on few
domains, trees for latency at scale. With one NIC per GPU at 400 Gb/s and 8 GPUs per domain
either gives a busbw of about 8 x 46 = 370 GB/s across nodes, what NCCL reaches on H100
(NVIDIA GTC 2024 S62129, quoted in NVIDIA/nccl issue #1649: multi-node all-reduce busbw
about 380 GB/s, 370-380 with NVLS-tree). All-to-all
cannot aggregate NICs across domains (REFERENCES.md, NCCL maintainers): its cross-domain
part runs at one NIC per GPU.

A domain may span racks (``ScaleUpSpec.gpus_per_rack``: eight NVL72 racks joined by a second
tier of NVLink switches). NVIDIA's NVLink Switch joins racks at full speed, so such a group is
one flat NVLink group; where a spec gives the tier less bandwidth per GPU than the GPUs' own
links (a taper), what leaves a rack is limited by it (``across_racks_s``).

Every function broadcasts over numpy arrays of group sizes and message sizes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from perfmodel.formulas.fabric import (
    cross_tier_share,
    crossing_latency_s,
    crossing_slowdown,
    domains_per_leaf,
    host_gpus,
    pair_cross_share,
)
from perfmodel.formulas.scalars import all_of, any_of, filled, floats, ints, maximum, minimum, where, zeros_of
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.hardware import HardwareSpec


class Collective(enum.Enum):
    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_TO_ALL = "all_to_all"
    SEND_RECV = "send_recv"


class Algorithm(enum.Enum):
    RING = "ring"
    TREE = "tree"
    NVLS = "nvls"   # NVLink SHARP: reduction in the NVSwitch (H100 and later)
    NVLS_TREE = "nvls_tree"   # NVLS inside each domain, a tree across domains (NCCL 2.18+)


NVLS_ALLREDUCE_GAIN = 480.0 / 370.0
"""NVLS over ring all-reduce busbw on H100 NVLink4: about 480 vs 370 GB/s at large sizes
(REFERENCES.md 'Collectives'; shared/data/microbenchmarks.yaml nccl_expert_h100_nvls_all_reduce)."""


def bus_factor(op: Collective, n):
    """Bytes moved per GPU per byte of S (nccl-tests busbw conventions)."""
    n = floats(n)
    if op is Collective.ALL_REDUCE:
        return 2.0 * (n - 1.0) / n
    if op is Collective.SEND_RECV:
        return filled(n, 1.0)
    return (n - 1.0) / n


def latency_steps(op: Collective, n, algorithm: Algorithm = Algorithm.RING):
    """Algorithm steps that each pay one alpha."""
    n = floats(n)
    if op is Collective.SEND_RECV:
        return filled(n, 1.0)
    if algorithm is Algorithm.TREE:
        return 2.0 * np.ceil(np.log2(maximum(n, 2.0)))
    ring = n - 1.0
    return 2.0 * ring if op is Collective.ALL_REDUCE else ring


def ring_intra_steps(n, n_domains):
    """Intra-domain steps of one ring through n GPUs in n_domains domains: n - n_domains.

    NCCL's ring all-gather and reduce-scatter take n - 1 steps whatever the topology;
    n_domains - 1 of them cross the network, the rest stay on NVLink (NVIDIA/nccl
    src/graph/tuning.cc, commit 5067397: ring latency = (nsteps - nInterSteps) * intraLat
    + nInterSteps * interLat, nInterSteps = nNodes - 1 for all-gather/reduce-scatter)."""
    return floats(n) - floats(n_domains)


TREE_MAX_LOAD = 2.0
"""Bytes a node of NCCL's double binary tree sends (and receives) per byte of an all-reduce,
at most: as an inner node of one tree it takes S/2 from each of two children, passes S/2 up
and S/2 down to each child; as a leaf of the other it sends and receives S/2 (NVIDIA/nccl
src/graph/trees.cc ncclGetDtree). It is NCCL's tree model: algorithm bandwidth = 0.5 x link
bandwidth (src/graph/tuning.cc, commit 5067397, ``ratio *= .5`` for Tree)."""


def tree_load(n_domains):
    """Bytes per byte of S the busiest domain of a double binary tree sends each way:
    min(2, N/2). Two domains form one edge per tree (S/2 each way in each: S); in three the
    root of one tree has two children and is a leaf of the other (1.5 S); from four on some
    node is an inner node of one tree and a leaf of the other (2 S). Counted over NCCL's
    ncclGetDtree for N = 2..1024 (test_comm)."""
    return minimum(TREE_MAX_LOAD, floats(n_domains) / 2.0)


@dataclass(frozen=True)
class Fabric:
    """Achieved bus bandwidth (per GPU, per direction) and per-step latency of one fabric."""

    busbw_bytes_per_s: float
    latency_s: float


def scale_up_fabric(hw: HardwareSpec, eff: Efficiencies) -> Fabric:
    return Fabric(hw.scale_up.bandwidth_bytes_per_s * eff.scale_up_bus_efficiency, eff.scale_up_latency_s)


def scale_out_fabric(hw: HardwareSpec, eff: Efficiencies) -> Fabric:
    return Fabric(hw.scale_out.bandwidth_bytes_per_s * eff.scale_out_bus_efficiency, eff.scale_out_latency_s)


def flat_time_s(op: Collective, size_bytes, n, fabric: Fabric, algorithm: Algorithm = Algorithm.RING):
    """One collective inside a single fabric. Zero when n == 1."""
    n = floats(n)
    size_bytes = floats(size_bytes)
    bw = fabric.busbw_bytes_per_s
    if algorithm is Algorithm.NVLS and op is Collective.ALL_REDUCE:
        bw = bw * NVLS_ALLREDUCE_GAIN
    steps_alg = Algorithm.RING if algorithm is Algorithm.NVLS else algorithm
    t = latency_steps(op, n, steps_alg) * fabric.latency_s + bus_factor(op, n) * size_bytes / bw
    return where(n > 1, t, 0.0)


def group_domains(n, stride, domain_size: int):
    """(g_in, n_out): GPUs of a group of n (members ``stride`` ranks apart) inside one
    scale-up domain, and the number of domains the group spans (rounded up: 128 GPUs over
    domains of 72 span two)."""
    n = ints(n)
    g_in = maximum(domain_size // maximum(ints(stride), 1), 1)
    g_in = minimum(g_in, n)
    return g_in, maximum(-(-n // g_in), 1)


def group_time_s(op: Collective, size_bytes, n, stride, hw: HardwareSpec, eff: Efficiencies,
                 network_bytes=None):
    """A collective over a group of n GPUs whose members are ``stride`` ranks apart.

    ``stride`` is the product of the degrees placed inside this one (TP innermost).
    ``network_bytes`` (all-to-all only): the bytes each GPU sends across domains when the
    group spans them, where the algorithm sends fewer than the plain all-to-all's
    S * (n - g_in) / n (hierarchical MoE dispatch, ``traffic.ep_layer_s``).
    """
    n = ints(n)
    size = floats(size_bytes)
    if not any_of(n > 1):   # no group of two or more: no collective (as np.where below gives it)
        return zeros_of(n, stride, size, network_bytes)
    up, out = scale_up_fabric(hw, eff), scale_out_fabric(hw, eff)
    g_in, n_out = group_domains(n, stride, hw.scale_up.domain_size)
    inside = n_out == 1
    nvls = Algorithm.NVLS if hw.scale_up.in_network_reduction else Algorithm.RING
    # A branch no row takes is not worked out (np.where below gives the same shape and values).
    all_inside, none_inside = all_of(inside), not any_of(inside)
    t_inside = 0.0 if none_inside else across_racks_s(op, size, n, stride, hw, eff,
                                                      flat_time_s(op, size, n, up, nvls))
    if not all_inside:
        out = through_fabric(out, hw, stride, g_in, n_out)
    if all_inside:
        t_span = 0.0
    elif op is Collective.ALL_TO_ALL:
        # Intra-domain share at NVLink speed, cross-domain share through one NIC per GPU.
        if network_bytes is None:
            network_bytes = size * (n - g_in) / maximum(n, 1)
        t_span = ((g_in - 1) * up.latency_s + (n_out - 1) * out.latency_s
                  + maximum(size * (g_in - 1) / maximum(n, 1) / up.busbw_bytes_per_s,
                               floats(network_bytes) / out.busbw_bytes_per_s))
    elif op is Collective.SEND_RECV:
        t_span = flat_time_s(op, size, 2, out)
    else:
        t_span = across_domains_s(op, size, n, g_in, n_out, up, out, hw.scale_up.in_network_reduction)
    t = _apply_measured(op, size, n, n_out, eff, where(inside, t_inside, t_span))
    return where(n > 1, t, 0.0)


def through_fabric(out: Fabric, hw: HardwareSpec, stride, g_in, n_out) -> Fabric:
    """The scale-out fabric as a group spanning ``n_out`` domains (``g_in`` GPUs in each, members
    ``stride`` ranks apart) sees it through the scale-out's oversubscribed leaf tier
    (``perfmodel.formulas.fabric``): busbw / max(1, f o) and the crossing hops' latency, with
    f the share of its traffic that leaves a leaf. ``out`` itself without a fabric."""
    fab = hw.scale_out.fabric
    if fab is None:
        return out
    f = cross_tier_share(n_out, domains_per_leaf(stride, g_in, host_gpus(hw), fab))
    return Fabric(out.busbw_bytes_per_s / crossing_slowdown(f, fab.oversubscription),
                  out.latency_s + crossing_latency_s(f, fab))


def across_racks_s(op: Collective, size_bytes, n, stride, hw: HardwareSpec, eff: Efficiencies, t_flat):
    """A group inside one domain that spans racks joined by a tapered tier of switches
    (``ScaleUpSpec.inter_rack_bandwidth_per_direction_gb_per_s``): what leaves a rack goes through
    its g_r GPUs' share B_r of that tier, at the same time as the GPUs' own links carry the
    rest (t_flat). Ring collectives send factor(op, n) S out of each rack, all-to-all sends each
    GPU's (n - g_r)/n S: t = max(t_flat, steps * alpha + crossing). Without a taper, ``t_flat``."""
    su = hw.scale_up
    if su.gpus_per_rack is None or su.inter_rack_bandwidth_per_direction_gb_per_s is None:
        return t_flat
    n = ints(n)
    size = floats(size_bytes)
    g_r, n_racks = group_domains(n, stride, min(su.gpus_per_rack, su.domain_size))
    B_r = su.inter_rack_bandwidth_bytes_per_s * eff.scale_up_bus_efficiency
    if op is Collective.ALL_TO_ALL:
        crossing = size * (n - g_r) / maximum(n, 1) / B_r
    else:
        crossing = bus_factor(op, n) * size / (g_r * B_r)
    latency = latency_steps(op, n) * eff.scale_up_latency_s
    return where(n_racks > 1, maximum(t_flat, latency + crossing), t_flat)


def across_domains_s(op: Collective, size_bytes, n, g_in, n_out, up: Fabric, out: Fabric, nvls: bool,
                     algorithm: Algorithm | None = None):
    """All-reduce, all-gather or reduce-scatter of S over n GPUs, g_in in each of n_out domains
    (module table: ring, tree, NVLS-tree). ``algorithm`` None: the fastest NCCL would run
    (rings only for all-gather and reduce-scatter; NVLS-tree only where ``nvls``)."""
    S = floats(size_bytes)
    n, g, N = (floats(x) for x in (n, g_in, n_out))
    passes = 2.0 if op is Collective.ALL_REDUCE else 1.0   # reduce-scatter then all-gather
    ring = (passes * (ring_intra_steps(n, N) * up.latency_s + (N - 1.0) * out.latency_s)
            + bus_factor(op, n) * S * maximum((g - 1.0) / (g * up.busbw_bytes_per_s),
                                                 1.0 / (g * out.busbw_bytes_per_s)))
    if op is not Collective.ALL_REDUCE or algorithm is Algorithm.RING:
        return ring
    hops_out = np.ceil(np.log2(maximum(N, 2.0)))
    network = tree_load(N) / (g * out.busbw_bytes_per_s)
    chain = 2.0 * (g - 1.0) / (g * up.busbw_bytes_per_s)
    tree = 2.0 * ((g - 1.0) * up.latency_s + hops_out * out.latency_s) + S * maximum(chain, network)
    if algorithm is Algorithm.TREE:
        return tree
    nvls_tree = (2.0 * (minimum(g - 1.0, 1.0) * up.latency_s + hops_out * out.latency_s)
                 + S * maximum(chain / NVLS_ALLREDUCE_GAIN, network))
    if algorithm is Algorithm.NVLS_TREE:
        return nvls_tree
    best = minimum(ring, tree)
    return minimum(best, nvls_tree) if nvls else best


FEW_ROWS = 64
"""Up to this many layouts, ``_apply_measured`` groups them in Python (``predict``: one)."""


def _apply_measured(op: Collective, size, n, n_domains, eff: Efficiencies, t_default):
    """The calibrated time where a fit measured this group: same op, n GPUs over n_domains
    domains (``CollectiveFit.describes``); the modelled time elsewhere.

    Several fits of one group are regimes of one measured curve (NCCL protocols and
    algorithms); the collective runs in the fastest: t = min_i(latency_i + factor*S/busbw_i).
    """
    fits = [f for f in eff.collectives if f.op == op.value]
    if not fits:
        return t_default
    if not any(isinstance(x, np.ndarray) for x in (size, n, n_domains, t_default)):   # one layout's group
        mine = [f for f in fits if f.describes(int(n), int(n_domains))]
        return _fastest(op, mine, int(n), size) if mine else t_default
    n, n_domains, size, t = np.broadcast_arrays(np.asarray(n), np.asarray(n_domains),
                                                np.asarray(size, dtype=float), np.asarray(t_default, dtype=float))
    pairs = np.stack([n.ravel(), n_domains.ravel()], axis=1)
    # distinct (n, n_domains) groups; each writes only its own rows, so their order is free. A few
    # rows (predict) are grouped in Python: np.unique costs 40 us and imports numpy.ma (9 ms).
    groups = set(map(tuple, pairs.tolist())) if len(pairs) <= FEW_ROWS else np.unique(pairs, axis=0).tolist()
    for num_gpus, num_domains in groups:
        mine = [f for f in fits if f.describes(num_gpus, num_domains)]
        if mine:
            t = np.where((n == num_gpus) & (n_domains == num_domains), _fastest(op, mine, num_gpus, size), t)
    return t


def _fastest(op: Collective, fits: list, num_gpus: int, size):
    """min_i(latency_i + factor * S / busbw_i) over the fits of one group (``_apply_measured``)."""
    return np.min([f.latency_s + bus_factor(op, num_gpus) * size / f.busbw_bytes_per_s for f in fits], axis=0)


def p2p_time_s(size_bytes, crosses_domain, stride, hw: HardwareSpec, eff: Efficiencies):
    """Point-to-point send/recv between ranks ``stride`` apart (neighbouring pipeline stages, a
    context-parallel ring); over the network through the fabric where one is bound
    (``perfmodel.formulas.fabric.pair_cross_share``)."""
    up, out = scale_up_fabric(hw, eff), scale_out_fabric(hw, eff)
    fab = hw.scale_out.fabric
    if fab is not None:
        f = pair_cross_share(stride, host_gpus(hw), fab)
        out = Fabric(out.busbw_bytes_per_s / crossing_slowdown(f, fab.oversubscription),
                     out.latency_s + crossing_latency_s(f, fab))
    size = floats(size_bytes)
    t_up = up.latency_s + size / up.busbw_bytes_per_s
    t_out = out.latency_s + size / out.busbw_bytes_per_s
    return where(crosses_domain, t_out, t_up)
