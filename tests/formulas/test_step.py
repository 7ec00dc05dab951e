"""Step-time identities and physical invariants (STYLE tier 3)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import SW, scenario, sw
from support import spec_predict as predict

from perfmodel.engine.evaluate import COMPONENTS
from perfmodel.formulas.goodput import job_goodput
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.reliability import FailureModel


def test_breakdown_sums_to_step_time():
    p = predict(scenario())
    assert sum(p.breakdown_s.values()) == pytest.approx(p.step_time_s, rel=1e-12)
    assert set(p.breakdown_s) == set(COMPONENTS)


def test_no_bubble_when_pp_is_one():
    p = predict(scenario(parallelism=dict(pp=1, tp=2)))
    assert p.breakdown_s["pipeline_bubble"] == 0.0
    assert p.breakdown_s["pp_comm"] == 0.0


def test_interleaving_shrinks_the_bubble():
    b1 = predict(scenario(parallelism=dict(pp=4, vpp=1, tp=1))).breakdown_s["pipeline_bubble"]
    b2 = predict(scenario(parallelism=dict(pp=4, vpp=2, tp=1))).breakdown_s["pipeline_bubble"]
    assert b2 == pytest.approx(b1 / 2, rel=0.05)


def test_recompute_costs_time_not_model_flops():
    a = predict(scenario(recompute="none"))
    b = predict(scenario(recompute="full"))
    assert b.step_time_s > a.step_time_s
    assert b.model_flops_per_token == a.model_flops_per_token
    assert b.hardware_flops_utilisation > b.mfu


def test_training_tokens_add_time_cost_energy():
    """Without failures or start-up the run lasts tokens / rate; with the defaults it lasts
    tokens / rate / g + 300 s launch + 10 warm-up steps, g the failure goodput of 16 GPUs."""
    ideal = predict(scenario(training_tokens=1e9, reliability={"gpu_failures_per_gpu_hour": 0.0},
                             startup={"launch_s": 0.0, "warmup_steps": 0}))
    assert ideal.time_to_train_s == pytest.approx(1e9 / ideal.tokens_per_s, rel=1e-12)
    assert ideal.training_time_frac == 1.0 and ideal.goodput_frac == pytest.approx(ideal.mfu, rel=1e-12)
    p = predict(scenario(training_tokens=1e9))
    g = job_goodput(16, p.model_params_total, FailureModel()).fraction
    want = 1e9 / p.tokens_per_s / g + 300.0 + 10 * p.step_time_s
    assert p.time_to_train_s == pytest.approx(want, rel=1e-12)
    assert p.training_time_frac == pytest.approx(1e9 / p.tokens_per_s / want, rel=1e-12)
    assert p.gpu_hours == pytest.approx(p.time_to_train_s * 16 / 3600)
    assert p.cost_usd == pytest.approx(p.gpu_hours * load_hardware("h100-sxm").price.cloud_usd_per_gpu_hour)
    assert p.energy_kwh > 0


def _scaled_hw(factor_flops=1.0, factor_bw=1.0):
    hw = load_hardware("h100-sxm")
    gpu = hw.gpu.model_copy(update=dict(
        peak_dense_tflop_per_s=hw.gpu.peak_dense_tflop_per_s.model_copy(update={
            k: (v * factor_flops if v else v) for k, v in hw.gpu.peak_dense_tflop_per_s.model_dump().items()}),
        hbm_bandwidth_gb_per_s=hw.gpu.hbm_bandwidth_gb_per_s * factor_bw))
    up = hw.scale_up.model_copy(update=dict(bandwidth_per_direction_gb_per_s=hw.scale_up.bandwidth_per_direction_gb_per_s * factor_bw))
    out = hw.scale_out.model_copy(update=dict(nic_bandwidth_gbit_per_s=hw.scale_out.nic_bandwidth_gbit_per_s * factor_bw))
    return hw.model_copy(update=dict(gpu=gpu, scale_up=up, scale_out=out))


layouts = st.sampled_from([
    dict(tp=1, pp=1, cp=1), dict(tp=2, pp=2, cp=1), dict(tp=4, pp=1, cp=2), dict(tp=1, pp=4, vpp=2, cp=1),
    dict(tp=2, pp=2, cp=2), dict(tp=8, pp=2, cp=1),
])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(par=layouts, zero=st.sampled_from([0, 1, 2, 3]), recompute=st.sampled_from(["none", "selective", "full"]),
       precision=st.sampled_from(["bf16", "fp8"]), mbs=st.sampled_from([1, 2]), gpus=st.sampled_from([16, 32, 64]),
       f_flops=st.floats(1.0, 4.0), f_bw=st.floats(1.0, 4.0))
def test_invariants_on_random_valid_scenarios(par, zero, recompute, precision, mbs, gpus, f_flops, f_bw):
    try:
        sc = scenario(num_gpus=gpus, micro_batch_size=mbs, recompute=recompute, precision=precision,
                      global_batch_size=256, parallelism=dict(par, zero_stage=zero))
        base = predict(sc)
    except InputError:
        return
    assert np.isfinite(base.step_time_s) and base.step_time_s > 0
    assert sum(base.breakdown_s.values()) == pytest.approx(base.step_time_s, rel=1e-9)
    assert all(v >= 0 for v in base.breakdown_s.values())
    assert 0 < base.mfu <= 1
    if par["pp"] == 1:
        assert base.breakdown_s["pipeline_bubble"] == 0
    # More FLOP/s or more bandwidth is never slower.
    faster = sc.model_copy(update={"hardware": _scaled_hw(f_flops, f_bw)})   # an inline spec
    assert predict(faster).step_time_s <= base.step_time_s * (1 + 1e-12)


def test_invalid_layout_is_an_input_error_naming_the_field():
    with pytest.raises(InputError) as err:
        predict(scenario(num_gpus=24, parallelism=dict(tp=8, pp=2)))
    assert str(err.value).startswith("num_gpus:")
    assert "tp(8) * pp(2) * cp(1) = 16 does not divide num_gpus(24)" in str(err.value)


def test_unfused_attention_is_slower_and_stores_the_scores():
    flash = predict(scenario())
    unfused = predict(scenario(attention_backend="unfused"))
    assert unfused.step_time_s > flash.step_time_s
    assert unfused.memory_per_gpu_bytes > flash.memory_per_gpu_bytes
    assert unfused.model_flops_per_token == flash.model_flops_per_token
    # selective recompute drops the stored scores again (Korthikanti et al. 2022)
    sel = predict(scenario(attention_backend="unfused", recompute="selective"))
    assert sel.memory_per_gpu_bytes < unfused.memory_per_gpu_bytes


def test_unknown_attention_backend_is_a_one_line_input_error():
    with pytest.raises(InputError) as err:
        scenario(attention_backend="xformers")
    assert "attention_backend: Input should be 'flash', 'cudnn', 'fa3' or 'unfused'" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_cuda_graphs_value_that_is_not_a_boolean_is_a_one_line_input_error():
    with pytest.raises(InputError) as err:
        scenario(cuda_graphs="sometimes")
    assert "software.cuda_graphs: Input should be a valid boolean" in str(err.value)
    assert "\n" not in str(err.value)


def test_unknown_fp8_casts_is_a_one_line_input_error():
    with pytest.raises(InputError) as err:
        scenario(fp8_casts="inline")
    assert "software.fp8_casts: Input should be 'separate' or 'fused'" in str(err.value)
    assert "\n" not in str(err.value)


def test_overlap_is_a_scenario_input_per_kind():
    """ZeRO-3 over 4 nodes: phi = 0 exposes every gather and reduce-scatter, phi = 1 hides them."""
    z3 = dict(num_gpus=32, global_batch_size=32, parallelism=dict(tp=1, pp=1, zero_stage=3))
    hidden = predict(scenario(**z3))
    serial = predict(scenario(**z3, overlap=dict(fsdp=0.0)))
    assert serial.breakdown_s["fsdp_comm"] > hidden.breakdown_s["fsdp_comm"]
    assert serial.step_time_s - hidden.step_time_s == pytest.approx(
        serial.breakdown_s["fsdp_comm"] - hidden.breakdown_s["fsdp_comm"], rel=1e-9)
    # kinds left out keep their defaults
    assert scenario(overlap=dict(fsdp=0.0)).software.overlap.tp == 0.0
    assert scenario(overlap=dict(fsdp=0.0)).software.overlap.dp == 1.0


def test_overlap_out_of_range_is_a_one_line_input_error():
    with pytest.raises(InputError) as err:
        scenario(overlap=dict(fsdp=1.5))
    assert "overlap.fsdp: Input should be less than or equal to 1" in str(err.value)
    assert "\n" not in str(err.value)


def test_fsdp_collectives_per_layer_add_one_ring_latency_each():
    """12 collectives per layer instead of 1 (DeepSpeed ZeRO-3 v0.3: one per parameter
    tensor): 11 more latencies of each of the 2 all-gathers and the reduce-scatter, per layer
    and micro-batch; the bytes are the same. Computed by hand from comm.group_time_s."""
    from perfmodel.formulas.comm import Collective, group_time_s
    hw = load_hardware("h100-sxm")
    z3 = dict(num_gpus=32, global_batch_size=64, parallelism=dict(tp=1, pp=1, zero_stage=3),
              overlap=dict(fsdp=0.0))
    one = predict(scenario(**z3))
    twelve = predict(scenario(**z3, fsdp_collectives_per_layer=12))
    lat = (2 * float(group_time_s(Collective.ALL_GATHER, 0.0, 32, 1, hw, hw.efficiency))
           + float(group_time_s(Collective.REDUCE_SCATTER, 0.0, 32, 1, hw, hw.efficiency)))
    layers, microbatches = scenario().model.num_layers, 2
    extra = twelve.breakdown_s["fsdp_comm"] - one.breakdown_s["fsdp_comm"]
    assert extra == pytest.approx(layers * microbatches * 11 * lat, rel=1e-6)
    # below ZeRO-3 it changes nothing
    z1 = dict(z3, parallelism=dict(tp=1, pp=1, zero_stage=1))
    assert predict(scenario(**z1, fsdp_collectives_per_layer=12)).step_time_s == predict(scenario(**z1)).step_time_s


def test_list_api_copies_each_rank_chunk_with_its_own_kernel():
    """torch.distributed's list API: per collective, n copy kernels moving the buffer once more
    (read + write). Checked by hand against compute.memory_time_s at the traffic level."""
    from perfmodel.engine.prediction import resolve
    from perfmodel.formulas.compute import memory_time_s
    from perfmodel.formulas.traffic import PARAM_BYTES, dp_traffic, grad_reduce_bytes
    job = resolve(scenario(num_gpus=32, global_batch_size=64, parallelism=dict(tp=1, pp=1, zero_stage=3)))
    L, hw = job.layouts, job.hardware
    P, n = 1e8, 32
    flat = dp_traffic(P, 0.0, 0.0, L, hw, hw.efficiency, 1.0, SW).fsdp_per_unit_s
    listed = dp_traffic(P, 0.0, 0.0, L, hw, hw.efficiency, 1.0, sw(fsdp_list_api=True)).fsdp_per_unit_s
    copies = (2 * memory_time_s(2 * P * PARAM_BYTES, hw, hw.efficiency, kernels=n)
              + memory_time_s(2 * P * grad_reduce_bytes(True), hw, hw.efficiency, kernels=n))
    assert (listed - flat).item() == pytest.approx(float(copies), rel=1e-9)


def test_a_dense_model_pays_no_expert_collectives():
    """Zero expert parameters: no expert-group gather or reduce-scatter, not even a latency."""
    from perfmodel.engine.prediction import resolve
    from perfmodel.formulas.comm import Collective, group_time_s
    from perfmodel.formulas.traffic import PARAM_BYTES, dp_traffic, grad_reduce_bytes
    job = resolve(scenario(num_gpus=32, global_batch_size=64, parallelism=dict(tp=1, pp=1, zero_stage=3)))
    L, hw = job.layouts, job.hardware
    P = 1e8
    t = dp_traffic(P, 0.0, 0.0, L, hw, hw.efficiency, 1.0, SW).fsdp_per_unit_s
    dense = (2 * group_time_s(Collective.ALL_GATHER, P * PARAM_BYTES, 32, 1, hw, hw.efficiency)
             + group_time_s(Collective.REDUCE_SCATTER, P * grad_reduce_bytes(True), 32, 1, hw, hw.efficiency))
    assert t.item() == pytest.approx(float(dense), rel=1e-12)


def test_grad_reduce_in_16_bits_halves_the_gradient_reduce_scatter():
    """ZeRO-1 over 32 data-parallel ranks: the reduce-scatter moves 2 bytes per gradient instead
    of 4, by hand through comm.group_time_s; the parameter all-gather does not change."""
    from perfmodel.engine.prediction import resolve
    from perfmodel.formulas.comm import Collective, group_time_s
    from perfmodel.formulas.traffic import dp_traffic
    job = resolve(scenario(num_gpus=32, global_batch_size=64, parallelism=dict(tp=1, pp=1, zero_stage=1)))
    L, hw = job.layouts, job.hardware
    P = 1e8
    fp32 = dp_traffic(P, 0.0, 0.0, L, hw, hw.efficiency, 1.0, SW)
    bf16 = dp_traffic(P, 0.0, 0.0, L, hw, hw.efficiency, 1.0, sw(grad_reduce_in_fp32=False))
    for t, nbytes in ((fp32, 4), (bf16, 2)):
        rs = group_time_s(Collective.REDUCE_SCATTER, P * nbytes, 32, 1, hw, hw.efficiency)
        assert t.grad_sync_s.item() == pytest.approx(float(rs), rel=1e-12)
    assert bf16.param_gather_s.item() == fp32.param_gather_s.item()


def test_grad_reduce_in_fp32_is_a_scenario_input():
    """Data parallelism across nodes, not overlapped: reducing in bf16 exposes less gradient
    traffic and keeps a 2-byte gradient buffer; compute is unchanged."""
    over = dict(num_gpus=64, global_batch_size=64, parallelism=dict(tp=8, pp=1, zero_stage=1), overlap=dict(dp=0))
    fp32 = predict(scenario(**over))
    bf16 = predict(scenario(**over, grad_reduce_in_fp32=False))
    assert bf16.breakdown_s["dp_comm"] < fp32.breakdown_s["dp_comm"]
    assert bf16.breakdown_s["compute"] == fp32.breakdown_s["compute"]
    assert bf16.memory_per_gpu_bytes < fp32.memory_per_gpu_bytes


def _moe(**over):
    """Qwen3-30B-A3B on 64 H100s, EP 16 (two nodes), through the shared test scenario."""
    return scenario(**{**dict(num_gpus=64, model="qwen3-30b-a3b", seq_length=4096, global_batch_size=256,
                              parallelism=dict(tp=1, pp=1, ep=16)), **over})


def test_moe_dispatcher_is_a_scenario_input():
    """EP 16 over two nodes: the flex (DeepEP/HybridEP) dispatcher sends less through the NICs."""
    a2a = predict(_moe())
    flex = predict(_moe(moe_dispatcher="flex"))
    assert flex.breakdown_s["ep_comm"] < a2a.breakdown_s["ep_comm"]
    # The all-to-all dispatcher also sorts by local expert (8 experts per GPU here): its
    # compute exceeds flex's by that op, in every layer of every micro-batch.
    from perfmodel.engine.prediction import resolve
    from perfmodel.formulas.compute import op_time
    from perfmodel.formulas.workload import LayerKind, layer_ops
    job = resolve(_moe())
    sort = next(op for op in layer_ops(job.model, LayerKind.MOE, SW) if op.name == "moe/sort_by_local_expert")
    t = op_time(sort, job.model, job.layouts, 4096, "bf16", job.hardware, job.hardware.efficiency, SW)
    extra = job.num_microbatches * job.model.num_layers * float(t.fwd_s[0] + t.bwd_s[0])
    assert extra > 0
    assert a2a.breakdown_s["compute"] - flex.breakdown_s["compute"] == pytest.approx(extra, rel=1e-9)
    # inside one node they send the same
    one_node = dict(num_gpus=8, global_batch_size=64, parallelism=dict(tp=1, pp=1, ep=8))
    assert predict(_moe(**one_node)).breakdown_s["ep_comm"] == predict(_moe(moe_dispatcher="flex", **one_node)).breakdown_s["ep_comm"]
    with pytest.raises(InputError) as err:
        _moe(moe_dispatcher="deepep")
    assert "moe_dispatcher: Input should be 'alltoall' or 'flex'" in str(err.value)
    assert "\n" not in str(err.value)


def test_hidden_traffic_costs_the_compute_beside_it_its_sm_share():
    """exposed = max(t_comm - phi * t_window, sigma * t_comm), sigma = s / (1 + s): by hand with
    s = 0.25 (compute 1.25x longer beside a collective, so it loses 0.2 of its rate)."""
    from perfmodel.formulas.overlap import exposed_s
    assert exposed_s(1.0, 10.0, 1.0, 0.25) == pytest.approx(0.2)     # hidden: window stretched 0.2 s
    assert exposed_s(5.0, 2.0, 1.0, 0.25) == pytest.approx(3.0)      # collective outlasts its window
    assert exposed_s(1.0, 10.0, 0.0, 0.25) == pytest.approx(1.0)     # not overlapped: all of it
    assert exposed_s(1.0, 1.5, 0.5, 0.25) == pytest.approx(0.25)     # half the window: 1 - 0.75
    assert exposed_s(1.0, 10.0, 1.0) == 0.0                          # free overlap, the old bound
    # compute beside the collective: window + exposed = max(t_comm, window + sigma * t_comm)
    assert 10.0 + exposed_s(1.0, 10.0, 1.0, 0.25) == pytest.approx(max(1.0, 10.0 + 0.2))


def test_batch_level_ep_overlap_hides_each_direction_behind_the_other():
    """overlap.ep = 1 (Megatron-Core combined 1F1B): forward all-to-alls hide behind the
    layer's backward compute, backward ones behind its forward compute, in the steady state's
    share of the passes (``pipeline.combined_1f1b_paired_frac``)."""
    from perfmodel.engine.evaluate import _layer_time
    from perfmodel.engine.rules import resolve
    from perfmodel.formulas.traffic import ep_layer_s
    from perfmodel.formulas.workload import LayerKind
    job = resolve(_moe(overlap=dict(ep=1.0)))
    c, L = job.job, job.layouts
    lt = _layer_time(LayerKind.MOE, c, L, np.zeros(len(L)))
    raw = ep_layer_s(job.model, L, job.scenario.seq_length, job.hardware, c.efficiency, SW)
    sigma = c.efficiency.overlap_compute_slowdown / (1.0 + c.efficiency.overlap_compute_slowdown)
    from perfmodel.formulas.pipeline import combined_1f1b_paired_frac
    phi = combined_1f1b_paired_frac(L.pp, L.vpp, L.num_mb)
    assert np.all(phi < 1.0)
    assert lt.ep_fwd_s == pytest.approx(np.maximum(raw - phi * lt.block.bwd_s, sigma * raw))
    assert lt.ep_bwd_s == pytest.approx(np.maximum(raw - phi * lt.block.fwd_s, sigma * raw))
    serial = predict(_moe())
    hidden = predict(_moe(overlap=dict(ep=1.0)))
    assert hidden.breakdown_s["ep_comm"] < serial.breakdown_s["ep_comm"]
