"""The head-dim factor on the fused attention kernel's efficiency, checked by hand against the
published rates (perfmodel.spec.attention_head_dim)."""

import pytest
from support import sw

from perfmodel.formulas.compute import ATTENTION_BWD_OVER_FWD_EXECUTED, FA3_OVER_CUDNN, op_time
from perfmodel.formulas.layouts import layouts_from_arrays
from perfmodel.formulas.workload import LayerKind, OpKind, layer_ops
from perfmodel.spec.attention_head_dim import effective_head_dim, head_dim_factor
from perfmodel.spec.efficiency import AttentionEfficiency
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.model import ModelSpec

H100 = load_hardware("h100-sxm")


def _layouts():
    base = dict(tp=1, pp=1, vpp=1, cp=1, ep=1, etp=1, sp=False, zero_stage=0, mbs=1, dp=1, num_mb=1)
    return layouts_from_arrays(**{k: [v] for k, v in base.items()})


def test_factor_by_hand_between_and_outside_the_published_head_dims():
    # FA2 on an H100 (FA3 paper fig. 5, causal forward at 4k: 284 at 64, 319 at 128, 293 at 256 TFLOP/s):
    # head dim 96 lies halfway between 64 and 128.
    assert head_dim_factor("flash", "hopper", False, 96, 128) == pytest.approx((284 + 0.5 * (319 - 284)) / 319)
    # MLA's 192/128 runs at head dim 160, a quarter of the way from 128 to 256.
    assert effective_head_dim(192, 128) == 160
    assert head_dim_factor("flash", "hopper", False, 160, 128) == pytest.approx((319 + 0.25 * (293 - 319)) / 319)
    # the backward figure (fig. 6) stops at 128: clamped above it, and below 64
    assert head_dim_factor("flash", "hopper", True, 192, 128) == pytest.approx(1.0)
    assert head_dim_factor("cudnn", "hopper", True, 32, 128) == pytest.approx(417 / 499)
    # an A100 curve measured at head dim 64 (Azure), run at 128 (FA2 paper fig. 4: 156 and 173)
    assert head_dim_factor("flash", "ampere", False, 128, 64) == pytest.approx(173 / 156)
    # no stated basis, or a pair with no published rates: the curve applies at every head dim
    assert head_dim_factor("flash", None, False, 64, 128) == 1.0
    assert head_dim_factor("flash", "hopper", False, 64, None) == 1.0
    assert head_dim_factor("cudnn", "ampere", False, 64, 128) == 1.0


def test_fa3_over_cudnn_is_the_tables_ratio_at_head_dim_128():
    assert FA3_OVER_CUDNN[False] == pytest.approx(579 / 518)
    assert FA3_OVER_CUDNN[True] == pytest.approx(542 / 499)


def test_head_dim_64_attention_runs_at_the_cudnn_curve_times_its_factor():
    """A head-dim-64 model at a cuDNN curve measured at 128 on Hopper: forward at 363/518 of the curve,
    backward at 417/499; the same curve with no stated head dim runs at the curve itself."""
    m = ModelSpec(num_layers=2, hidden_size=4096, num_attention_heads=64, ffn_hidden_size=16384, vocab_size=32000)
    assert m.attn_head_dim == 64
    core = next(op for op in layer_ops(m, LayerKind.DENSE, sw()) if op.kind is OpKind.ATTENTION)
    cud = AttentionEfficiency(fwd_efficiency_max=0.6, bwd_efficiency_max=0.5, half_seq=0.0,
                              measured_head_dim=128, measured_generation="hopper")
    eff = H100.efficiency.model_copy(update={"attention_cudnn": cud, "attention_clock_ratio": 1.0})
    t = op_time(core, m, _layouts(), 8192, "bf16", H100, eff, sw(attention_backend="cudnn"))
    flop, peak, t0 = float(t.fwd_flop[0]), H100.gpu.peak_flop_per_s("bf16"), eff.kernel_overhead_s
    assert float(t.fwd_s[0]) == pytest.approx(t0 + flop / (peak * 0.6 * 363 / 518))
    assert float(t.bwd_s[0]) == pytest.approx(t0 + ATTENTION_BWD_OVER_FWD_EXECUTED * flop / (peak * 0.5 * 417 / 499))
    unstated = eff.model_copy(update={"attention_cudnn": cud.model_copy(update={"measured_head_dim": None})})
    u = op_time(core, m, _layouts(), 8192, "bf16", H100, unstated, sw(attention_backend="cudnn"))
    assert float(u.fwd_s[0]) == pytest.approx(t0 + flop / (peak * 0.6))
