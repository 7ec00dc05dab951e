"""FSDP2's root group (``SoftwareStack.fsdp_root_group``): with ZeRO-3 and no pipelining, the
embedding, final norm and output layer are one group of their own, gathered as each micro-batch's
forward opens and reduce-scattered after its last block's backward, beside no compute; the
transformer-block units share the rest of the parameters."""

import pytest
from support import SW, scenario, sw
from support import spec_predict as predict

from perfmodel.engine.prediction import resolve
from perfmodel.formulas.comm import Collective, group_time_s
from perfmodel.formulas.traffic import dp_traffic

LLAMA3_8B_ROOT = 2 * 128256 * 4096 + 4096
"""1,050,677,248: the untied embedding and output layer of Llama 3 8B, and the final norm."""


def test_root_group_is_its_own_collectives():
    """8 GPUs of one host, 8.03 G parameters in 32 units: the root's bf16 all-gather and fp32
    reduce-scatter are collectives of the root's size, and each unit carries the rest / 32."""
    job = resolve(scenario(num_gpus=8, global_batch_size=16, parallelism=dict(tp=1, pp=1, zero_stage=3)))
    L, hw, eff = job.layouts, job.hardware, job.hardware.efficiency
    total = 8_030_261_248
    on = dp_traffic(total, 0.0, LLAMA3_8B_ROOT, L, hw, eff, 32.0, sw(fsdp_root_group=True))
    off = dp_traffic(total, 0.0, LLAMA3_8B_ROOT, L, hw, eff, 32.0, SW)
    rest = dp_traffic(total - LLAMA3_8B_ROOT, 0.0, 0.0, L, hw, eff, 32.0, SW)
    assert off.fsdp_root_s.item() == 0.0
    assert on.fsdp_per_unit_s.item() == pytest.approx(rest.fsdp_per_unit_s.item())
    gather = group_time_s(Collective.ALL_GATHER, LLAMA3_8B_ROOT * 2, 8, 1, hw, eff)
    reduce = group_time_s(Collective.REDUCE_SCATTER, LLAMA3_8B_ROOT * 4, 8, 1, hw, eff)
    assert on.fsdp_root_s.item() == pytest.approx(float(gather + reduce))


def test_only_zero3_without_pipelining():
    for par in (dict(tp=2, pp=1, zero_stage=1), dict(tp=2, pp=2, zero_stage=3)):
        base = scenario(num_gpus=16, global_batch_size=64, parallelism=par)
        on = scenario(num_gpus=16, global_batch_size=64, parallelism=par, fsdp_root_group=True)
        assert predict(on).step_time_s == pytest.approx(predict(base).step_time_s)


def test_exposed_root_lengthens_the_step():
    par = dict(tp=1, pp=1, zero_stage=3)
    base = predict(scenario(num_gpus=16, global_batch_size=64, parallelism=par))
    on = predict(scenario(num_gpus=16, global_batch_size=64, parallelism=par, fsdp_root_group=True))
    assert on.breakdown_s["dp_comm"] > base.breakdown_s["dp_comm"] == 0.0
    assert on.step_time_s > base.step_time_s
