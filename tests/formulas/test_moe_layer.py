"""The MoE layer beside its GEMMs (router, permutation, routed load) and the expert GEMMs on the
dense curve, each checked by hand on a small layer."""

import numpy as np
import pytest
from support import sw

from perfmodel.engine.block import block_time
from perfmodel.formulas.compute import gemm_efficiency, gemm_shape
from perfmodel.formulas.layouts import layouts_from_arrays
from perfmodel.formulas.workload import LayerKind, layer_ops, routed_load
from perfmodel.spec.efficiency import saturating_gemm_efficiency
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.model import ModelSpec, MoeSpec

H100 = load_hardware("h100-sxm")
EFF = H100.efficiency
MOE = ModelSpec(name="moe", num_layers=2, hidden_size=1024, num_attention_heads=8, ffn_hidden_size=4096,
                gated_mlp=True, vocab_size=32000, moe=MoeSpec(num_experts=8, top_k=2, expert_ffn_hidden_size=512))
T = 4096                                     # tokens per GPU and micro-batch (mbs 1, seq 4096, no TP/CP)
BW = 3350e9 * 0.87                           # h100-sxm HBM bandwidth x memory_efficiency
T0 = 5.6e-6                                  # h100-sxm kernel_overhead_s


def _layouts(**kw):
    base = dict(tp=1, pp=1, vpp=1, cp=1, ep=1, etp=1, sp=False, zero_stage=0, mbs=1, dp=1, num_mb=1)
    base.update(kw)
    return layouts_from_arrays(**{k: [v] for k, v in base.items()})


def _ops(stack):
    L = _layouts()
    blk = block_time(layer_ops(MOE, LayerKind.MOE, stack), MOE, L, T, "bf16", H100, EFF, stack)
    return {t.name: t for t in blk.ops}


def test_router_scores_by_hand_fused_and_not():
    """Unfused: 72 kernels and 10 passes of the fp32 [T, E] scores, 10 x 8 x 4 = 320 bytes per
    token: forward 72 x 5.6 us + 4096 x 320 / (3350e9 x 0.87) = 403.2 + 0.450 = 403.650 us.
    Fused: 31 kernels and 5 passes: 173.6 + 0.225 = 173.825 us. Backward twice the forward, kernels
    included (the module's convention for elementwise gradients)."""
    unfused = _ops(sw())["moe/router_scores"]
    fused = _ops(sw(moe_router_fusion=True))["moe/router_scores"]
    assert float(unfused.fwd_s[0]) == pytest.approx(72 * T0 + T * 320 / BW, rel=1e-9)
    assert float(unfused.fwd_s[0]) == pytest.approx(403.650e-6, rel=1e-4)
    assert float(fused.fwd_s[0]) == pytest.approx(31 * T0 + T * 160 / BW, rel=1e-9)
    assert float(unfused.bwd_s[0]) == pytest.approx(2 * (72 * T0 + T * 320 / BW), rel=1e-9)
    assert unfused.host_ops_fwd == 72 and fused.host_ops_fwd == 31


def test_permutation_by_hand_fused_and_not():
    """Permute and unpermute read and write top_k = 2 copies of the 1024-wide bf16 token:
    2 x 2 x 2 x 1024 x 2 = 16,384 bytes per token, in 2 kernels fused. Unfused, the unpermute
    also multiplies each copy by its probability and zero-fills the output: (2 x 2 + 1) x 1024
    x 2 = 10,240 more, in 14 kernels. Forward, fused: 2 x 5.6 us + 4096 x 16384 / BW = 11.2 +
    23.03 = 34.23 us; unfused: 14 x 5.6 + 4096 x 26624 / BW = 78.4 + 37.42 = 115.82 us."""
    fused = _ops(sw(moe_permute_fusion=True))["moe/permute"]
    unfused = _ops(sw())["moe/permute"]
    assert float(fused.fwd_s[0]) == pytest.approx(2 * T0 + T * 16384 / BW, rel=1e-9)
    assert float(unfused.fwd_s[0]) == pytest.approx(14 * T0 + T * 26624 / BW, rel=1e-9)
    assert float(unfused.fwd_s[0]) * 1e6 == pytest.approx(115.82, abs=0.01)


@pytest.mark.parametrize("options, load", [
    ({}, 1.0),                                                          # balanced, dropless
    ({"moe_load_imbalance": 1.5}, 1.5),                                 # dropless: the busiest rank
    ({"moe_load_imbalance": 1.5, "moe_expert_capacity_factor": 1.25}, 1.25),   # dropped above capacity
    ({"moe_load_imbalance": 1.1, "moe_expert_capacity_factor": 1.25}, 1.1),    # under capacity: kept
    ({"moe_expert_capacity_factor": 2.0, "moe_pad_expert_input_to_capacity": True}, 2.0),  # padded
])
def test_routed_load(options, load):
    assert routed_load(sw(**options)) == load


def test_expert_gemm_rows_follow_the_busiest_rank_and_run_on_the_dense_curve():
    """EP 2: 4 experts per GPU; each expert's rows are T top_k / E x ep = 4096 x 2 / 8 x 2 = 2048
    tokens when balanced, 3072 at imbalance 1.5. Expert GEMMs take the dense bf16 curve of that
    shape (no grouped half_dim: the H100 suite measured expert GEMMs at dense rates)."""
    L = _layouts(ep=2)
    up = next(op for op in layer_ops(MOE, LayerKind.MOE, sw()) if op.name == "moe/expert_up")
    balanced = gemm_shape(up, MOE, L, T, sw())
    skewed = gemm_shape(up, MOE, L, T, sw(moe_load_imbalance=1.5))
    assert float(balanced.m[0]) == 2048 and float(balanced.count[0]) == 4
    assert float(skewed.m[0]) == 3072
    g = EFF.gemm["bf16"]
    assert float(gemm_efficiency(2048, 1024, 1024, "bf16", EFF)) == pytest.approx(
        float(saturating_gemm_efficiency(2048, 1024, 1024, g.efficiency_max, g.half_dim)))


def test_an_unbalanced_layer_is_slower_by_its_routed_work():
    """At imbalance 1.5 each expert GEMM has 1.5x the rows (1024 -> 1536): its roofline time (less
    the 8 experts' kernel overheads, which do not grow) grows by a little under 1.5x, since the
    taller GEMM runs at a slightly higher efficiency; attention and the router do not move."""
    base = _ops(sw())
    skew = _ops(sw(moe_load_imbalance=1.5))
    assert float(skew["attention/core"].fwd_s[0]) == float(base["attention/core"].fwd_s[0])
    for name in ("moe/expert_up", "moe/expert_down"):
        ratio = (float(skew[name].fwd_s[0]) - 8 * T0) / (float(base[name].fwd_s[0]) - 8 * T0)
        assert 1.4 < ratio <= 1.5
    assert np.isclose(float(skew["moe/router_scores"].fwd_s[0]), float(base["moe/router_scores"].fwd_s[0]))
