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
