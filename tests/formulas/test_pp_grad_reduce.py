"""Where a pipeline stage reduces its gradients (``perfmodel.spec.pp_grad_reduce``): Megatron-Core's
overlapped reduce-scatter, or torch.distributed.pipelining with FSDP2 (stage_drain), which reduces
each stage after its last backward, one stage after another in the drain, and accumulates the
unsharded gradients per micro-batch on the compute stream. Numbers worked by hand below."""

import pytest
from support import SW, scenario, sw
from support import spec_predict as predict

from perfmodel.formulas.pipeline import drain_reduction_s
from perfmodel.formulas.traffic import pp_accumulate_bytes_per_param
from perfmodel.spec.errors import InputError
from perfmodel.spec.pp_grad_reduce import PP_GRAD_REDUCE_CHOICES, pp_grad_reduce


def test_records():
    assert set(PP_GRAD_REDUCE_CHOICES) == {"overlapped", "stage_drain"}
    assert SW.pp_grad_reduce == "overlapped"
    assert not pp_grad_reduce("overlapped").in_drain and pp_grad_reduce("stage_drain").in_drain
    with pytest.raises(InputError):
        pp_grad_reduce("eager")


def test_accumulation_bytes_by_hand():
    # fp32 reduce type, 8 micro-batches: cast 2 + 4 = 6, then 7 adds of 2 + 4 + 4 = 10: 76 / 8 = 9.5;
    # the copy into the reduce-scatter input reads and writes 4
    assert pp_accumulate_bytes_per_param(True, 8) == (pytest.approx(9.5), 8)
    # bf16: the first gradient is autograd's own, later ones add 2 + 2 read, 2 written: 42 / 8
    assert pp_accumulate_bytes_per_param(False, 8) == (pytest.approx(5.25), 4)
    assert pp_accumulate_bytes_per_param(True, 1) == (pytest.approx(6.0), 8)


def test_drain_by_hand():
    """1F1B on 8 ranks, 16 groups a stage, reduce-scatter 0.5 s and copy 0.02 s a GPU:
    8 x (0.02 + 0.5 x 15/16) + 0.5/16 = 3.91 + 0.03125 = 3.94125 s. Interleaved (v = 2, 8 groups a
    chunk): 16 x (0.01 + 0.25 x 7/8) + 0.25/8 = 3.66 + 0.03125 = 3.69125 s."""
    assert drain_reduction_s(0.5, 0.02, 16, 8, 1) == pytest.approx(3.94125)
    assert drain_reduction_s(0.5, 0.02, 8, 8, 2) == pytest.approx(3.69125)
    # one group a stage: every stage's whole reduction lies in the drain but the last one's
    assert drain_reduction_s(0.5, 0.0, 1, 8, 1) == pytest.approx(0.5)
    assert drain_reduction_s(0.5, 0.0, 1e9, 8, 1) == pytest.approx(4.0)


def _pp(**over):
    return scenario(num_gpus=16, global_batch_size=64, parallelism=dict(tp=2, pp=2, zero_stage=1), **over)


def test_stage_drain_only_with_pipeline_and_data_parallel():
    flat = dict(num_gpus=16, global_batch_size=64, parallelism=dict(tp=2, pp=1, zero_stage=1))
    assert predict(scenario(**flat, pp_grad_reduce="stage_drain")).step_time_s == predict(scenario(**flat)).step_time_s
    no_dp = dict(num_gpus=4, global_batch_size=8, parallelism=dict(tp=2, pp=2, zero_stage=1))
    assert predict(scenario(**no_dp, pp_grad_reduce="stage_drain")).step_time_s == pytest.approx(
        predict(scenario(**no_dp)).step_time_s)


def test_stage_drain_exposes_the_reduction():
    """dp 4, pp 2: the overlapped reduction hides behind the last backward; in the drain both stages'
    reductions are exposed, and the accumulation adds compute every micro-batch."""
    over, drain = predict(_pp()), predict(_pp(pp_grad_reduce="stage_drain"))
    assert drain.step_time_s > over.step_time_s
    assert drain.breakdown_s["dp_comm"] > over.breakdown_s["dp_comm"]
    assert drain.breakdown_s["compute"] > over.breakdown_s["compute"]


def test_dp_traffic_fields_zero_without_the_option():
    from perfmodel.engine.prediction import resolve
    from perfmodel.formulas.traffic import dp_traffic
    job = resolve(_pp())
    L, hw = job.layouts, job.hardware
    off = dp_traffic(1e8, 0.0, 0.0, L, hw, hw.efficiency, 8.0, SW)
    assert off.pp_accumulate_per_unit_s.item() == 0.0 and off.grad_copy_s.item() == 0.0
    on = dp_traffic(1e8, 0.0, 0.0, L, hw, hw.efficiency, 8.0, sw(pp_grad_reduce="stage_drain"))
    # 1e8 x 8 bytes at 3.35 TB/s x 0.87 = 2.9145e12 B/s, 8 copy kernels of 5.6 us
    assert on.grad_copy_s.item() == pytest.approx(8e8 / 2.9145e12 + 8 * 5.6e-6, rel=1e-4)
    assert on.grad_sync_s.item() == off.grad_sync_s.item()
