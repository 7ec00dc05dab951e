"""Sensitivity: one hand-computed case per resource, zero elasticity off the critical path,
elasticities in [0, 1], and a bottleneck that moves as the binding resource doubles.

The cases run on the hardware spec's own efficiencies (no calibration profile, so no measured
collective fits stand in for the links) with, where a case says so, the per-kernel, per-op and
per-launch overheads set to zero so that one term alone carries the resource.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

import perfmodel as pm
from perfmodel.engine.rules import resolve
from perfmodel.formulas.comm import NVLS_ALLREDUCE_GAIN
from perfmodel.formulas.counts import param_count
from perfmodel.spec.profile import efficiencies_for
from perfmodel.spec.scenario import hardware_of, parse_scenario
from perfmodel.studies.views.perturb import RESOURCES, Speeds, perturbed
from perfmodel.studies.views.sensitivity import effects_at, sensitivity

BASE = {"hardware": "h100-sxm", "model": "llama3-8b", "num_gpus": 1, "seq_length": 4096, "global_batch_size": 8,
        "micro_batch_size": 1, "precision": "bf16", "recompute": "none"}
NO_FIXED_COSTS = {"kernel_overhead_s": 0.0, "host_op_overhead_s": 0.0, "launch_overhead_s": 0.0}
HUGE = 1e6
"""A resource a million times faster than the H100's: its terms vanish to 1e-6 of the step."""


def _resolved(overrides: dict | None = None, eff_update: dict | None = None, gpu_update: dict | None = None,
              **scenario):
    sc = parse_scenario({**BASE, **scenario})
    eff = efficiencies_for(hardware_of(sc), None)[0].model_copy(update=eff_update or {})
    r = resolve(sc, eff)
    if gpu_update:
        hw = r.job.hardware
        r = dataclasses.replace(r, job=dataclasses.replace(
            r.job, hardware=hw.model_copy(update={"gpu": hw.gpu.model_copy(update=gpu_update)})))
    return r


def _effect(r, resource):
    base, effects = effects_at(r, Speeds())
    return base, perturbed(r, Speeds()), next(e for e in effects if e.resource == resource)


def _huge_peaks(r) -> dict:
    peaks = r.job.hardware.gpu.peak_dense_tflop_per_s
    return {"peak_dense_tflop_per_s": peaks.model_copy(update={"bf16": peaks.bf16 * HUGE})}


def test_peak_flops_halves_a_math_bound_compute_term():
    """HBM a million times faster and no fixed kernel costs: every GEMM and attention kernel runs
    at its math roof, so compute = FLOPs / (peak x efficiency). Twice the peak halves it:
    step(2x) = step - compute / 2; elasticity = log2(step / step(2x))."""
    r = _resolved(eff_update=NO_FIXED_COSTS, gpu_update={"hbm_bandwidth_gb_per_s": 3350 * HUGE})
    step, bd, e = _effect(r, "peak_flops")
    expected = step - bd["compute"] / 2
    assert e.step_time_s == pytest.approx(expected, rel=1e-5)
    assert e.elasticity == pytest.approx(math.log2(step / expected), rel=1e-4)
    assert e.gain_frac == pytest.approx(1 - expected / step, rel=1e-4)


def test_hbm_bandwidth_halves_memory_bound_compute_and_the_optimizer():
    """Peak a million times higher and no fixed kernel costs: every kernel sits at its memory
    roof (GEMMs: max(t_math ~ 0, t_mem)), and the optimizer streams 30 bytes per parameter from
    HBM. Twice the bandwidth halves both: step(2x) = step - (compute + optimizer) / 2."""
    r = _resolved(eff_update=NO_FIXED_COSTS)
    r = dataclasses.replace(r, job=dataclasses.replace(r.job, hardware=r.job.hardware.model_copy(
        update={"gpu": r.job.hardware.gpu.model_copy(update=_huge_peaks(r))})))
    step, bd, e = _effect(r, "hbm_bandwidth")
    assert bd["optimizer"] > 0 and bd["data_wait"] == 0
    assert e.step_time_s == pytest.approx(step - (bd["compute"] + bd["optimizer"]) / 2, rel=1e-5)


def test_latency_halves_the_per_step_syncs_of_one_gpu():
    """One GPU: no collective but the two per-step syncs (loss and gradient norm), each
    ceil(log2 2) = 1 step of the scale-out latency alpha: 2 alpha. Halving latency saves alpha."""
    r = _resolved()
    alpha = r.job.efficiency.scale_out_latency_s
    step, bd, e = _effect(r, "latency")
    assert bd["overheads"] == pytest.approx(2 * alpha)
    assert step - e.step_time_s == pytest.approx(alpha, rel=1e-9)


def test_host_overhead_when_the_host_cannot_keep_ahead():
    """A 128-token micro-batch of the 1.7B GPT of Megatron-LM 2021: the host dispatches it slower (H per micro-batch)
    than the GPU runs it (G = (compute + recompute) / m, one GPU, no pipeline), so the step
    carries m (H - G) of host time beside the 2 alpha syncs: H = (overheads - 2 alpha) / m + G.
    A host twice as fast leaves m max(0, H / 2 - G)."""
    r = _resolved(model="megatron-1.7b", seq_length=128, global_batch_size=64)
    step, bd, e = _effect(r, "host_overhead")
    m = r.num_microbatches
    alpha = r.job.efficiency.scale_out_latency_s
    exposed = bd["overheads"] - 2 * alpha
    assert exposed > 0
    g = (bd["compute"] + bd["recompute"]) / m
    h = exposed / m + g
    assert e.step_time_s == pytest.approx(step - exposed + m * max(0.0, h / 2 - g), rel=1e-9)


def test_cuda_graphs_leave_only_the_per_step_syncs_when_the_host_bound():
    """The host-bound micro-batch above, its layers run as CUDA graphs: the host launches 2 graphs
    per layer (24 x 2 x 15 us = 0.72 ms per micro-batch with the 1.7B GPT's 24 layers), under
    the GPU's time, so no host time is exposed and the overheads are the 2 alpha syncs alone."""
    r = _resolved(model="megatron-1.7b", seq_length=128, global_batch_size=64)
    graphed = dataclasses.replace(r, job=dataclasses.replace(r.job, software=r.job.software.model_copy(
        update={"cuda_graphs": True})))
    alpha = r.job.efficiency.scale_out_latency_s
    eager_bd, bd = (perturbed(x, Speeds()) for x in (r, graphed))
    assert eager_bd["overheads"] > 2 * alpha
    g = (bd["compute"] + bd["recompute"]) / r.num_microbatches
    assert 2 * r.job.model.num_layers * r.job.efficiency.host_op_overhead_s < g
    assert bd["overheads"] == pytest.approx(2 * alpha)
    assert bd["compute"] == eager_bd["compute"]


def test_input_pipeline_when_the_loader_binds():
    """Peak and HBM a million times faster, no fixed kernel or host costs: the step's work is
    almost nothing, so the loader sets it. One GPU reads 8 x 4,096 tokens x 4 bytes = 131,072 B
    at 2 GB/s per 8-GPU node / 8 = 0.25 GB/s: t_load = 5.24288e-4 s, the step. Twice the loader
    rate: step(2x) = max(busy, t_load / 2)."""
    r = _resolved(eff_update=NO_FIXED_COSTS, gpu_update={"hbm_bandwidth_gb_per_s": 3350 * HUGE})
    r = dataclasses.replace(r, job=dataclasses.replace(r.job, hardware=r.job.hardware.model_copy(
        update={"gpu": r.job.hardware.gpu.model_copy(update=_huge_peaks(r))})))
    t_load = 8 * 4096 * 4 / (2e9 / 8)
    step, bd, e = _effect(r, "input_pipeline")
    assert step == pytest.approx(t_load, rel=1e-12) and bd["data_wait"] > 0
    busy = step - bd["data_wait"]
    assert e.step_time_s == pytest.approx(max(busy, t_load / 2), rel=1e-12)


def test_scale_up_bandwidth_of_an_exposed_gradient_all_reduce():
    """8 GPUs of one NVLink domain, plain data parallelism, no overlap: the step carries one
    all-reduce of the fp32 gradients, S = 4 B x P. With NVLink SHARP it runs at B x eff x gain,
    t = 2 (n - 1) alpha + 2 (n - 1) / n x S / (B x eff x gain) (nccl-tests convention). Twice B
    removes half of the bandwidth term."""
    r = _resolved(num_gpus=8, global_batch_size=64, software={"overlap": {"dp": 0.0}})
    hw, eff = r.job.hardware, r.job.efficiency
    assert hw.scale_up.in_network_reduction
    s_bytes = 4 * param_count(r.job.model).total
    n = 8
    bandwidth_term = 2 * (n - 1) / n * s_bytes / (hw.scale_up.bandwidth_bytes_per_s * eff.scale_up_bus_efficiency
                                                  * NVLS_ALLREDUCE_GAIN)
    step, bd, e = _effect(r, "scale_up_bandwidth")
    assert bd["dp_comm"] == pytest.approx(2 * (n - 1) * eff.scale_up_latency_s + bandwidth_term, rel=1e-9)
    assert step - e.step_time_s == pytest.approx(bandwidth_term / 2, rel=1e-9)


def _links(r):
    """(S, B_up, B_out, alpha_up, alpha_out): the fp32 gradient buffer 4 B x P, and each fabric's
    busbw per GPU (line rate x bus efficiency) and per-step latency."""
    hw, eff = r.job.hardware, r.job.efficiency
    return (4 * param_count(r.job.model).total,
            hw.scale_up.bandwidth_bytes_per_s * eff.scale_up_bus_efficiency,
            hw.scale_out.bandwidth_bytes_per_s * eff.scale_out_bus_efficiency,
            eff.scale_up_latency_s, eff.scale_out_latency_s)


def test_scale_out_bandwidth_of_a_four_node_all_reduce():
    """32 GPUs in four NVLink domains (g = 8 per domain, N = 4), plain data parallelism, no
    overlap: the step carries one all-reduce of S = 4 B x P, the fastest of NCCL's algorithms
    (``comm.across_domains_s``). H100: B_up = 450 x 0.82 = 369 GB/s, B_out = 50 x 0.92 = 46 GB/s.
      ring:      2(n-1)/n S max((g-1)/(g B_up), 1/(g B_out)) = 1.9375 S max(1/421.7, 1/368) per GB/s:
                 the NIC binds; latency 2((n - N) alpha_up + (N - 1) alpha_out) = 2(28 alpha_up + 3 alpha_out)
      NVLS-tree: S max(2(g-1)/(g B_up gain), load(4)/(g B_out)) = S max(1/273.6, 1/184): slower
                 (the plain tree, S max(1/210.9, 1/184), no faster)
    so t = ring = 2(28 alpha_up + 3 alpha_out) + 1.9375 S / (8 B_out) = 0.1692 s. Twice the NIC
    rate puts the ring on NVLink (1.9375 x 7/8 S / B_up = S / 217.7 GB/s) and NVLS-tree on its
    NVLink chain (1.75 S / (B_up gain) = S / 273.6 GB/s, the NICs now S / 368 GB/s): NCCL turns
    to NVLS-tree, t(2x) = 2(alpha_up + log2(4) alpha_out) + 1.75 S / (B_up gain) = 0.1174 s."""
    r = _resolved(num_gpus=32, global_batch_size=128, software={"overlap": {"dp": 0.0}})
    s_bytes, b_up, b_out, a_up, a_out = _links(r)
    ring = 2 * (28 * a_up + 3 * a_out) + 2 * 31 / 32 * s_bytes / (8 * b_out)
    nvls_tree_2x = 2 * (a_up + 2 * a_out) + 2 * 7 / 8 * s_bytes / (b_up * NVLS_ALLREDUCE_GAIN)
    step, bd, e = _effect(r, "scale_out_bandwidth")
    assert bd["dp_comm"] == pytest.approx(ring, rel=1e-9)
    assert step - e.step_time_s == pytest.approx(ring - nvls_tree_2x, rel=1e-9)
    assert e.elasticity == pytest.approx(math.log2(step / (step - ring + nvls_tree_2x)), rel=1e-9)


def test_scale_out_bandwidth_off_the_path_of_a_two_node_all_reduce():
    """16 GPUs in two NVLink domains (g = 8, N = 2): NVLS-tree's network term is load(2) S / (g B_out)
    = S / 368 GB/s, its NVLink chain 2(g-1)/g S / (B_up gain) = S / 273.6 GB/s: the chain binds
    (the ring, 1.875 S / 368 GB/s, is slower), t = 2(alpha_up + alpha_out) + 1.75 S / (B_up gain).
    The NICs carry their share at the same time as NVLink carries its own, so twice the NIC rate
    (S / 736 GB/s) leaves the step as it is: elasticity 0."""
    r = _resolved(num_gpus=16, global_batch_size=64, software={"overlap": {"dp": 0.0}})
    s_bytes, b_up, b_out, a_up, a_out = _links(r)
    assert 1 / (8 * b_out) < 2 * 7 / 8 / (b_up * NVLS_ALLREDUCE_GAIN)
    step, bd, e = _effect(r, "scale_out_bandwidth")
    assert bd["dp_comm"] == pytest.approx(2 * (a_up + a_out) + 2 * 7 / 8 * s_bytes / (b_up * NVLS_ALLREDUCE_GAIN),
                                          rel=1e-9)
    assert e.step_time_s == step and e.elasticity == 0.0


@pytest.mark.parametrize("resource,scenario", [
    ("host_overhead", {}), ("input_pipeline", {}), ("scale_out_bandwidth", {}),
    ("scale_out_bandwidth", {"num_gpus": 8, "global_batch_size": 64}), ("scale_up_bandwidth", {}),
])
def test_a_resource_off_the_critical_path_has_elasticity_zero(resource, scenario):
    """Llama 3 8B, 4,096-token micro-batches: the host keeps ahead of the GPU and the loader ahead
    of the step; one GPU or one node has no traffic on the network, one GPU none on NVLink."""
    _, _, e = _effect(_resolved(**scenario), resource)
    assert e.elasticity == 0.0 and e.gain_frac == 0.0


@pytest.mark.parametrize("scenario", [
    "perfmodel/data/example_scenario.yaml",
    {**BASE, "num_gpus": 16, "global_batch_size": 64, "software": {"overlap": {"dp": 0.5}}},
    {**BASE, "model": "megatron-1.7b", "seq_length": 128, "global_batch_size": 64},
    {"hardware": "gb200-nvl72", "model": "mixtral-8x7b", "num_gpus": 64, "seq_length": 4096,
     "global_batch_size": 256, "parallelism": {"tp": 2, "pp": 2, "ep": 8}},
])
def test_elasticities_are_fractions_and_the_path_descends(scenario):
    """More of a resource never slows a step (elasticity >= 0) and 2x of one resource at most
    halves it (elasticity <= 1); along the bottleneck path each step is faster than the last."""
    sc = pm.load_scenario(scenario) if isinstance(scenario, str) else pm.parse_scenario(scenario)
    s = pm.sensitivity(sc, profile=None)
    for e in s.effects:
        assert -1e-12 <= e.elasticity <= 1 + 1e-12, e
    steps = [p.step_time_s for p in s.path]
    assert all(b < a for a, b in zip(steps, steps[1:]))
    assert s.bottleneck == max(s.effects, key=lambda e: e.elasticity).resource
    assert [e.resource for e in s.effects] == list(RESOURCES)


def test_the_bottleneck_moves_when_compute_doubles():
    """The example job (Llama 3 70B on 64 H100s, tp 4): compute binds first; after three doublings
    of peak FLOP/s the tensor-parallel traffic on NVLink binds (LENSES.md pattern 1)."""
    s = pm.sensitivity(pm.load_scenario("perfmodel/data/example_scenario.yaml"), profile=None, path_steps=4)
    names = [p.bottleneck for p in s.path]
    assert names[0] == "peak_flops" and "scale_up_bandwidth" in names
    assert s.path[1].speeds["peak_flops"] == 2.0


def test_path_steps_are_bounded():
    with pytest.raises(pm.InputError, match="path_steps"):
        sensitivity(_resolved(), 17)
