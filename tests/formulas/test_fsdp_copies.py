"""FSDP2's copy kernels on the compute stream (``perfmodel.formulas.traffic.fsdp_copy_bytes_per_param``):
per micro-batch and parameter, two all-gather copy-outs (bf16 read + bf16 write) and one
reduce-scatter copy-in (bf16 read + reduce-dtype write). Numbers worked by hand below."""

import pytest
from support import SW, scenario, sw
from support import spec_predict as predict

from perfmodel.spec.scenario import parse_scenario


def test_bytes_per_parameter():
    from perfmodel.formulas.traffic import fsdp_copy_bytes_per_param
    # 2 gathers x (2 read + 2 written) + (2 read + 4 written) = 14; 2 written with bf16 reduction: 12
    assert fsdp_copy_bytes_per_param(True) == 14
    assert fsdp_copy_bytes_per_param(False) == 12


def test_small_unit_by_hand():
    """1e8 parameters in one unit over 32 GPUs of an H100 SXM (3.35 TB/s at memory efficiency 0.87,
    5.6 us a kernel): 14e8 bytes / 2.9145e12 B/s + 3 kernels = 480.357 + 16.8 = 497.157 us; bf16
    reduction: 12e8 bytes, 411.735 + 16.8 = 428.535 us."""
    from perfmodel.engine.prediction import resolve
    from perfmodel.formulas.traffic import dp_traffic
    job = resolve(scenario(num_gpus=32, global_batch_size=64, parallelism=dict(tp=1, pp=1, zero_stage=3)))
    L, hw = job.layouts, job.hardware
    on = sw(fsdp_copy_kernels=True)
    assert dp_traffic(1e8, 0.0, 0.0, L, hw, hw.efficiency, 1.0, on).fsdp_copy_per_unit_s.item() == pytest.approx(
        497.157e-6, rel=1e-5)
    bf16 = sw(fsdp_copy_kernels=True, grad_reduce_in_fp32=False)
    assert dp_traffic(1e8, 0.0, 0.0, L, hw, hw.efficiency, 1.0, bf16).fsdp_copy_per_unit_s.item() == pytest.approx(
        428.535e-6, rel=1e-5)
    # Megatron-Core's buffers hold the parameters and gradients as views: no copies
    assert dp_traffic(1e8, 0.0, 0.0, L, hw, hw.efficiency, 1.0, SW).fsdp_copy_per_unit_s.item() == 0.0


def test_only_zero3_with_more_than_one_shard_copies():
    z1 = scenario(num_gpus=32, global_batch_size=64, parallelism=dict(tp=1, pp=1, zero_stage=1),
                  fsdp_copy_kernels=True)
    base = scenario(num_gpus=32, global_batch_size=64, parallelism=dict(tp=1, pp=1, zero_stage=1))
    assert predict(z1).step_time_s == predict(base).step_time_s
    one = dict(num_gpus=2, global_batch_size=8, parallelism=dict(tp=2, pp=1, zero_stage=3))
    assert predict(scenario(**one, fsdp_copy_kernels=True)).step_time_s == predict(scenario(**one)).step_time_s


LLAMA3_8B_PARAMS = 2 * 128256 * 4096 + 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096) + 4096
"""8,030,261,248: untied embedding and output, per layer q, o (4096^2), k, v (4096 x 1024), the
three SwiGLU matrices and two RMSNorms, and the final norm."""


def _torchtitan_8b(**software):
    return parse_scenario(dict(
        name="tt8b", hardware="h100-sxm-hbm2e-500w", num_gpus=8, model="llama3-8b", seq_length=8192,
        global_batch_size=16, micro_batch_size=2, recompute="selective", precision="bf16",
        parallelism=dict(tp=1, pp=1, cp=1, zero_stage=3),
        software={"stack": "torchtitan-2412-eager", **software}))


def test_llama3_8b_on_eight_gpus_by_hand():
    """torchtitan's Llama 3 8B row: 8 GPUs, FSDP over all 8, one micro-batch a step, 32 units.
    Bytes: 14 x 8,030,261,248 = 112.42 GB a step; at 2.4 TB/s x 0.87 = 2.088e12 B/s that is
    53.843 ms, plus 32 units x 3 kernels x 5.6 us = 0.538 ms: 54.380 ms more compute."""
    assert LLAMA3_8B_PARAMS == 8_030_261_248
    on, off = predict(_torchtitan_8b()), predict(_torchtitan_8b(fsdp_copy_kernels=False))
    extra = on.breakdown_s["compute"] - off.breakdown_s["compute"]
    assert extra == pytest.approx(LLAMA3_8B_PARAMS * 14 / 2.088e12 + 32 * 3 * 5.6e-6, rel=1e-4)
    assert extra == pytest.approx(54.380e-3, rel=1e-4)
    assert on.step_time_s > off.step_time_s
