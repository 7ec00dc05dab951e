"""torchtitan's Llama block under torch.compile (``elementwise_kernels: compiled``), checked by hand:
the fused norms and SwiGLU, and the rotary embedding and repeat_kv that Inductor does not fuse."""

import pytest
from support import SW, sw

from perfmodel.formulas.eager import COMPILED_ROPE_FWD_BYTES_PER_ELEMENT
from perfmodel.formulas.workload import LayerKind, layer_ops
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.model import ModelSpec

LLAMA3_8B = ModelSpec(name="Llama 3.1 8B", num_layers=32, hidden_size=4096, num_attention_heads=32,
                      num_query_groups=8, ffn_hidden_size=14336, gated_mlp=True, vocab_size=128256)
TINY = ModelSpec(name="tiny", num_layers=2, hidden_size=8, num_attention_heads=2, num_query_groups=1,
                 head_dim=4, ffn_hidden_size=16, gated_mlp=True, vocab_size=32)
NO_GQA = TINY.model_copy(update={"num_query_groups": 2})


def _ops(m, kernels):
    return {op.name: op for op in layer_ops(m, LayerKind.DENSE, sw(elementwise_kernels=kernels))}


def test_compiled_rope_bytes_by_hand():
    # upcast 2 + 4 and the ATen complex multiply 4 + 4 per element of Q and K
    assert COMPILED_ROPE_FWD_BYTES_PER_ELEMENT == 14
    # TINY: Q a d = 8, K g d = 4 (one KV head for two query heads).
    # upcast + multiply 14 x 12 = 168; Q cast back 6 x 8 = 48; K cast back fused with its
    # repeat: read 4 x 4, write 2 x 8 = 32 -> 248 bytes, 6 kernels; V copy 2 x 4 + 2 x 8 = 24, 1 kernel
    ops = _ops(TINY, "compiled")
    assert ops["attention/rope"].bytes_per_token == 248 and ops["attention/rope"].kernels == 6
    assert ops["attention/rope"].bwd_bytes_per_token == 248 and ops["attention/rope"].bwd_kernels == 6
    assert ops["attention/repeat_kv"].bytes_per_token == 24 and ops["attention/repeat_kv"].bwd_bytes_per_token == 24
    assert ops["attention/rope"].stream_class is None and ops["attention/repeat_kv"].stream_class is None


def test_compiled_rope_without_gqa_has_no_copy():
    # a = g = 2, d 4: Q = K = 8 wide; 14 x 16 + 6 x 8 + (4 + 2) x 8 = 320; no repeat_kv
    ops = _ops(NO_GQA, "compiled")
    assert ops["attention/rope"].bytes_per_token == 320
    assert "attention/repeat_kv" not in ops


def test_llama3_8b_compiled_rope_matches_the_step_check_count():
    # Q 4,096 and K 1,024 wide: 14 x 5,120 + 6 x 4,096 + 4 x 1,024 + 2 x 4,096 = 108,544; V 2,048 + 8,192
    ops = _ops(LLAMA3_8B, "compiled")
    fwd = ops["attention/rope"].bytes_per_token + ops["attention/repeat_kv"].bytes_per_token
    assert ops["attention/rope"].bytes_per_token == 108_544 and fwd == 118_784
    # the compiled step check (calibration/results/nvidia-h100-80gb-hbm3-2026-11-27/
    # step_check_llama3-8b_4l_s8192_compiled/kernels.txt): these kernels of one layer's forward and
    # backward took 70.0 + 65.9 + 33.8 + 30.75 + 67.5 + 35.1 + 109.7 + 4 x 62.7 us = 664 us at
    # 8,192 tokens; at the H100's STREAM rate (3,350 GB/s x memory efficiency) the count gives
    h100 = load_hardware("h100-sxm")
    stream_bytes_per_s = h100.gpu.hbm_bandwidth_bytes_per_s * h100.efficiency.memory_efficiency
    predicted_s = 2 * fwd * 8192 / stream_bytes_per_s
    measured_s = (70.0 + 65.9 + 33.8 + 30.75 + 67.5 + 35.1 + 109.7 + 4 * 62.7) * 1e-6
    assert predicted_s == pytest.approx(measured_s, rel=0.10)


def test_compiled_keeps_the_fused_ops_and_adds_only_rope():
    fused, compiled = _ops(LLAMA3_8B, "fused"), _ops(LLAMA3_8B, "compiled")
    assert set(compiled) - set(fused) == {"attention/rope", "attention/repeat_kv"}
    for name, op in fused.items():
        assert compiled[name] == op
    assert SW.elementwise_kernels == "fused"          # the Megatron-Core default is unchanged
