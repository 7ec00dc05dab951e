"""Roofline formulas checked by hand."""

import pytest
from support import SW, sw

from perfmodel.engine.block import block_time
from perfmodel.formulas.compute import (
    ATTENTION_BWD_OVER_FWD_EXECUTED,
    BACKWARD_HOST_OPS_OVER_FORWARD,
    CUDA_GRAPH_LAUNCHES_PER_LAYER,
    gemm_efficiency,
    gemm_shape,
    gemm_time_s,
    op_time,
)
from perfmodel.formulas.layouts import layouts_from_arrays
from perfmodel.formulas.workload import LayerKind, OpKind, layer_ops
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.scenario import parse_scenario
from perfmodel.spec.software import SoftwareStack

H100 = load_hardware("h100-sxm")


def _layouts(**kw):
    base = dict(tp=1, pp=1, vpp=1, cp=1, ep=1, etp=1, sp=False, zero_stage=0, mbs=1, dp=1, num_mb=1)
    base.update(kw)
    return layouts_from_arrays(**{k: [v] for k, v in base.items()})


def test_large_square_gemm_runs_near_eff_max():
    g = H100.efficiency.gemm["bf16"]
    n = 16384
    t = float(gemm_time_s(n, n, n, 1, "bf16", H100, H100.efficiency))
    eff = g.efficiency_max * (n / (n + g.half_dim)) ** 3
    assert t == pytest.approx(H100.efficiency.kernel_overhead_s + 2 * n**3 / (989.4e12 * eff))


def test_skinny_gemm_is_memory_bound():
    # 1 x 8192 x 8192: 2*8192^2 FLOPs, but 2 bytes * 8192^2 of weights to read
    t = float(gemm_time_s(1, 8192, 8192, 1, "bf16", H100, H100.efficiency))
    bw = H100.gpu.hbm_bandwidth_bytes_per_s * H100.efficiency.memory_efficiency
    assert t == pytest.approx(H100.efficiency.kernel_overhead_s + 2 * (8192 + 8192**2 + 8192) / bw)


def test_efficiency_is_monotone_in_each_dimension():
    e = [float(gemm_efficiency(m, 4096, 4096, "bf16", H100.efficiency)) for m in (64, 256, 1024, 8192)]
    assert e == sorted(e)


def test_column_and_row_parallel_shapes():
    m = ModelSpec(num_layers=2, hidden_size=4096, num_attention_heads=32, ffn_hidden_size=16384, vocab_size=32000)
    ops = {op.name: op for op in layer_ops(m, LayerKind.DENSE, SW)}
    L = _layouts(tp=4, sp=True, mbs=2)
    up = gemm_shape(ops["mlp/up"], m, L, 2048, SW)
    down = gemm_shape(ops["mlp/down"], m, L, 2048, SW)
    assert (up.m[0], up.n[0], up.k[0]) == (4096, 16384 / 4, 4096)
    assert (down.m[0], down.n[0], down.k[0]) == (4096, 4096, 16384 / 4)


def test_attention_flops_by_hand_causal():
    m = ModelSpec(num_layers=2, hidden_size=4096, num_attention_heads=32, ffn_hidden_size=16384, vocab_size=32000)
    core = next(op for op in layer_ops(m, LayerKind.DENSE, SW) if op.kind is OpKind.ATTENTION)
    s = 4096
    t = op_time(core, m, _layouts(tp=2), s, "bf16", H100, H100.efficiency, SW)
    # 2 matmuls x 2 FLOP x (a/tp) heads x d x (s/2 keys) x s tokens
    assert float(t.fwd_flop[0]) == pytest.approx(2 * 2 * 16 * 128 * (s / 2) * s)
    assert float(t.bwd_s[0] / t.fwd_s[0]) > ATTENTION_BWD_OVER_FWD_EXECUTED * 0.99


def test_cudnn_attention_runs_at_its_own_curve_and_falls_back_to_flash_where_unmeasured():
    """attention_backend cudnn: the attention op's time at the cuDNN curve, by hand (fwd and bwd
    efficiencies at the kernel's length, times the clock ratio, plus the kernel overhead); with no
    cuDNN curve the flash
    one; flash ignores the cuDNN curve."""
    from perfmodel.spec.efficiency import AttentionEfficiency
    m = ModelSpec(num_layers=2, hidden_size=4096, num_attention_heads=32, ffn_hidden_size=16384, vocab_size=32000)
    core = next(op for op in layer_ops(m, LayerKind.DENSE, SW) if op.kind is OpKind.ATTENTION)
    s, L = 8192, _layouts(mbs=1)
    cud = AttentionEfficiency(fwd_efficiency_max=0.6, bwd_efficiency_max=0.5, half_seq=0.0)
    eff = H100.efficiency.model_copy(update={"attention_cudnn": cud, "attention_clock_ratio": 0.9})
    t = op_time(core, m, L, s, "bf16", H100, eff, sw(attention_backend="cudnn"))
    flop = float(t.fwd_flop[0])
    peak = H100.gpu.peak_flop_per_s("bf16")
    t0 = eff.kernel_overhead_s     # every kernel's own overhead
    assert float(t.fwd_s[0]) == pytest.approx(t0 + flop / (peak * 0.6 * 0.9))
    assert float(t.bwd_s[0]) == pytest.approx(t0 + ATTENTION_BWD_OVER_FWD_EXECUTED * flop / (peak * 0.5 * 0.9))
    flash = op_time(core, m, L, s, "bf16", H100, eff, SW)
    unmeasured = op_time(core, m, L, s, "bf16", H100, eff.model_copy(update={"attention_cudnn": None}),
                         sw(attention_backend="cudnn"))
    assert float(unmeasured.fwd_s[0]) == float(flash.fwd_s[0]) and float(unmeasured.bwd_s[0]) == float(flash.bwd_s[0])
    assert float(flash.fwd_s[0]) > float(t.fwd_s[0])


def test_fp8_gemm_pays_cast_traffic_and_runs_at_fp8_peak():
    m = ModelSpec(num_layers=2, hidden_size=8192, num_attention_heads=64, ffn_hidden_size=28672, vocab_size=32000)
    up = next(op for op in layer_ops(m, LayerKind.DENSE, SW) if op.name == "mlp/up")
    L = _layouts(mbs=1)
    t8 = op_time(up, m, L, 8192, "fp8", H100, H100.efficiency, SW)
    t16 = op_time(up, m, L, 8192, "bf16", H100, H100.efficiency, SW)
    assert float(t8.fwd_s[0]) < float(t16.fwd_s[0])
    sh = gemm_shape(up, m, L, 8192, SW)
    cast = (H100.efficiency.kernel_overhead_s
            + sh.m[0] * sh.k[0] * (2 + 1 + 1) / (H100.gpu.hbm_bandwidth_bytes_per_s * H100.efficiency.memory_efficiency))
    # the forward GEMM runs with fast accumulation (Efficiencies.fp8_fast_accum_speedup)
    gemm = float(gemm_time_s(sh.m, sh.n, sh.k, 1, "fp8", H100, H100.efficiency, fast_accum=True)[0])
    assert float(t8.fwd_s[0]) == pytest.approx(gemm + cast)


def test_fp8_casts_fused_into_their_producer_save_the_re_read_of_the_16_bit_input_by_hand():
    """fp8_casts: fused writes the 1-byte copy and its transpose (2 bytes per element), where the
    separate cast-transpose kernel also reads the 2-byte tensor (4): the difference is 2 bytes of
    the GEMM input forward and of the output gradient backward, at the HBM rate. Kernel counts
    and the 16-bit GEMMs do not change."""
    m = ModelSpec(num_layers=2, hidden_size=8192, num_attention_heads=64, ffn_hidden_size=28672, vocab_size=32000)
    up = next(op for op in layer_ops(m, LayerKind.DENSE, SW) if op.name == "mlp/up")
    L = _layouts(mbs=1)
    sep, fus = (op_time(up, m, L, 8192, "fp8", H100, H100.efficiency, sw(fp8_casts=c)) for c in ("separate", "fused"))
    sh = gemm_shape(up, m, L, 8192, SW)
    rate = H100.gpu.hbm_bandwidth_bytes_per_s * H100.efficiency.memory_efficiency
    assert float(sep.fwd_s[0] - fus.fwd_s[0]) == pytest.approx(2 * sh.m[0] * sh.k[0] / rate)
    assert float(sep.bwd_s[0] - fus.bwd_s[0]) == pytest.approx(2 * sh.m[0] * sh.n[0] / rate)
    assert sep.host_ops_fwd == fus.host_ops_fwd
    b16 = [op_time(up, m, L, 8192, "bf16", H100, H100.efficiency, sw(fp8_casts=c)) for c in ("separate", "fused")]
    assert float(b16[0].fwd_s[0]) == float(b16[1].fwd_s[0]) and float(b16[0].bwd_s[0]) == float(b16[1].bwd_s[0])


def test_fp8_fast_accumulation_speeds_up_the_forward_gemm_only_by_hand():
    m = ModelSpec(num_layers=2, hidden_size=8192, num_attention_heads=64, ffn_hidden_size=28672, vocab_size=32000)
    up = next(op for op in layer_ops(m, LayerKind.DENSE, SW) if op.name == "mlp/up")
    L = _layouts(mbs=1)
    precise = H100.efficiency.model_copy(update={"fp8_fast_accum_speedup": 1.0})
    fast = H100.efficiency.model_copy(update={"fp8_fast_accum_speedup": 1.25})
    a, b = (op_time(up, m, L, 8192, "fp8", H100, e, SW) for e in (precise, fast))
    sh = gemm_shape(up, m, L, 8192, SW)
    flop = 2.0 * sh.m[0] * sh.n[0] * sh.k[0]
    rate = 1978.9e12 * float(gemm_efficiency(sh.m, sh.n, sh.k, "fp8", precise)[0])
    # the forward GEMM's math time drops by 1 - 1/1.25; its overhead, the casts and the backward stay
    assert float(a.fwd_s[0] - b.fwd_s[0]) == pytest.approx(flop / rate * (1 - 1 / 1.25))
    assert float(b.bwd_s[0]) == pytest.approx(float(a.bwd_s[0]))
    # 16-bit GEMMs have no such mode
    assert float(op_time(up, m, L, 8192, "bf16", H100, fast, SW).fwd_s[0]) == pytest.approx(
        float(op_time(up, m, L, 8192, "bf16", H100, precise, SW).fwd_s[0]))


def test_expert_gemm_flops_do_not_depend_on_ep_when_balanced():
    m = ModelSpec(num_layers=2, hidden_size=4096, num_attention_heads=32, num_query_groups=8, ffn_hidden_size=14336,
                  gated_mlp=True, vocab_size=32000,
                  moe=dict(num_experts=8, top_k=2, expert_ffn_hidden_size=14336))
    up = next(op for op in layer_ops(m, LayerKind.MOE, SW) if op.name == "moe/expert_up")
    flops = [float(op_time(up, m, _layouts(ep=ep), 4096, "bf16", H100, H100.efficiency, SW).fwd_flop[0]) for ep in (1, 2, 8)]
    # tokens * top_k * 2 * h * 2f
    assert flops == pytest.approx([4096 * 2 * 2 * 4096 * 2 * 14336] * 3)


def test_every_kernel_pays_the_calibrated_overhead():
    """t = t0 + roofline: a vanishing GEMM costs exactly the per-kernel intercept."""
    t = float(gemm_time_s(1, 1, 1, 3, "bf16", H100, H100.efficiency))
    assert t == pytest.approx(3 * H100.efficiency.kernel_overhead_s, rel=1e-2)


def _gpt_core(h=2048, a=32):
    m = ModelSpec(num_layers=2, hidden_size=h, num_attention_heads=a, ffn_hidden_size=4 * h, vocab_size=32000)
    return m, next(op for op in layer_ops(m, LayerKind.DENSE, SW) if op.kind is OpKind.ATTENTION)


def test_unfused_attention_moves_the_scores_through_hbm_by_hand():
    # d = 64: every batched attention GEMM has intensity ~d FLOP/byte, under H100's ridge, so
    # each one costs its bytes. Forward: Q K^T (s*d + d*s + s^2), softmax (read + write s^2),
    # P V (s^2 + s*d + s*d). Backward: dP, dV, dQ, dK (each 2*s*d + s^2) and the softmax
    # backward (read P and dP, write dS: 3 s^2). 2 bytes each; batch = micro-batch x heads / tp.
    m, core = _gpt_core()
    s, d, tp, mbs = 4096, 64, 2, 2
    eff = H100.efficiency
    bw = H100.gpu.hbm_bandwidth_bytes_per_s * eff.memory_efficiency
    batch = mbs * 32 / tp
    t = op_time(core, m, _layouts(tp=tp, mbs=mbs), s, "bf16", H100, eff, sw(attention_backend="unfused"))
    fwd = 3 * eff.kernel_overhead_s + 2 * batch * (4 * s * d + 4 * s * s) / bw
    bwd = 5 * eff.kernel_overhead_s + 2 * batch * (8 * s * d + 7 * s * s) / bw
    assert float(t.fwd_s[0]) == pytest.approx(fwd, rel=1e-9)
    assert float(t.bwd_s[0]) == pytest.approx(bwd, rel=1e-9)
    # the whole s x s block is computed: no causal halving
    assert float(t.fwd_flop[0]) == pytest.approx(2 * 2 * batch * d * s * s)
    assert bool(t.fwd_memory_bound[0])


def test_unfused_attention_costs_more_than_flash_and_matters_less_for_wide_models():
    ratios = []
    for h, a in ((2048, 16), (12288, 96)):
        m, core = _gpt_core(h, a)
        L = _layouts(tp=1)
        fl = op_time(core, m, L, 2048, "bf16", H100, H100.efficiency, SW)
        un = op_time(core, m, L, 2048, "bf16", H100, H100.efficiency, sw(attention_backend="unfused"))
        assert float(un.fwd_s[0] + un.bwd_s[0]) > float(fl.fwd_s[0] + fl.bwd_s[0])
        gemms = sum(float(o.fwd_s[0] + o.bwd_s[0]) for o in
                    (op_time(op, m, L, 2048, "bf16", H100, H100.efficiency, SW) for op in layer_ops(m, LayerKind.DENSE, SW))
                    if o.kind is OpKind.GEMM)
        ratios.append(float(un.fwd_s[0] + un.bwd_s[0]) / gemms)
    # score traffic grows with a*s^2 while GEMM work grows with s*h^2 (Korthikanti's s/6h term)
    assert ratios[0] > 3 * ratios[1]


def _moe_model(num_experts):
    return ModelSpec(num_layers=2, hidden_size=4096, num_attention_heads=32, num_query_groups=8, ffn_hidden_size=14336,
                     gated_mlp=True, vocab_size=32000,
                     moe=dict(num_experts=num_experts, top_k=4, expert_ffn_hidden_size=1536))


def test_alltoall_dispatcher_sorts_by_local_expert_by_hand():
    # Megatron-Core's all-to-all dispatcher sorts the received copies by local expert and
    # restores the order before combine: two more passes that each read and write top_k
    # copies of the h-wide token, 2 bytes an element. Only where a GPU holds > 1 expert.
    m = _moe_model(64)
    sort = next(op for op in layer_ops(m, LayerKind.MOE, sw(moe_dispatcher="alltoall")) if op.name == "moe/sort_by_local_expert")
    s = 4096
    bw = H100.gpu.hbm_bandwidth_bytes_per_s * H100.efficiency.memory_efficiency
    t = op_time(sort, m, _layouts(ep=8), s, "bf16", H100, H100.efficiency, SW)
    nbytes = s * 2 * 2 * 4 * 4096 * 2
    assert float(t.fwd_bytes[0]) == nbytes
    assert float(t.fwd_s[0]) == pytest.approx(H100.efficiency.kernel_overhead_s + nbytes / bw)
    assert float(t.bwd_s[0]) == pytest.approx(2 * float(t.fwd_s[0]))
    one_expert_each = op_time(sort, m, _layouts(ep=64), s, "bf16", H100, H100.efficiency, SW)
    assert float(one_expert_each.fwd_s[0]) == 0.0 and float(one_expert_each.fwd_bytes[0]) == 0.0


def test_flex_dispatcher_permutes_once():
    names = [op.name for op in layer_ops(_moe_model(64), LayerKind.MOE, sw(moe_dispatcher="flex"))]
    assert "moe/permute" in names and "moe/sort_by_local_expert" not in names
    assert "moe/sort_by_local_expert" not in [op.name for op in layer_ops(_moe_model(64), LayerKind.DENSE, sw(moe_dispatcher="alltoall"))]


def test_loss_backward_counted_kernel_by_kernel_by_hand():
    """The eager fp32 loss has its own backward bytes (26 per logit, 4 kernels), not twice
    the forward's 22; tp 2 halves the logits each GPU touches."""
    from perfmodel.formulas.workload import head_ops
    m = ModelSpec(num_layers=2, hidden_size=1024, num_attention_heads=8, ffn_hidden_size=4096, vocab_size=32000)
    loss = next(op for op in head_ops(m, sw(cross_entropy="eager_fp32")) if op.name == "output/cross_entropy")
    s, eff = 4096, H100.efficiency
    bw = H100.gpu.hbm_bandwidth_bytes_per_s * eff.memory_efficiency
    t = op_time(loss, m, _layouts(tp=2), s, "bf16", H100, eff, SW)
    logits = s * 32000 / 2
    assert float(t.fwd_s[0]) == pytest.approx(3 * eff.kernel_overhead_s + 22 * logits / bw)
    assert float(t.bwd_s[0]) == pytest.approx(4 * eff.kernel_overhead_s + 26 * logits / bw)


def test_backward_attention_uses_its_own_half_seq_by_hand():
    """eff(s) = e_max s / (s + s_half) per pass; with bwd_half_seq unset both passes share half_seq."""
    m, core = _gpt_core()
    s = 4096
    shared = H100.efficiency.model_copy(update={"attention": H100.efficiency.attention.model_copy(
        update={"fwd_efficiency_max": 0.35, "bwd_efficiency_max": 0.33, "half_seq": 370.0, "bwd_half_seq": None})})
    apart = shared.model_copy(update={"attention": shared.attention.model_copy(update={"bwd_half_seq": 990.0})})
    t_shared = op_time(core, m, _layouts(), s, "bf16", H100, shared, SW)
    t_apart = op_time(core, m, _layouts(), s, "bf16", H100, apart, SW)
    assert float(t_apart.fwd_s[0]) == float(t_shared.fwd_s[0])
    t0 = shared.kernel_overhead_s
    ratio = (float(t_apart.bwd_s[0]) - t0) / (float(t_shared.bwd_s[0]) - t0)
    assert ratio == pytest.approx((s / (s + 370.0)) / (s / (s + 990.0)))


def test_sliding_window_attention_time_by_hand():
    """Half the layers windowed at w = 512 of s = 4096: the op's forward is the full layers'
    share at eff(s) plus the windowed layers' share, w - w^2/(2s) = 480 keys, at eff(w)."""
    m = ModelSpec(num_layers=4, hidden_size=4096, num_attention_heads=32, ffn_hidden_size=16384, vocab_size=32000,
                  attention_window=512, full_attention_every=2)
    core = next(op for op in layer_ops(m, LayerKind.DENSE, SW) if op.kind is OpKind.ATTENTION)
    s, eff = 4096, H100.efficiency.model_copy(update={"attention": H100.efficiency.attention.model_copy(
        update={"fwd_efficiency_max": 0.35, "bwd_efficiency_max": 0.33, "half_seq": 370.0, "bwd_half_seq": 990.0})})
    t = op_time(core, m, _layouts(), s, "bf16", H100, eff, SW)
    per_key = 2 * 2 * 32 * 128 * s            # FLOPs per attended key, whole sequence
    full, windowed = 0.5 * per_key * (s / 2), 0.5 * per_key * 480
    peak = 989.4e12 * 0.887                   # the in-step clock over the benchmarks' (the spec's ratio)
    fwd = full / (peak * 0.35 * s / (s + 370)) + windowed / (peak * 0.35 * 512 / (512 + 370))
    bwd = ATTENTION_BWD_OVER_FWD_EXECUTED * (full / (peak * 0.33 * s / (s + 990))
                                             + windowed / (peak * 0.33 * 512 / (512 + 990)))
    assert float(t.fwd_flop[0]) == pytest.approx(full + windowed)
    assert float(t.fwd_s[0]) == pytest.approx(eff.kernel_overhead_s + fwd)
    assert float(t.bwd_s[0]) == pytest.approx(eff.kernel_overhead_s + bwd)


def test_attention_runs_at_the_clock_of_a_step_by_hand():
    """attention_clock_ratio r scales the kernels' rate: each pass's time less the kernel's fixed
    cost is 1 / r of the time at r = 1 (by hand: r = 0.8 -> 1.25x); GEMMs do not move."""
    m, core = _gpt_core()
    up = next(op for op in layer_ops(m, LayerKind.DENSE, SW) if op.name == "mlp/up")
    alone = H100.efficiency.model_copy(update={"attention_clock_ratio": 1.0})
    in_step = H100.efficiency.model_copy(update={"attention_clock_ratio": 0.8})
    a, b = (op_time(core, m, _layouts(), 8192, "bf16", H100, e, SW) for e in (alone, in_step))
    t0 = alone.kernel_overhead_s
    assert (float(b.fwd_s[0]) - t0) / (float(a.fwd_s[0]) - t0) == pytest.approx(1.25)
    assert (float(b.bwd_s[0]) - t0) / (float(a.bwd_s[0]) - t0) == pytest.approx(1.25)
    g1, g2 = (op_time(up, m, _layouts(), 8192, "bf16", H100, e, SW) for e in (alone, in_step))
    assert float(g1.fwd_s[0]) == float(g2.fwd_s[0]) and float(g1.bwd_s[0]) == float(g2.bwd_s[0])



def test_cuda_graphs_replace_a_layers_host_dispatches_by_hand():
    """cuda_graphs: a dense layer costs the host CUDA_GRAPH_LAUNCHES_PER_LAYER = 2 launches (its
    forward and backward graphs) instead of (1 + 2) x its forward operations, and no kernel
    launches of its own; its GPU time does not change. A dropless MoE layer graphs its attention
    only: the router, permutations, experts and their activation stay eager, (1 + 2) x theirs
    beside the 2 launches. Padded to capacity, the MoE layer is one graph too."""
    m = ModelSpec(num_layers=2, hidden_size=4096, num_attention_heads=32, num_query_groups=8, ffn_hidden_size=14336,
                  vocab_size=32000, moe=dict(num_experts=8, top_k=2, expert_ffn_hidden_size=14336))
    L = _layouts(mbs=1, ep=2)

    def block(kind, **options):
        return block_time(layer_ops(m, kind, sw(**options)), m, L, 4096, "fp8", H100, H100.efficiency, sw(**options))

    eager, graphed = block(LayerKind.DENSE), block(LayerKind.DENSE, cuda_graphs=True)
    assert eager.host_ops == (1 + BACKWARD_HOST_OPS_OVER_FORWARD) * sum(t.host_ops_fwd for t in eager.ops)
    assert graphed.host_ops == CUDA_GRAPH_LAUNCHES_PER_LAYER == 2
    assert float(graphed.extra_launches[0]) == 0.0
    assert float(graphed.fwd_s[0]) == float(eager.fwd_s[0]) and float(graphed.bwd_s[0]) == float(eager.bwd_s[0])

    moe = block(LayerKind.MOE, cuda_graphs=True)
    left = [t for t in moe.ops if t.name.startswith("moe/") or t.name == "mlp/activation"]
    assert {t.name for t in left} >= {"moe/router", "moe/expert_up", "moe/expert_down", "moe/permute"}
    assert moe.host_ops == 3 * sum(t.host_ops_fwd for t in left) + 2
    assert float(moe.extra_launches[0]) == sum(float(t.extra_launches[0]) for t in left)
    padded = block(LayerKind.MOE, cuda_graphs=True, moe_expert_capacity_factor=1.0, moe_pad_expert_input_to_capacity=True)
    assert padded.host_ops == 2 and float(padded.extra_launches[0]) == 0.0


def test_a_transformer_engine_module_costs_the_host_its_measured_ratio_by_hand():
    """te_module_host_ops r: each GEMM module call costs the host r eager operations instead of 1
    (TE issue #2053: 99.66 us per TE Linear against 37.08 per torch.nn.Linear, r = 2.69); a
    low-precision GEMM's cast stays one more. The GPU time does not change. Elementwise and
    attention operations keep their counts."""
    m = ModelSpec(num_layers=2, hidden_size=4096, num_attention_heads=32, num_query_groups=8, ffn_hidden_size=14336,
                  vocab_size=32000)
    L = _layouts(mbs=1)

    def block(precision, **options):
        return block_time(layer_ops(m, LayerKind.DENSE, sw(**options)), m, L, 4096, precision, H100, H100.efficiency,
                          sw(**options))

    for precision, cast_ops in (("bf16", 0), ("fp8", 1)):
        base, te = block(precision), block(precision, te_module_host_ops=2.69)
        for a, b in zip(base.ops, te.ops):
            if a.kind is OpKind.GEMM:
                assert a.host_ops_fwd == 1 + cast_ops and b.host_ops_fwd == pytest.approx(2.69 + cast_ops)
            else:
                assert a.host_ops_fwd == b.host_ops_fwd
        num_gemms = sum(t.kind is OpKind.GEMM for t in base.ops)
        assert te.host_ops == pytest.approx(base.host_ops + (1 + BACKWARD_HOST_OPS_OVER_FORWARD) * 1.69 * num_gemms)
        assert float(te.fwd_s[0]) == float(base.fwd_s[0]) and float(te.bwd_s[0]) == float(base.bwd_s[0])


def test_a_transformer_engine_module_cheaper_than_a_torch_op_is_one_line():
    with pytest.raises(ValueError) as err:
        SoftwareStack(te_module_host_ops=0.5)
    assert "te_module_host_ops" in str(err.value) and "greater than or equal to 1" in str(err.value)
    job = {"name": "j", "hardware": "h100-sxm", "num_gpus": 8, "model": "llama3-8b", "seq_length": 4096,
           "global_batch_size": 16, "software": {"te_module_host_ops": 0.2}}
    with pytest.raises(InputError) as err:
        parse_scenario(job)
    assert str(err.value) == "scenario: software.te_module_host_ops: Input should be greater than or equal to 1"


def test_fp8_current_scaling_reads_each_input_for_its_amax_by_hand():
    """fp8_current_scaling: 2 more bytes per element of the output gradient backward, and of the
    forward input unless a fused norm wrote it (mlp/up: TELayerNormColumnParallelLinear computes
    the amax in the norm); 3 kernels per quantisation (amax, scale, cast) instead of 1."""
    m = ModelSpec(num_layers=2, hidden_size=8192, num_attention_heads=64, ffn_hidden_size=28672, vocab_size=32000)
    ops = {op.name: op for op in layer_ops(m, LayerKind.DENSE, SW)}
    L = _layouts(mbs=1)
    rate = H100.gpu.hbm_bandwidth_bytes_per_s * H100.efficiency.memory_efficiency
    t0 = H100.efficiency.kernel_overhead_s
    for name, fwd_amax in (("mlp/up", 0), ("mlp/down", 2)):
        ds, cs = (op_time(ops[name], m, L, 8192, "fp8", H100, H100.efficiency, sw(fp8_current_scaling=c))
                  for c in (False, True))
        sh = gemm_shape(ops[name], m, L, 8192, SW)
        assert float(cs.fwd_s[0] - ds.fwd_s[0]) == pytest.approx(fwd_amax * sh.m[0] * sh.k[0] / rate + 2 * t0)
        assert float(cs.bwd_s[0] - ds.bwd_s[0]) == pytest.approx(2 * sh.m[0] * sh.n[0] / rate + 2 * t0)
    b16 = [op_time(ops["mlp/down"], m, L, 8192, "bf16", H100, H100.efficiency, sw(fp8_current_scaling=c))
           for c in (False, True)]
    assert float(b16[0].fwd_s[0]) == float(b16[1].fwd_s[0])
