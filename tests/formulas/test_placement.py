"""Job placement on NVLink domains (``placement``) and its use by the comm model."""

import pytest
from support import scenario

from perfmodel.engine.rules import resolve
from perfmodel.formulas.comm import group_domains
from perfmodel.formulas.placement import job_domain_gpus, placed
from perfmodel.spec.hardware import load_hardware


@pytest.mark.parametrize("num_gpus, expected", [
    (8, 8),        # inside one rack: the job's own GPUs
    (64, 64),      # 16 trays fit one rack of 18
    (72, 72),      # a full rack
    (128, 64),     # 32 trays: segments of 16 (32 is not divisible by 18 or 17)
    (256, 64),     # 64 trays: 16
    (96, 48),      # 24 trays: 12 divides 24, 18..13 do not
    (144, 72),     # 36 trays: 18
    (2304, 72),    # 576 trays: 18
    (4, 4),
])
def test_nvl72_jobs_are_placed_in_whole_tray_segments(num_gpus, expected):
    assert job_domain_gpus(load_hardware("gb200-nvl72"), num_gpus) == expected


@pytest.mark.parametrize("num_gpus, expected", [(4, 4), (8, 8), (16, 8), (1024, 8)])
def test_hgx_domain_is_the_node(num_gpus, expected):
    assert job_domain_gpus(load_hardware("h100-sxm"), num_gpus) == expected


def test_placed_changes_only_the_domain_size():
    hw = load_hardware("gb200-nvl72")
    p = placed(hw, 256)
    assert p.scale_up.domain_size == 64
    assert p.scale_up.bandwidth_per_direction_gb_per_s == hw.scale_up.bandwidth_per_direction_gb_per_s
    assert p.gpu == hw.gpu and p.scale_out == hw.scale_out
    assert placed(hw, 72) is hw
    assert hw.scale_up.domain_size == 72   # the spec itself is untouched


def test_group_domains_rounds_up():
    # 128 consecutive ranks over 72-GPU domains span two domains, not one
    assert [int(x) for x in group_domains(128, 1, 72)] == [72, 2]
    assert [int(x) for x in group_domains(128, 1, 64)] == [64, 2]
    assert [int(x) for x in group_domains(16, 8, 72)] == [9, 2]
    assert [int(x) for x in group_domains(8, 1, 8)] == [8, 1]


def test_job_constants_carry_the_placed_domain():
    job = resolve(scenario(hardware="gb200-nvl72", num_gpus=256, global_batch_size=256,
                           parallelism=dict(tp=2, pp=2)))
    assert job.job.hardware.scale_up.domain_size == 64
    job = resolve(scenario(hardware="gb200-nvl72", num_gpus=72, global_batch_size=72,
                           parallelism=dict(tp=2, pp=1)))
    assert job.job.hardware.scale_up.domain_size == 72


# --------------------------------------------------- issue 37: NVLink domains of several racks
@pytest.mark.parametrize("num_gpus, expected", [
    (576, 576),    # 144 trays: the whole 8-rack domain
    (1152, 576),   # 288 trays: segments of 144 (the largest divisor of 288 that is at most 576 / 4)
    (1024, 512),   # 256 trays: 128 divides 256, 144..129 do not
    (144, 144),    # two racks' worth inside one domain
])
def test_a_multi_rack_domain_takes_segments_of_up_to_its_whole_size(num_gpus, expected):
    """GB200 NVL576 (8 NVL72 racks in one NVLink domain): the Slurm segment rule of the NVL72
    (k trays, the largest divisor of the job's trays that is at most D / 4) with D = 576."""
    assert job_domain_gpus(load_hardware("gb200-nvl576"), num_gpus) == expected


def test_a_group_over_racks_of_one_domain_stays_on_nvlink():
    """A 576-GPU group (tp 1) over 8 racks is one domain on gb200-nvl576: its all-gather is the
    flat NVLink ring (575 steps, factor 575/576 over 720 GB/s busbw), and its all-to-all sends
    each GPU's 575/576 S over NVLink. On gb200-nvl72 (8 domains joined by 400 Gb/s NICs) the ring
    is no slower, since 72 NICs per rack outpace a GPU's NVLink share (the pipelined ring, comm
    module table), but the all-to-all sends (576 - 72)/576 of S through one NIC per GPU: by hand
    7/8 S / 46 GB/s, 13.7x the NVLink all-to-all's 575/576 S / 720 GB/s."""
    from perfmodel.formulas.comm import Collective, group_time_s, scale_out_fabric, scale_up_fabric
    S = 4e9
    big = placed(load_hardware("gb200-nvl576"), 576)
    up = scale_up_fabric(big, big.efficiency)
    t = float(group_time_s(Collective.ALL_GATHER, S, 576, 1, big, big.efficiency))
    assert t == pytest.approx(575 * up.latency_s + 575 / 576 * S / up.busbw_bytes_per_s)
    rack = placed(load_hardware("gb200-nvl72"), 576)
    assert float(group_time_s(Collective.ALL_GATHER, S, 576, 1, rack, rack.efficiency)) == pytest.approx(t, rel=0.02)
    out = scale_out_fabric(rack, rack.efficiency)
    a2a_one = float(group_time_s(Collective.ALL_TO_ALL, S, 576, 1, big, big.efficiency))
    a2a_racks = float(group_time_s(Collective.ALL_TO_ALL, S, 576, 1, rack, rack.efficiency))
    assert a2a_one == pytest.approx(575 * up.latency_s + 575 / 576 * S / up.busbw_bytes_per_s)
    assert a2a_racks == pytest.approx(71 * up.latency_s + 7 * out.latency_s + 7 / 8 * S / out.busbw_bytes_per_s)


def test_a_tapered_tier_between_racks_slows_what_leaves_a_rack():
    """gb200-nvl576 with the racks joined at 1/8 of a GPU's NVLink (112.5 GB/s per GPU per
    direction, x 0.8 bus efficiency = 90 GB/s): a 144-GPU all-to-all over two racks sends each
    GPU's (144 - 72)/144 = 1/2 of S across, S/2 / 90 GB/s, slower than its NVLink time; a ring
    all-gather sends 143/144 S out of each rack over 72 GPUs' uplinks, 143/144 S / (72 x 90 GB/s),
    which the GPUs' own links (720 GB/s) still outpace, so the taper does not show."""
    from perfmodel.formulas.comm import Collective, group_time_s, latency_steps, scale_up_fabric
    hw = load_hardware("gb200-nvl576")
    tapered = hw.model_copy(update={"scale_up": hw.scale_up.model_copy(
        update={"inter_rack_bandwidth_per_direction_gb_per_s": 112.5})})
    eff, S = hw.efficiency, 1e9
    up = scale_up_fabric(hw, eff)
    a2a = float(group_time_s(Collective.ALL_TO_ALL, S, 144, 1, tapered, eff))
    assert a2a == pytest.approx(float(latency_steps(Collective.ALL_TO_ALL, 144)) * up.latency_s + 0.5 * S / 90e9)
    for op in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        assert float(group_time_s(op, S, 144, 1, tapered, eff)) == float(group_time_s(op, S, 144, 1, hw, eff))


@pytest.mark.parametrize("update, fragment", [
    ({"gpus_per_rack": 100}, "must divide domain_size"),
    ({"gpus_per_rack": 576}, "must divide domain_size"),
    ({"gpus_per_rack": 72, "gpus_per_host": 5}, "does not divide gpus_per_rack"),
    ({"gpus_per_rack": None, "inter_rack_bandwidth_per_direction_gb_per_s": 100.0}, "needs gpus_per_rack"),
    ({"inter_rack_bandwidth_per_direction_gb_per_s": 2000.0}, "exceeds"),
])
def test_rack_fields_are_checked(update, fragment):
    from perfmodel.spec.errors import InputError
    from perfmodel.spec.hardware import parse_hardware
    data = load_hardware("gb200-nvl576").model_dump(exclude_none=True)
    data["scale_up"] = {k: v for k, v in {**data["scale_up"], **update}.items() if v is not None}
    with pytest.raises(InputError, match=fragment):
        parse_hardware(data)
