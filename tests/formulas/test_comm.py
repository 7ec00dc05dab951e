"""Collective formulas (STYLE tier 1) and the nccl-tests anchors (tier 2)."""

import numpy as np
import pytest
import yaml

from perfmodel.formulas.comm import (
    NVLS_ALLREDUCE_GAIN,
    Algorithm,
    Collective,
    Fabric,
    across_domains_s,
    bus_factor,
    flat_time_s,
    group_time_s,
    latency_steps,
    scale_out_fabric,
    scale_up_fabric,
    tree_load,
)
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.software import SoftwareStack

GB = 1e9


def test_bus_factors_follow_nccl_tests():
    assert bus_factor(Collective.ALL_REDUCE, 8) == pytest.approx(2 * 7 / 8)
    assert bus_factor(Collective.ALL_GATHER, 8) == pytest.approx(7 / 8)
    assert bus_factor(Collective.REDUCE_SCATTER, 4) == pytest.approx(3 / 4)
    assert bus_factor(Collective.SEND_RECV, 2) == pytest.approx(1.0)


def test_ring_all_reduce_by_hand():
    fab = Fabric(busbw_bytes_per_s=100 * GB, latency_s=1e-6)
    # 2(n-1) alpha + 2(n-1)/n S/B with n = 4, S = 1 GB: 6 us + 1.5 * 10 ms
    t = flat_time_s(Collective.ALL_REDUCE, 1 * GB, 4, fab)
    assert t == pytest.approx(6e-6 + 1.5 * 0.01)


def test_ring_all_gather_approaches_size_over_bandwidth():
    fab = Fabric(busbw_bytes_per_s=100 * GB, latency_s=0.0)
    ts = [float(flat_time_s(Collective.ALL_GATHER, 1 * GB, n, fab)) for n in (2, 8, 64, 1024)]
    assert ts == sorted(ts)
    assert ts[-1] == pytest.approx(0.01, rel=1e-3)


def test_group_of_one_costs_nothing():
    hw = load_hardware("h100-sxm")
    for op in Collective:
        assert float(group_time_s(op, 1e9, 1, 1, hw, hw.efficiency)) == 0.0


def test_tree_latency_grows_logarithmically():
    assert latency_steps(Collective.ALL_REDUCE, 1024, Algorithm.TREE) == pytest.approx(20)
    assert latency_steps(Collective.ALL_REDUCE, 1024, Algorithm.RING) == pytest.approx(2046)


def test_group_inside_domain_uses_nvlink_and_across_uses_nics():
    hw = load_hardware("h100-sxm")
    eff = hw.efficiency
    S = 1e9
    inside = float(group_time_s(Collective.ALL_GATHER, S, 8, 1, hw, eff))
    across = float(group_time_s(Collective.ALL_GATHER, S, 8, 8, hw, eff))   # one GPU per node
    up, out = scale_up_fabric(hw, eff), scale_out_fabric(hw, eff)
    assert inside == pytest.approx(7 * up.latency_s + 7 / 8 * S / up.busbw_bytes_per_s)
    assert across > inside
    assert across == pytest.approx(7 * out.latency_s + 7 / 8 * S / out.busbw_bytes_per_s)   # ring across nodes


def _fabrics(hw_id="h100-sxm"):
    hw = load_hardware(hw_id)
    return hw, hw.efficiency, scale_up_fabric(hw, hw.efficiency), scale_out_fabric(hw, hw.efficiency)


def test_all_reduce_across_nodes_runs_the_fastest_of_ring_tree_and_nvls_tree():
    """64 H100 (8 nodes x 8), data parallel without TP, S = 8 GB. By hand, per algorithm:
    ring: 2 (56 alpha_up + 7 alpha_out) + 2 * 63/64 * S * max(7/(8 B_up), 1/(8 B_out));
    tree: 2 (7 alpha_up + 3 alpha_out) + S * max(2 * 7/(8 B_up), 2/(8 B_out));
    NVLS-tree: 2 (1 alpha_up + 3 alpha_out) + S * max(2 * 7/(8 B_up gain), 2/(8 B_out)).
    The group takes the fastest (H100 has NVLink SHARP)."""
    hw, eff, up, out = _fabrics()
    S, n = 8e9, 64
    Bu, Bo, au, ao = up.busbw_bytes_per_s, out.busbw_bytes_per_s, up.latency_s, out.latency_s
    ring = 2 * (56 * au + 7 * ao) + 2 * 63 / 64 * S * max(7 / (8 * Bu), 1 / (8 * Bo))
    tree = 2 * (7 * au + 3 * ao) + S * max(2 * 7 / (8 * Bu), 2 / (8 * Bo))
    nvls_tree = 2 * (au + 3 * ao) + S * max(2 * 7 / (8 * Bu * NVLS_ALLREDUCE_GAIN), 2 / (8 * Bo))
    for alg, want in ((Algorithm.RING, ring), (Algorithm.TREE, tree), (Algorithm.NVLS_TREE, nvls_tree)):
        assert float(across_domains_s(Collective.ALL_REDUCE, S, n, 8, 8, up, out, True, alg)) == pytest.approx(want)
    t = float(group_time_s(Collective.ALL_REDUCE, S, n, 1, hw, eff))
    assert t == pytest.approx(min(ring, tree, nvls_tree))


def test_phases_run_at_once_so_the_slower_link_sets_the_pace():
    """Pipelined, not summed: with an NVLink 1000x faster the ring all-gather over 4 nodes x 8
    takes its network share alone, 31/32 * S / (8 B_out); with a network 1000x faster, its
    NVLink share alone, 31/32 * S * 7/8 / B_up (latencies set to zero)."""
    S, n = 4e9, 32
    slow, fast = Fabric(50e9, 0.0), Fabric(50e12, 0.0)
    t_net = float(across_domains_s(Collective.ALL_GATHER, S, n, 8, 4, fast, slow, False))
    t_nvl = float(across_domains_s(Collective.ALL_GATHER, S, n, 8, 4, slow, fast, False))
    assert t_net == pytest.approx(31 / 32 * S / (8 * 50e9))
    assert t_nvl == pytest.approx(31 / 32 * S * 7 / 8 / 50e9)
    both = float(across_domains_s(Collective.ALL_GATHER, S, n, 8, 4, slow, slow, False))
    assert both == pytest.approx(max(t_net, t_nvl)) and both < t_net + t_nvl


def _nccl_btree(nranks, rank):
    """NVIDIA/nccl src/graph/trees.cc ncclGetBtree (commit 5067397), line by line: (up, children)."""
    bit = 1
    while bit < nranks:
        if bit & rank:
            break
        bit <<= 1
    if rank == 0:
        return -1, [bit >> 1] if nranks > 1 else []
    up = (rank ^ bit) | (bit << 1)
    if up >= nranks:
        up = rank ^ bit
    lowbit = bit >> 1
    down0 = -1 if lowbit == 0 else rank - lowbit
    down1 = -1 if lowbit == 0 else rank + lowbit
    while down1 >= nranks:
        down1 = -1 if lowbit == 0 else rank + lowbit
        lowbit >>= 1
    return up, [d for d in (down0, down1) if d != -1]


def _nccl_dtree(nranks, rank):
    """ncclGetDtree: the btree, and its mirror (even nranks) or its shift by one (odd)."""
    first = _nccl_btree(nranks, rank)
    if nranks % 2:
        u, ds = _nccl_btree(nranks, (rank - 1 + nranks) % nranks)
        second = (-1 if u == -1 else (u + 1) % nranks, [(d + 1) % nranks for d in ds])
    else:
        u, ds = _nccl_btree(nranks, nranks - 1 - rank)
        second = (-1 if u == -1 else nranks - 1 - u, [nranks - 1 - d for d in ds])
    return first, second


@pytest.mark.parametrize("n_domains", [2, 3, 4, 5, 7, 8, 13, 16, 64, 255, 256, 1000])
def test_tree_load_is_the_busiest_node_of_nccls_double_binary_tree(n_domains):
    """Each tree carries S/2; a node sends S/2 to its parent and S/2 to each child (and
    receives as much), so its bytes per byte of S are (links in tree 1 + links in tree 2) / 2."""
    busiest = max(sum((up != -1) + len(children) for up, children in _nccl_dtree(n_domains, r)) / 2
                  for r in range(n_domains))
    assert float(tree_load(n_domains)) == busiest


@pytest.mark.parametrize("op", [Collective.ALL_GATHER, Collective.REDUCE_SCATTER])
def test_ring_across_nodes_pays_a_latency_per_gpu_not_per_node(op):
    """NCCL's ring through 4 nodes x 8 GPUs: 31 steps, 3 across the network, 28 on NVLink; each
    GPU sends 31/32 S, 7/8 of it over NVLink and 1/8 over its NIC, at once."""
    hw, eff, up, out = _fabrics()
    S, n = 4e9, 32
    t = float(group_time_s(op, S, n, 1, hw, eff))
    bandwidth = 31 / 32 * S * max(7 / 8 / up.busbw_bytes_per_s, 1 / 8 / out.busbw_bytes_per_s)
    assert t == pytest.approx(28 * up.latency_s + 3 * out.latency_s + bandwidth)
    # the latency grows with the GPUs in the ring: 64 nodes pay 512 - 64 = 448 NVLink steps, not 7
    t_small = float(group_time_s(op, 1.0, 512, 1, hw, eff))
    assert t_small == pytest.approx(448 * up.latency_s + 63 * out.latency_s, rel=1e-6)


def test_all_to_all_cannot_aggregate_nics():
    hw = load_hardware("h100-sxm")
    eff = hw.efficiency
    S = 1e9
    t16 = float(group_time_s(Collective.ALL_TO_ALL, S, 16, 1, hw, eff))
    out = scale_out_fabric(hw, eff)
    # half of the data leaves the node through one NIC per GPU
    assert t16 >= 0.5 * S / out.busbw_bytes_per_s


def _curve(record_id):
    data = yaml.safe_load(open("calibration/data/microbenchmarks.yaml"))
    return next(r for r in data["microbenchmarks"] if r["id"] == record_id)


@pytest.mark.parametrize("record_id,hw_id,rel", [
    ("nccl_allreduce_8gpu_h100", "h100-sxm", 0.10),
    ("nccl_allreduce_8gpu_a100", "a100-sxm-80gb", 0.10),
])
def test_large_message_busbw_matches_nccl_tests(record_id, hw_id, rel):
    """Azure AI-benchmarking-guide nccl-tests all_reduce_perf, 8 GPUs, sizes >= 1 GiB."""
    hw = load_hardware(hw_id)
    rec = _curve(record_id)
    for pt in rec["points"]:
        S = pt["size_bytes"]
        if S < 2**30:
            continue
        t = float(group_time_s(Collective.ALL_REDUCE, S, 8, 1, hw, hw.efficiency))
        busbw = S / t * 2 * 7 / 8 / GB
        assert busbw == pytest.approx(pt["busbw_GBps"], rel=rel)


def test_nvls_gain_is_the_published_ratio():
    assert NVLS_ALLREDUCE_GAIN == pytest.approx(480 / 370)


def test_remote_domains_per_token_is_hypergeometric():
    """E experts over m domains, k distinct experts per token, uniform routing: each of the
    m - 1 other domains is reached unless all k experts miss it, C(E - E/m, k) / C(E, k)."""
    from math import comb

    from perfmodel.formulas.traffic import remote_domains_per_token
    assert float(remote_domains_per_token(256, 8, 4)) == pytest.approx(3 * (1 - comb(192, 8) / comb(256, 8)))
    assert float(remote_domains_per_token(256, 8, 1)) == 0.0
    # one expert per token reaches another domain with probability (m - 1) / m
    assert float(remote_domains_per_token(64, 1, 8)) == pytest.approx(7 / 8)
    # when the experts outside a domain number fewer than k, that domain cannot be missed
    assert float(remote_domains_per_token(12, 8, 2)) == 1.0
    assert float(remote_domains_per_token(16, 8, 2)) == pytest.approx(1 - 1 / comb(16, 8))
    # never more domains than copies or than other domains
    r = remote_domains_per_token(128, 8, np.asarray([2, 4, 16, 64]))
    assert all(r <= np.asarray([1, 3, 8, 8]) + 1e-12)


def _ep_layer(dispatcher, ep, num_gpus=64):
    from perfmodel.engine.rules import resolve
    from perfmodel.formulas.traffic import ep_layer_s
    from perfmodel.spec.scenario import parse_scenario
    from perfmodel.spec.software import SoftwareStack
    sc = parse_scenario(dict(hardware="h100-sxm", num_gpus=num_gpus, model="deepseek-v3", seq_length=4096,
                             global_batch_size=num_gpus, parallelism=dict(tp=1, pp=1, ep=ep)))
    r = resolve(sc)
    job, L = r.job, r.layouts
    hw = job.hardware
    stack = SoftwareStack(moe_dispatcher=dispatcher)
    return float(ep_layer_s(job.model, L, 4096, hw, hw.efficiency, stack)[0]), job, L


def test_flex_dispatch_is_the_same_all_to_all_inside_one_domain():
    assert _ep_layer("flex", 8)[0] == _ep_layer("alltoall", 8)[0]


def test_flex_dispatch_crosses_the_network_once_per_remote_domain():
    """EP 32 over 4 nodes of 8 H100, DeepSeek-V3 (256 experts, top-8): alltoall sends 3/4 of
    the 8 copies of each token through the NIC, flex one copy per other node reached,
    3 * (1 - C(192, 8) / C(256, 8)) = 2.71. Checked by hand from the alpha-beta terms."""
    from math import comb
    t_a2a, job, L = _ep_layer("alltoall", 32)
    t_flex, _, _ = _ep_layer("flex", 32)
    hw = job.hardware
    up, out = scale_up_fabric(hw, hw.efficiency), scale_out_fabric(hw, hw.efficiency)
    copy = 4096 * 7168 * 2
    lat = 7 * up.latency_s + 3 * out.latency_s
    nvlink = 8 * copy * 7 / 32 / up.busbw_bytes_per_s

    def expected(network_bytes):
        return 2 * (lat + max(nvlink, network_bytes / out.busbw_bytes_per_s))
    assert t_a2a == pytest.approx(expected(8 * copy * 24 / 32), rel=1e-9)
    assert t_flex == pytest.approx(expected(copy * 3 * (1 - comb(192, 8) / comb(256, 8))), rel=1e-9)
    assert t_flex < 0.5 * t_a2a


def test_expert_tensor_parallel_gather_carries_etp_shares_of_routed_tokens():
    """Grok-1 at tp 4 with SP, ep 8, etp 4 on H100, one micro-batch of 8192 tokens: each GPU
    enters the MoE layer with 8192 / 4 tokens, holds 2 routed copies of each on average after
    the all-to-all, and the etp all-gather brings the other three ranks' shares:
    S = 2048 * 2 * 4 * 6144 * 2 bytes, the same rows the expert GEMMs multiply. So the MoE
    layer's TP time is the dense layer's minus one attention-or-MLP pair plus an all-gather and
    a reduce-scatter of S over the 4 GPUs; the count of EP ranks plays no part."""
    from perfmodel.engine.rules import resolve
    from perfmodel.formulas.comm import group_time_s
    from perfmodel.formulas.compute import gemm_shape
    from perfmodel.formulas.traffic import tp_layer_s
    from perfmodel.formulas.workload import LayerKind, layer_ops
    from perfmodel.spec.scenario import parse_scenario
    sc = parse_scenario(dict(hardware="h100-sxm", num_gpus=32, model="grok-1-314b", seq_length=8192,
                             global_batch_size=8, parallelism=dict(tp=4, pp=1, ep=8, etp=4, sequence_parallel=True)))
    r = resolve(sc)
    L, hw, m = r.layouts, r.job.hardware, r.job.model
    eff = hw.efficiency
    S = 2048 * 2 * 4 * 6144 * 2
    expert_rows = [gemm_shape(op, m, L, 8192, r.job.software) for op in layer_ops(m, LayerKind.MOE, r.job.software)
                   if op.expert][0]
    assert float(expert_rows.m[0] * expert_rows.count[0]) * 6144 * 2 == S
    routed = (float(group_time_s(Collective.ALL_GATHER, S, 4, 1, hw, eff))
              + float(group_time_s(Collective.REDUCE_SCATTER, S, 4, 1, hw, eff)))
    dense = float(tp_layer_s(LayerKind.DENSE, m, L, 8192, hw, eff, "bf16", SoftwareStack())[0])
    moe = float(tp_layer_s(LayerKind.MOE, m, L, 8192, hw, eff, "bf16", SoftwareStack())[0])
    assert moe == pytest.approx(dense / 2 + routed, rel=1e-12)
