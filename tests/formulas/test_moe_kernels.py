"""The flex dispatcher's dispatch and combine at their measured algorithm bandwidth
(perfmodel.formulas.moe_kernels), checked by hand against the published tables it holds."""

from math import comb

import numpy as np
import pytest
from support import sw

from perfmodel.formulas.layouts import layouts_from_arrays
from perfmodel.formulas.moe_kernels import bandwidths, flex_layer_s, touch_probability
from perfmodel.formulas.traffic import FP8_DISPATCH_BYTES_PER_ELEMENT, ep_layer_s
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.model import ModelSpec, MoeSpec

GB200 = load_hardware("gb200-nvl72")
H100 = load_hardware("h100-sxm")
DSV3 = ModelSpec(name="dsv3-like", num_layers=2, hidden_size=7168, num_attention_heads=8, ffn_hidden_size=4096,
                 gated_mlp=True, vocab_size=32000, moe=MoeSpec(num_experts=256, top_k=8, expert_ffn_hidden_size=2048))
T = 4096


def _layouts(ep, etp=1):
    base = dict(tp=1, pp=1, vpp=1, cp=1, ep=ep, etp=etp, sp=False, zero_stage=1, mbs=1, dp=ep, num_mb=1)
    return layouts_from_arrays(**{k: [v] for k, v in base.items()})


def test_touch_probability_by_hand():
    """8 experts, 2 per rank, top-2: 1 - C(6, 2) / C(8, 2) = 1 - 15/28 = 13/28."""
    assert touch_probability(8, 2, 2) == pytest.approx(13 / 28)
    assert touch_probability(256, 8, 8) == pytest.approx(1 - comb(248, 8) / comb(256, 8))


def test_bandwidth_between_measured_sm_counts_and_outside_them():
    """HybridEP on GB200 at EP32: 16 SMs 485.50 / 236.33 / 423.19 GB/s, 32 SMs 484.22 / 392.70 /
    464.54; 24 SMs is their mean; 8 SMs holds the 16-SM point; EP12 and the H100 were not measured."""
    mid = bandwidths("hybridep", "gb200-nvl72", 32, 24)
    assert mid == pytest.approx(((485.50 + 484.22) / 2e-9, (236.33 + 392.70) / 2e-9, (423.19 + 464.54) / 2e-9))
    assert bandwidths("hybridep", "gb200-nvl72", 32, 8) == pytest.approx((485.50e9, 236.33e9, 423.19e9))
    assert bandwidths("hybridep", "gb200-nvl72", 12, 32) is None
    assert bandwidths("deepep", "h100-sxm", 8, 20) is None


def test_flex_layer_by_hand_hybridep_ep32():
    """EP32, 4,096 tokens per GPU, 256 experts top-8, h 7,168: a rank receives 32 x 4096 x p_touch
    tokens; dispatch at 484.22 GB/s and combine at 464.54 GB/s (32 SMs), 2 bytes per element."""
    stack = sw(moe_dispatcher="flex", moe_flex_backend="hybridep", moe_flex_num_sms=32)
    s, measured = flex_layer_s(DSV3, [T], [32], [1], 1.0, GB200, stack, FP8_DISPATCH_BYTES_PER_ELEMENT)
    rows = 32 * T * touch_probability(256, 8, 8) * 7168
    assert bool(measured[0])
    assert s[0] == pytest.approx(rows * 2 / 484.22e9 + rows * 2 / 464.54e9)
    # FP8 dispatch: the FP8 column at 1 + 4/128 bytes per element; the combine stays 16-bit.
    fp8 = sw(moe_dispatcher="flex", moe_flex_backend="hybridep", moe_flex_num_sms=32, moe_dispatch_fp8=True)
    s8, _ = flex_layer_s(DSV3, [T], [32], [1], 1.0, GB200, fp8, FP8_DISPATCH_BYTES_PER_ELEMENT)
    assert s8[0] == pytest.approx(rows * (1 + 4 / 128) / 392.70e9 + rows * 2 / 464.54e9)


def test_unmeasured_groups_keep_the_fabric_model():
    """EP64 (not in the table), expert tensor parallelism, another GPU: ep_layer_s is the fabric
    model's, which inside one domain is the alltoall dispatcher's."""
    flex = sw(moe_dispatcher="flex", moe_flex_backend="hybridep")
    a2a = sw(moe_dispatcher="alltoall")
    for hw, L in ((GB200, _layouts(64)), (GB200, _layouts(32, etp=2)), (H100, _layouts(8))):
        assert ep_layer_s(DSV3, L, T, hw, hw.efficiency, flex) == pytest.approx(
            ep_layer_s(DSV3, L, T, hw, hw.efficiency, a2a))


def test_measured_flex_layer_replaces_the_fabric_model():
    L = _layouts(32)
    stack = sw(moe_dispatcher="flex", moe_flex_backend="deepep", moe_flex_num_sms=24)
    got = ep_layer_s(DSV3, L, T, GB200, GB200.efficiency, stack)
    rows = 32 * T * touch_probability(256, 8, 8) * 7168
    # DeepEP at EP32 on GB200, 24 SMs: about 400 and 190 GB/s (Megatron-LM GB200 guide sec. 2.2.1).
    assert np.asarray(got)[0] == pytest.approx(rows * 2 / 400e9 + rows * 2 / 190e9)
