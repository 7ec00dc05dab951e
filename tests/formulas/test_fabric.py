"""The fabric as something you buy: bill of materials by hand and against NVIDIA's reference
architecture, and oversubscription slowing the collectives that cross the leaf tier."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.formulas.comm import Collective, group_time_s, scale_out_fabric, through_fabric
from perfmodel.formulas.fabric import bill_of_materials, cross_tier_share, crossing_slowdown, for_job, leaf_ports
from perfmodel.spec.errors import InputError
from perfmodel.spec.fabric import FabricSpec, parse_fabric
from perfmodel.spec.hardware import load_hardware


def test_bom_of_a_1024_gpu_two_tier_rail_optimised_fat_tree_by_hand():
    # 1,024 H100 (8 per host, one 400G NIC each), 64-port switches, 1:1.
    # Leaf: 32 down, 32 up. Hosts 128 = 4 SUs of 32; 8 rails -> 4 x 8 = 32 leaves.
    # Uplinks 32 x 32 = 1,024 -> 1,024 / 64 = 16 spines; 48 switches.
    # Cables: 1,024 NIC-leaf + 1,024 leaf-spine = 2,048.
    # Switch ports in use: 1,024 + 2 x 1,024 = 3,072 -> 1,536 twin-port transceivers;
    # NIC side 1,024 single-port: 2,560 transceivers.
    bom = bill_of_materials(1024, 8, 1, FabricSpec())
    assert (bom.num_leaf_switches, bom.num_spine_switches, bom.num_core_switches) == (32, 16, 0)
    assert bom.num_switches == 48
    assert bom.num_cables == 2048
    assert (bom.num_switch_transceivers, bom.num_nic_transceivers) == (1536, 1024)
    assert bom.num_transceivers == 2560
    # optics power: 1,536 x 15 W + 1,024 x 8 W; switch power unknown, capex unpriced
    assert bom.optics_power_w == pytest.approx(1536 * 15 + 1024 * 8)
    assert bom.switch_power_w is None and bom.capex_usd is None


@pytest.mark.parametrize("num_gpus, leaves, spines, leaf_spine_cables", [
    (256, 8, 4, 256),     # 1 SU
    (512, 16, 8, 512),    # 2 SUs
    (1024, 32, 16, 1024),  # 4 SUs
])
def test_bom_matches_the_dgx_superpod_h100_reference_architecture(num_gpus, leaves, spines, leaf_spine_cables):
    """NVIDIA DGX SuperPOD H100 reference architecture, 'Network Fabrics', table 4 (compute fabric
    component count; its 31/63/127 nodes leave one host slot per SU for the fabric manager, the
    fabric being built for the full SU). Its 3-SU row provisions 16 spines for growth where the
    count alone needs 12; that row is not claimed."""
    bom = bill_of_materials(num_gpus, 8, 1, FabricSpec())
    assert (bom.num_leaf_switches, bom.num_spine_switches) == (leaves, spines)
    assert bom.num_cables - bom.num_endpoints == leaf_spine_cables


def test_oversubscribed_leaf_splits_its_ports():
    assert leaf_ports(FabricSpec()) == (32, 32)
    assert leaf_ports(FabricSpec(oversubscription=2)) == (42, 21)     # floor(64*2/3), ceil(42/2)
    bom = bill_of_materials(1024, 8, 1, FabricSpec(oversubscription=2))
    # still 4 SUs per rail (ceil(128 / 42)) -> 32 leaves; 32 x 21 = 672 uplinks -> 11 spines
    assert (bom.num_leaf_switches, bom.num_spine_switches) == (32, 11)


def test_three_tiers_and_the_reach_of_two():
    with pytest.raises(InputError, match="fabric.tiers: .*3 tiers"):
        bill_of_materials(4096, 8, 1, FabricSpec(tiers=2))
    # tiers not given: two where they reach, else three
    assert for_job(FabricSpec(), 2048, 8, 1).tiers == 2 and for_job(FabricSpec(), 4096, 8, 1).tiers == 3
    assert bill_of_materials(4096, 8, 1, FabricSpec()).num_core_switches > 0
    bom = bill_of_materials(16384, 8, 1, FabricSpec(tiers=3))
    # 2,048 hosts = 64 SUs x 8 rails = 512 leaves; 512 x 32 / 32 = 512 spines; 512 x 32 / 64 = 256 cores
    assert (bom.num_leaf_switches, bom.num_spine_switches, bom.num_core_switches) == (512, 512, 256)


def test_capex_and_power_only_with_every_figure_given():
    fab = FabricSpec(switch_usd=1.0, transceiver_usd=2.0, cable_usd=3.0, switch_power_w=10.0)
    bom = bill_of_materials(1024, 8, 1, fab)
    assert bom.capex_usd == pytest.approx(48 * 1.0 + 2560 * 2.0 + 2048 * 3.0)
    assert bom.power_w == pytest.approx(bom.optics_power_w + 480.0)


def test_two_to_one_oversubscription_halves_the_cross_tier_bandwidth_of_a_dp_all_reduce():
    """A DP all-reduce of 1 GB between two H100 hosts in different SUs (stride 512 > the 256-GPU
    reach of a leaf): all its network traffic crosses the spine (f = 1). Ring and tree alike:
    t = 2 alpha + S / B with B = 50 GB/s x 0.92 = 46 GB/s, alpha = 5 us (h100-sxm.yaml); at 2:1
    the bytes move at B / 2."""
    hw = load_hardware("h100-sxm")
    eff = hw.efficiency
    S, alpha, B = 1e9, 5e-6, 50e9 * 0.92
    assert eff.scale_out_latency_s == alpha and scale_out_fabric(hw, eff).busbw_bytes_per_s == pytest.approx(B)

    def with_fabric(o):
        return hw.model_copy(update={"scale_out": hw.scale_out.model_copy(
            update={"fabric": FabricSpec(oversubscription=o)})})

    t1 = group_time_s(Collective.ALL_REDUCE, S, 2, 512, with_fabric(1.0), eff)
    t2 = group_time_s(Collective.ALL_REDUCE, S, 2, 512, with_fabric(2.0), eff)
    assert float(t1) == pytest.approx(2 * alpha + S / B)
    assert float(t2) == pytest.approx(2 * alpha + 2 * S / B)
    # no fabric: the non-blocking time, the same as 1:1
    assert float(group_time_s(Collective.ALL_REDUCE, S, 2, 512, hw, eff)) == pytest.approx(float(t1))


def test_cross_tier_share_of_a_dp_group_on_1024_gpus():
    """DP = 128 at tp = 8 on 1,024 H100: one GPU per host in 128 hosts. A 2:1 leaf of 64 ports has
    42 downlinks, so it reaches 42 hosts: f = (128 - 42) / 127, the uplinks carry f x 2 = 1.35
    times what they can at full rate, and the network bandwidth is B / (2 x 86/127)."""
    hw = load_hardware("h100-sxm")
    eff = hw.efficiency
    fab_hw = hw.model_copy(update={"scale_out": hw.scale_out.model_copy(
        update={"fabric": FabricSpec(oversubscription=2)})})
    out = through_fabric(scale_out_fabric(hw, eff), fab_hw, 8, 1, 128)
    assert float(out.busbw_bytes_per_s) == pytest.approx(46e9 * 127 / 172)
    assert float(cross_tier_share(128, 32)) == pytest.approx(96 / 127)
    assert float(crossing_slowdown(1.0, 2.0)) == 2.0
    assert float(crossing_slowdown(0.4, 2.0)) == 1.0      # below f = 1/o the uplinks keep up
    # a group inside one leaf's reach never crosses: tp = 8, DP of 42 hosts
    inside = through_fabric(scale_out_fabric(hw, eff), fab_hw, 8, 1, 42)
    assert float(inside.busbw_bytes_per_s) == pytest.approx(46e9)


def test_hop_latency_per_tier_crossed():
    hw = load_hardware("h100-sxm")
    eff = hw.efficiency
    fab_hw = hw.model_copy(update={"scale_out": hw.scale_out.model_copy(
        update={"fabric": FabricSpec(hop_latency_us=0.5)})})
    out = through_fabric(scale_out_fabric(hw, eff), fab_hw, 512, 1, 2)
    assert float(out.latency_s) == pytest.approx(5e-6 + 2 * 0.5e-6)


def test_bad_fabric_is_one_line():
    with pytest.raises(InputError, match="^fabric: .*oversubscription"):
        parse_fabric({"oversubscription": 0.5})
    with pytest.raises(InputError, match="^fabric: .*bandwith"):
        parse_fabric({"bandwith": 1})


def test_the_fabric_in_energy_and_tco_by_hand():
    """1,024 H100 for 100 h on a 1:1 two-tier fabric: its optics draw 1,536 x 15 + 1,024 x 8 =
    31,232 W, x PUE 1.25 x 100 h = 3,904 kWh more facility energy. TCO with prices (switch $1,
    transceiver $2, cable $3: capex 48 + 2 x 2,560 + 3 x 2,048 = $11,312) replaces the GPUs'
    networking share C o with K over the life at the utilisation, and pays the optics' power."""
    from perfmodel.formulas.cost import HOURS_PER_YEAR, job_cost
    from perfmodel.spec.cost import CostModel
    hw = load_hardware("h100-sxm")
    priced = FabricSpec(switch_usd=1.0, transceiver_usd=2.0, cable_usd=3.0)

    def bound(fab):
        return hw.model_copy(update={"scale_out": hw.scale_out.model_copy(update={"fabric": fab})})

    T, N = 100 * 3600.0, 1024
    cloud = CostModel()
    assert job_cost(N, T, bound(FabricSpec()), cloud).energy_kwh == pytest.approx(
        job_cost(N, T, hw, cloud).energy_kwh + 31_232 * 1.25 * 100 / 1000)
    assert job_cost(N, T, bound(priced), cloud).cost_usd == pytest.approx(job_cost(N, T, hw, cloud).cost_usd)
    tco = CostModel(mode="tco")
    used_h = tco.amortisation_years * HOURS_PER_YEAR * tco.utilisation_frac
    C, o = hw.price.purchase_usd_per_gpu, tco.network_ops_overhead_frac
    optics_usd = 31_232 * 1.25 * tco.usd_per_kwh / 1000 * 100
    base = job_cost(N, T, hw, tco).cost_usd
    assert job_cost(N, T, bound(FabricSpec()), tco).cost_usd == pytest.approx(base + optics_usd)
    assert job_cost(N, T, bound(priced), tco).cost_usd == pytest.approx(
        base + optics_usd + (11_312 / used_h - N * C * o / used_h) * 100)


def test_pipeline_sends_cross_the_leaf_in_the_share_of_pairs_that_straddle_it():
    """Stages 512 ranks apart (tp 8 x dp 64) on a 1:1 leaf reaching 256 GPUs: every pair crosses
    (f = 1); at 4:1 (51 hosts = 408 GPUs reach) also f = 1, so a 64 MB send takes 4x the bytes'
    time; 128 ranks apart at 4:1: f = 128/408 and f o = 1.25."""
    from perfmodel.formulas.comm import p2p_time_s
    hw = load_hardware("h100-sxm")
    eff = hw.efficiency
    S, alpha, B = 64e6, 5e-6, 46e9

    def at(o):
        return hw.model_copy(update={"scale_out": hw.scale_out.model_copy(
            update={"fabric": FabricSpec(oversubscription=o)})})

    assert float(p2p_time_s(S, True, 512, hw, eff)) == pytest.approx(alpha + S / B)
    assert float(p2p_time_s(S, True, 512, at(1.0), eff)) == pytest.approx(alpha + S / B)
    assert float(p2p_time_s(S, True, 512, at(4.0), eff)) == pytest.approx(alpha + 4 * S / B)
    assert float(p2p_time_s(S, True, 128, at(4.0), eff)) == pytest.approx(alpha + 4 * 128 / 408 * S / B)
    assert float(p2p_time_s(S, False, 512, at(4.0), eff)) == float(p2p_time_s(S, False, 512, hw, eff))


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 2048), more=st.integers(0, 2048), o=st.sampled_from([1.0, 1.5, 2.0, 3.0, 4.0]))
def test_a_larger_job_never_needs_fewer_switches_cables_or_optics(n, more, o):
    small, large = (bill_of_materials(k, 8, 1, FabricSpec(oversubscription=o, tiers=3)) for k in (n, n + more))
    assert large.num_switches >= small.num_switches and large.num_cables >= small.num_cables
    assert large.num_transceivers >= small.num_transceivers and large.power_w >= small.power_w


@settings(max_examples=60, deadline=None)
@given(f=st.floats(0, 1), o1=st.floats(1, 16), extra=st.floats(0, 16))
def test_more_oversubscription_is_never_faster(f, o1, extra):
    assert float(crossing_slowdown(f, o1 + extra)) >= float(crossing_slowdown(f, o1)) >= 1.0
