"""The Megatron-LM DeepSeek-V3 GB200 ladder (perfmodel/data/software_history.yaml, from NVIDIA/Megatron-LM
docs/discussions/deepseek-v3-gb200-optimization at eb0783b6d3, with the reproduce guide's exact layout
and flags): its end points, 494.46 and 970.01 TFLOPS/GPU, each within 10%. The final step holds;
the baseline does not yet (docs/moe.md, 'The Megatron-LM GB200 ladder')."""

import pytest

import perfmodel as pm
from perfmodel.studies.observed.history import load_software_history

BASELINE_TFLOPS, FINAL_TFLOPS = 494.46, 970.01


def _tflops(scenario) -> float:
    p = pm.predict(scenario)
    return p.tokens_per_s_per_gpu * p.model_flops_per_token / 1e12


def test_final_step_within_ten_percent():
    (h,) = load_software_history()
    assert h.steps[-1].tflop_per_s_per_gpu == FINAL_TFLOPS
    assert _tflops(h.scenario) == pytest.approx(FINAL_TFLOPS, rel=0.10)


@pytest.mark.xfail(strict=True, reason="the baseline's host-bound MoE layer is not modelled (docs/moe.md)")
def test_baseline_within_ten_percent():
    """The guide's sec. 1 baseline: the NCCL all-to-all dispatcher, no router fusion, no CUDA
    graphs, recompute of the dense layers' MLP and the MLA up-projections."""
    (h,) = load_software_history()
    sw = h.scenario.software.model_copy(update={
        "moe_dispatcher": "alltoall", "moe_router_fusion": False, "cuda_graphs": False,
        "selective_recompute": ("mlp", "mla_up_proj")})
    assert _tflops(h.scenario.model_copy(update={"software": sw})) == pytest.approx(BASELINE_TFLOPS, rel=0.10)
