"""Expert-parallel communication as DeepSeek runs it, by hand: node-limited routing, FP8 dispatch,
SMs reserved for the all-to-alls, and block-wise FP8 GEMMs fitted to DeepGEMM's table."""

from math import comb

import numpy as np
import pytest
from support import sw

from perfmodel.formulas.compute import gemm_curve, gemm_efficiency
from perfmodel.formulas.layouts import layouts_from_arrays
from perfmodel.formulas.overlap import reserved_sm_scale
from perfmodel.formulas.traffic import remote_domains_per_token, routed_remote_domains
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.presets import load_model
from perfmodel.spec.profile import efficiencies_for

DSV3 = load_model("deepseek-v3")
H800 = load_hardware("h800-sxm")


def test_node_limited_routing_by_hand():
    """DeepSeek-V3 over 8 nodes: uniform over 256 experts a token reaches 7 (1 - C(224, 8)/C(256, 8))
    = 4.61 other nodes; limited to 4 of 8 groups (one per node), at most 4, of which 7/8 are others."""
    uniform = 7 * (1 - comb(224, 8) / comb(256, 8))
    assert float(remote_domains_per_token(256, 8, 8)) == pytest.approx(uniform)
    assert float(routed_remote_domains(DSV3.moe, 8)) == pytest.approx(4 * 7 / 8)
    assert float(routed_remote_domains(DSV3.moe, 2)) == pytest.approx(float(remote_domains_per_token(256, 8, 2)))
    assert float(routed_remote_domains(DSV3.moe, 1)) == 0.0


def test_fp8_dispatch_moves_about_half_the_dispatch_bytes():
    """Across nodes, bandwidth-bound: dispatch at (1 + 4/128)/2 of its 16-bit bytes, combine unchanged,
    so the pair takes (0.515625 + 1)/2 of its 16-bit time, latencies aside."""
    from perfmodel.formulas.traffic import ep_layer_s
    L = layouts_from_arrays(**{k: [v] for k, v in dict(tp=1, pp=16, vpp=1, cp=1, ep=64, etp=1, sp=False,
                                                        zero_stage=1, mbs=16, dp=128, num_mb=8).items()})
    eff = efficiencies_for(H800)[0]
    bf16 = float(ep_layer_s(DSV3, L, 4096, H800, eff, sw(moe_dispatcher="flex"))[0])
    fp8 = float(ep_layer_s(DSV3, L, 4096, H800, eff, sw(moe_dispatcher="flex", moe_dispatch_fp8=True))[0])
    assert fp8 / bf16 == pytest.approx((0.515625 + 1) / 2, rel=0.02)


def test_reserved_sms_stretch_compute():
    assert reserved_sm_scale(132, 20) == pytest.approx(132 / 112)
    assert reserved_sm_scale(132, 0) == 1.0
    with pytest.raises(ValueError):
        reserved_sm_scale(132, 132)


def test_blockwise_fp8_curve_is_the_fit_of_deepgemm_table():
    """The h100-sxm spec and profile carry the curve calibration/blockwise_fp8.py fits (to 4 digits),
    and a blockwise fp8 GEMM runs on it, below the tensor-wise curve on the large grouped shape."""
    from calibration.blockwise_fp8 import fit_blockwise
    e, d = fit_blockwise()
    eff = efficiencies_for(H800)[0]
    assert eff.gemm["fp8_blockwise"].efficiency_max == pytest.approx(e, abs=1e-4)
    assert eff.gemm["fp8_blockwise"].half_dim == pytest.approx(d, abs=0.1)
    assert gemm_curve("fp8", sw(fp8_scaling="blockwise")) == "fp8_blockwise"
    assert gemm_curve("bf16", sw(fp8_scaling="blockwise")) == "bf16"
    block = float(gemm_efficiency(8192, 4096, 7168, "fp8_blockwise", eff))
    assert block * 1978.9 == pytest.approx(1297 / 1.2, rel=0.05)      # DeepGEMM table row / speedup
    assert block < float(gemm_efficiency(8192, 4096, 7168, "fp8", eff))
    assert np.isfinite(block)
