"""Megatron-Core's eager paths beside its fused kernels (unfused rotary, unfused bias add, the
per-expert bias loop, a GLU's clamp), each checked by hand on a small MoE layer."""

import numpy as np
import pytest
from support import sw

from perfmodel.engine.block import block_time
from perfmodel.formulas.activations import activation_bytes_per_layer
from perfmodel.formulas.layouts import layouts_from_arrays
from perfmodel.formulas.megatron_eager import expert_bias_bytes_per_element
from perfmodel.formulas.workload import LayerKind, layer_ops
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.model import MlaSpec, ModelSpec, MoeSpec

H100 = load_hardware("h100-sxm")
EFF = H100.efficiency
BASE = dict(name="moe", num_layers=2, hidden_size=1024, num_attention_heads=8, num_query_groups=2,
            ffn_hidden_size=4096, gated_mlp=True, vocab_size=32000,
            moe=MoeSpec(num_experts=8, top_k=2, expert_ffn_hidden_size=512))
PLAIN = ModelSpec(**BASE)
OSS = ModelSpec(**BASE, linear_bias=True, clamped_glu=True)   # GPT-OSS-like: biases, clamped GLU
T = 4096                                     # tokens per GPU and micro-batch (mbs 1, seq 4096, no TP/CP)
BW = 3350e9 * 0.87                           # h100-sxm HBM bandwidth x memory_efficiency
T0 = 5.6e-6                                  # h100-sxm kernel_overhead_s
MEGATRON = dict(rotary_fusion=False, bias_dropout_fusion=False)


def _layouts():
    base = dict(tp=1, pp=1, vpp=1, cp=1, ep=1, etp=1, sp=False, zero_stage=0, mbs=1, dp=1, num_mb=1)
    return layouts_from_arrays(**{k: [v] for k, v in base.items()})


def _ops(model, kind, stack):
    blk = block_time(layer_ops(model, kind, stack), model, _layouts(), T, "bf16", H100, EFF, stack)
    return {t.name: t for t in blk.ops}


def test_defaults_add_nothing():
    """A model without biases or clamp, on the default (fused) paths, has none of these ops; the
    GPT-OSS-like model on fused paths with the TE op fuser has none either."""
    names = set(_ops(PLAIN, LayerKind.MOE, sw(**MEGATRON)))
    assert "residual/bias" not in names and "moe/expert_bias" not in names
    fused = _ops(OSS, LayerKind.MOE, sw(moe_te_op_fuser=True))
    assert not {"attention/rope", "residual/bias", "moe/expert_bias"} & set(fused)
    assert fused["mlp/activation"].fwd_s[0] == _ops(PLAIN, LayerKind.MOE, sw())["mlp/activation"].fwd_s[0]


def test_unfused_rope_by_hand():
    """Q 8 x 128 = 1024 and K 2 x 128 = 256 elements a token; forward 24 bytes each in 12 kernels
    per tensor, backward 20 bytes in 5: 4096 x 1280 x 24 / BW + 24 T0, and x 20 / BW + 10 T0."""
    rope = _ops(PLAIN, LayerKind.MOE, sw(rotary_fusion=False))["attention/rope"]
    assert float(rope.fwd_s[0]) == pytest.approx(T * 1280 * 24 / BW + 24 * T0, rel=1e-9)
    assert float(rope.bwd_s[0]) == pytest.approx(T * 1280 * 20 / BW + 10 * T0, rel=1e-9)


def test_bias_add_sites_by_hand():
    """One unfused bias add in a MoE layer (the attention output; the experts add their own),
    two in a dense layer: 4 bytes per element forward, 2 backward (the bias gradient's reduction)."""
    moe = _ops(OSS, LayerKind.MOE, sw(**MEGATRON))["residual/bias"]
    dense = _ops(OSS, LayerKind.DENSE, sw(**MEGATRON))["residual/bias"]
    assert float(moe.fwd_s[0]) == pytest.approx(T * 1024 * 4 / BW + T0, rel=1e-9)
    assert float(moe.bwd_s[0]) == pytest.approx(T * 1024 * 2 / BW + T0, rel=1e-9)
    assert float(dense.fwd_s[0]) == pytest.approx(2 * T * 1024 * 4 / BW + 2 * T0, rel=1e-9)


def test_expert_bias_loop_by_hand():
    """bf16 probabilities: 12 bytes forward, 16 backward per element of the routed output
    (b * p writes 2; t + b p reads 4, writes 2; cat reads and writes 2; .to is a no-op), fp32
    (flex dispatcher): 28 and 40. Top-2 of 1024 wide: 2048 elements a token."""
    assert expert_bias_bytes_per_element(2) == (12, 16)
    assert expert_bias_bytes_per_element(4) == (28, 40)
    op = _ops(OSS, LayerKind.MOE, sw(**MEGATRON))["moe/expert_bias"]
    assert float(op.fwd_s[0]) == pytest.approx(T * 2048 * 12 / BW + 3 * T0, rel=1e-9)
    assert float(op.bwd_s[0]) == pytest.approx(T * 2048 * 16 / BW + 5 * T0, rel=1e-9)


def test_clamp_joins_the_activation():
    """The clamp adds 8 bytes forward and 10 backward per element of the routed fc1 output
    (2 x 512 x top-2 = 2048 a token) to the fused activation, whose own backward stays twice its
    forward; so it is recomputed with it under moe_act."""
    plain = _ops(PLAIN, LayerKind.MOE, sw())["mlp/activation"]
    clamped = _ops(OSS, LayerKind.MOE, sw())["mlp/activation"]
    base_fwd_bytes = float(plain.fwd_bytes[0])
    assert float(clamped.fwd_s[0]) == pytest.approx((base_fwd_bytes + T * 2048 * 8) / BW + 5 * T0, rel=1e-9)
    assert float(clamped.bwd_s[0]) == pytest.approx((2 * base_fwd_bytes + T * 2048 * 10) / BW + 4 * T0, rel=1e-9)


def test_clamp_keeps_a_second_copy_unless_recomputed():
    """Without moe_act recompute the clamped copy (2 x 512 x 2 bytes per routed copy, top-2) is
    kept beside the fc1 output: 4096 bytes a token more; under moe_act, or with the op fuser, not."""
    def act(model, recompute="none", **kw):
        stack = sw(selective_recompute=("moe_act",), **kw) if recompute == "selective" else sw(**kw)
        return float(activation_bytes_per_layer(model, LayerKind.MOE, 4096, 1, np.array([1.0]), np.array([False]),
                                                1, 1, recompute, "bf16", stack, hidden_dropout=False)[0])
    assert act(OSS) - act(PLAIN) == pytest.approx(4096 * 2 * (2 * 512 * 2))
    assert act(OSS, "selective") == pytest.approx(act(PLAIN, "selective"))
    assert act(OSS, moe_te_op_fuser=True) == pytest.approx(act(PLAIN))


MLA_MODEL = ModelSpec(**{**BASE, "num_query_groups": 8},
                      mla=MlaSpec(q_lora_rank=256, kv_lora_rank=128, qk_nope_head_dim=128, qk_rope_head_dim=64,
                                  v_head_dim=128))


def test_mla_qkv_fused_by_hand():
    """Fused (Megatron-Core's Triton key/value kernel): reads kv 8 x (128 + 128) and the rotary key
    64, writes the key 8 x 192 and the value 8 x 128: 2 bytes each, one kernel, the same backward.
    A model without MLA has no such op."""
    op = _ops(MLA_MODEL, LayerKind.MOE, sw())["attention/mla_qkv"]
    walked = 2 * (8 * 256 + 64 + 8 * 192 + 8 * 128)
    assert float(op.fwd_s[0]) == pytest.approx(T * walked / BW + T0, rel=1e-9)
    assert float(op.bwd_s[0]) == pytest.approx(T * walked / BW + T0, rel=1e-9)
    assert "attention/mla_qkv" not in _ops(PLAIN, LayerKind.MOE, sw())


def test_mla_qkv_eager_by_hand():
    """Eager: the de-interleave of the rotary query (8 x 64) and key (64), 4 bytes an element
    forward and 14 backward in 5 kernels each; the query and key cats (4 bytes x 8 x 192 each) and
    the value copy (4 x 8 x 128) forward; the two splits' gradients (4 x 8 x 192, 4 x 8 x 256) and
    the rotary key's sum over heads (2 x 8 x 64) backward. The rotation itself stays the rope op's."""
    ops = _ops(MLA_MODEL, LayerKind.MOE, sw(rotary_fusion=False))
    rotary = 8 * 64 + 64
    fwd = 4 * rotary + 4 * 8 * 192 * 2 + 4 * 8 * 128
    bwd = 14 * rotary + 4 * 8 * 192 + 4 * 8 * 256 + 2 * 8 * 64
    op = ops["attention/mla_qkv"]
    assert float(op.fwd_s[0]) == pytest.approx(T * fwd / BW + 5 * T0, rel=1e-9)
    assert float(op.bwd_s[0]) == pytest.approx(T * bwd / BW + 13 * T0, rel=1e-9)
    assert "attention/rope" in ops


def _fp8_ops(stack):
    blk = block_time(layer_ops(PLAIN, LayerKind.MOE, stack), PLAIN, _layouts(), T, "fp8", H100, EFF, stack)
    return {t.name: t for t in blk.ops}


def test_fp8_padding_by_hand():
    """TEGroupedMLP's Fp8Padding / Fp8Unpadding: top-2 copies of the 1024-wide token, 8 bytes per
    element each way plus the bf16 probabilities' padding (2 x 2 bytes a copy), 3 kernels each way."""
    pad = _fp8_ops(sw(moe_expert_fp8_padding=True))["moe/fp8_padding"]
    walked = T * 2 * (8 * 1024 + 4)
    assert float(pad.fwd_s[0]) == pytest.approx(walked / BW + 3 * T0, rel=1e-9)
    assert float(pad.bwd_s[0]) == pytest.approx(walked / BW + 3 * T0, rel=1e-9)


def test_fp8_padding_runs_only_where_the_copies_do():
    """No copies in bf16, when padded to capacity, behind HybridEP (it pads as it dispatches) or
    with the option off (the presets of frameworks other than Megatron-Core; on by default)."""
    on = dict(moe_expert_fp8_padding=True)
    bf16 = block_time(layer_ops(PLAIN, LayerKind.MOE, sw(**on)), PLAIN, _layouts(), T, "bf16", H100, EFF, sw(**on))
    assert float({t.name: t for t in bf16.ops}["moe/fp8_padding"].fwd_s[0]) == 0.0
    assert {t.name: t for t in bf16.ops}["moe/fp8_padding"].host_ops_fwd == 0
    for stack in (sw(moe_expert_fp8_padding=False), sw(**on, moe_expert_capacity_factor=1.0, moe_pad_expert_input_to_capacity=True),
                  sw(**on, moe_dispatcher="flex", moe_flex_backend="hybridep")):
        assert "moe/fp8_padding" not in _fp8_ops(stack)
    assert "moe/fp8_padding" in _fp8_ops(sw(**on, moe_dispatcher="flex", moe_flex_backend="deepep"))


def test_quantisation_kernels_per_expert():
    """GroupedLinear quantises expert by expert unless the recipe is delayed scaling: MXFP8 one
    kernel per local expert, current scaling three (amax, scale, cast); the kernels beyond the
    first of each of the two quantisations (input forward, output gradient backward) are launches
    inside the one host operation."""
    from perfmodel.formulas.fp8_casts import quantisation_cast
    assert quantisation_cast("moe/expert_up", 8, sw()) == (0.0, 0.0, 1)
    assert sw().moe_expert_fp8_padding and not sw(stack="torchtitan-eager").moe_expert_fp8_padding
    assert quantisation_cast("moe/expert_up", 8, sw(fp8_mxfp8=True)) == (0.0, 0.0, 8)
    assert quantisation_cast("moe/expert_up", 8, sw(fp8_current_scaling=True)) == (2, 2, 24)
    assert quantisation_cast("attention/qkv", 1, sw(fp8_current_scaling=True)) == (0.0, 2, 3)
    up = {False: None, True: None}
    for v in up:
        stack = sw(fp8_mxfp8=v)
        blk = block_time(layer_ops(PLAIN, LayerKind.MOE, stack), PLAIN, _layouts(), T, "fp8", H100, EFF, stack)
        up[v] = {t.name: t for t in blk.ops}["moe/expert_up"]
    assert np.all(np.asarray(up[True].extra_launches - up[False].extra_launches) == (8 - 1) * 2)
