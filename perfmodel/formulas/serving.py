"""One forward pass of a served model on one GPU of a replica: prefill (many tokens of few
requests, compute-bound) and decode (one token of many requests, bound by reading the weights
and the KV cache), with the tensor/expert-parallel communication of the pass and the host's
share, and the speculative-decoding yield.

==========  =====================================================================================
T           tokens in the pass over one pipeline stage (prefill: prompt tokens; decode: the batch)
A, t, e     attention data-parallel groups, tensor-parallel degree, expert-parallel degree
c           context tokens each decode query attends to (prompt + tokens generated so far)
E, k        routed experts, experts per token;  E_hit = E (1 - (1 - k/E)^T) experts a step touches
alpha, g    speculative acceptance rate and drafted tokens per step (Leviathan et al. 2023)
t_op        max(F / (P * eff(m, n, k)), bytes / (B_hbm * eff_mem)) + kernel overhead  (roofline)
==========  =====================================================================================

The operations are the workload's forward inventory (``workload.weight_ops``, ``layer_ops``,
``head_weight_op``); GEMM math time is ``compute.gemm_roofline_s`` at the calibrated efficiency
of its sharded shape; the bytes a GEMM reads are its weights in the stored format (fp4/fp8
weights are what make decode fast) plus its activations. Attention is the flash kernel's FLOPs
at ``compute.attention_efficiency`` in prefill, and the KV cache read at HBM bandwidth in decode
(a decode query reads every cached key of its context once; Kwon et al. 2023). Collectives come
from ``comm``.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.formulas.comm import Collective, Fabric, group_time_s, p2p_time_s
from perfmodel.formulas.compute import attention_efficiency, gemm_precision, gemm_roofline_s, memory_time_s
from perfmodel.formulas.counts import attention_fwd_flop_per_token, attention_layer_mix
from perfmodel.formulas.kv_cache import kv_bytes_per_sequence, kv_bytes_per_token_per_layer, kv_shards
from perfmodel.formulas.ops import FP32_BYTES, MLA_QKV_OP, QK_NORM_OP, LayerKind, Op, OpKind, TpSplit
from perfmodel.formulas.workload import head_weight_op, layer_kinds, layer_ops
from perfmodel.spec.attention_head_dim import effective_head_dim
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.precision import FORMAT_BYTES
from perfmodel.spec.serving import ServingSpec
from perfmodel.spec.software import SoftwareStack

SERVING_STACK = SoftwareStack()
"""The elementwise kernels of a serving engine: fused norms, residuals and activations, as the
default (Megatron-Core/Transformer Engine) stack runs them; serving engines fuse at least as much."""
ATTENTION_BACKEND = "flash"
"""Prefill attention kernel: FlashAttention (vLLM, SGLang and TensorRT-LLM default to flash-class
kernels; the project's calibrated flash curve)."""
TP_ALL_REDUCES_PER_LAYER = 2
"""Megatron tensor parallelism: one all-reduce after attention, one after the MLP (Shoeybi et al.
2019, sec. 3)."""
EP_ALL_TO_ALLS_PER_MOE_LAYER = 2
"""Expert parallelism: dispatch before the experts, combine after (Lepikhin et al. 2020, GShard)."""
GRAPH_LAUNCHES_PER_STEP = 1
"""With CUDA graphs a decode step is one graph replay (vLLM ``CUDAGraphRunner``, SGLang
``CudaGraphRunner``, TensorRT-LLM ``cuda_graph_mode``: captured per batch size, replayed per step)."""
GROUPED_EXPERT_KERNELS = 1
"""Kernels per expert projection (up, down) per pass: serving engines run every local expert in one
grouped GEMM (vLLM ``fused_moe`` Triton kernel, vllm/model_executor/layers/fused_moe; SGLang's
copy of it; TensorRT-LLM's MoE plugin / CUTLASS grouped GEMM), not one GEMM per expert as the
training step's ``compute.gemm_efficiency`` measures."""
MOE_ROUTING_KERNELS = 2
"""Routing in a serving engine: one fused top-k softmax over the router logits and one sort of the
tokens by expert (vLLM ``topk_softmax`` and ``moe_align_block_size``); the gather and the weighted
sum of the expert outputs happen inside the grouped GEMMs. The training stack's router passes
(auxiliary losses, permute/unpermute: ``workload.moe_elementwise_ops``) are not run."""
MOE_ROUTING_PASSES = 2
"""Passes over the fp32 [tokens, experts] router logits in the fused top-k softmax: read, write."""
HEAD_BYTES = FORMAT_BYTES["bf16"]
MLA_DECODE_EFFICIENCY = 660 / 990
"""Share of the bf16 peak the absorbed-MLA decode kernel reaches when compute-bound: FlashMLA, 660
TFLOP/s on an H800 SXM5 of 990 TFLOP/s (deepseek-ai/FlashMLA README, performance update 2025-04-22,
and docs/20250422-new-kernel-deep-dive.md)."""
"""Activations written between kernels and sent between GPUs are 16-bit."""


@dataclass(frozen=True)
class PassTime:
    """One forward pass on one GPU of a stage, by part (seconds); the total is their sum."""

    gemm_s: float
    attention_s: float
    elementwise_s: float
    comm_s: float
    host_s: float

    @property
    def total_s(self) -> float:
        return self.gemm_s + self.attention_s + self.elementwise_s + self.comm_s + self.host_s

    def rows(self) -> list[dict]:
        return [{"component": k, "seconds": getattr(self, k)} for k in
                ("gemm_s", "attention_s", "elementwise_s", "comm_s", "host_s")]


def expected_tokens_per_step(acceptance_rate: float, draft_tokens: int) -> float:
    """Tokens a speculative step yields on average: (1 - alpha^(g+1)) / (1 - alpha)
    (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding", eq. 1)."""
    a, g = acceptance_rate, draft_tokens
    return (1 - a ** (g + 1)) / (1 - a)


def kv_handoff_s(m: ModelSpec, prompt_tokens: int, kv_bytes_per_element: float, tp: int, prompts_per_group: float,
                 link: Fabric) -> float:
    """Time to hand a prefill pool's caches to the decode pool (disaggregated serving: Zhong et al.
    2024, DistServe sec. 4; Patel et al. 2024, Splitwise sec. 4): each GPU of a prefill attention
    group sends the cache shard it holds (``kv_shards``) of its group's ``prompts_per_group``
    prompts over its own link, all GPUs at once, to its counterpart in the decode pool:
    latency + prompts x kv_bytes_per_sequence(P) / shards / link bandwidth. Sent after the pass (no
    layer-by-layer overlap with the prefill)."""
    per_gpu = prompts_per_group * float(kv_bytes_per_sequence(m, prompt_tokens, kv_bytes_per_element)) / kv_shards(m, tp)
    return link.latency_s + per_gpu / link.busbw_bytes_per_s


def experts_touched(num_experts: int, top_k: int, tokens: float) -> float:
    """Expected distinct experts that ``tokens`` tokens route to, each choosing k of E uniformly:
    E (1 - (1 - k/E)^T) (balanced routing, as the load balancers aim for)."""
    return num_experts * (1 - (1 - top_k / num_experts) ** tokens)


def _gemm_s(op: Op, m: float, sv: ServingSpec, hw: HardwareSpec, eff: Efficiencies, tokens_total: float,
            model: ModelSpec) -> float:
    """One GEMM op of a layer on one GPU, for ``m`` tokens on that GPU (non-expert) or
    ``tokens_total`` over the stage (experts)."""
    par = sv.precision
    prec = gemm_precision(op, par.activations)
    w_bytes = FORMAT_BYTES[par.weights] if prec == par.activations else FORMAT_BYTES[prec]
    a_bytes = FORMAT_BYTES[prec]
    k, n = float(op.k), float(op.n)
    if op.expert:
        split = sv.parallelism.expert_tp
        hit = experts_touched(op.count, model.moe.top_k, tokens_total) / op.count
        count = op.count / sv.parallelism.ep * hit
        m = tokens_total * model.moe.top_k / op.count / max(hit, 1e-12)
        kernels = GROUPED_EXPERT_KERNELS
    else:
        split, count = sv.parallelism.tp, op.count
        kernels = count
    if op.tp_split is TpSplit.COLUMN:
        n = n / split
    elif op.tp_split is TpSplit.ROW:
        k = k / split
    t_math, _ = gemm_roofline_s(m, n, k, count, prec, hw, eff)
    bytes_moved = count * (w_bytes * k * n + a_bytes * m * (k + n))
    t_mem = bytes_moved / (hw.gpu.hbm_bandwidth_bytes_per_s * eff.memory_efficiency)
    return float(kernels * eff.kernel_overhead_s + max(float(t_math), t_mem))


def serving_layer_ops(m: ModelSpec, kind: LayerKind) -> tuple[Op, ...]:
    """The workload's forward operations of a layer as a serving engine runs them: the GEMMs,
    attention and fused norms/residuals/activation of ``workload.layer_ops``, with the MoE
    routing of a serving engine (``MOE_ROUTING_KERNELS``) in place of the training router's. A
    per-head QK norm runs inside the rotary kernel, which the attention path already covers
    (TensorRT-LLM's PyTorch backend, ``QKNormRoPEAttention`` for Qwen3, Gemma 3 and ExaOne 4:
    ``fuse_qk_norm_rope`` defaults to true and calls one ``torch.ops.trtllm.fused_qk_norm_rope``
    kernel over Q and K). Megatron-Core's assembly of MLA's per-head key and value
    (``megatron_eager.mla_qkv_op``) is a training path: a serving engine's MLA keeps the latent and
    the rotary key in its cache and reads them in its attention kernel (``mla_decode_flop_per_key``)."""
    ops = tuple(op for op in layer_ops(m, kind, SERVING_STACK)
                if not (op.kind is OpKind.MEMORY and op.name.startswith("moe/"))
                and op.name not in (QK_NORM_OP, MLA_QKV_OP))
    if kind is LayerKind.MOE:
        ops += (Op("moe/routing", OpKind.MEMORY, bytes_per_token=MOE_ROUTING_PASSES * m.moe.num_experts * FP32_BYTES,
                   kernels=MOE_ROUTING_KERNELS),)
    return ops


def _attention_s(op: Op, m: ModelSpec, sv: ServingSpec, hw: HardwareSpec, eff: Efficiencies,
                 queries: float, requests: float, context: float, prefill: bool) -> float:
    """The attention core on one GPU: ``queries`` query tokens of ``requests`` requests (this
    GPU's attention group), each attending to ``context`` keys (prefill: causal over the prompt)."""
    t = sv.parallelism.tp
    heads_share = 1 / t
    flop = sum(share * float(attention_fwd_flop_per_token(op, context, prefill, w))
               for share, w in attention_layer_mix(op)) * queries * heads_share
    peak = hw.gpu.peak_flop_per_s("bf16")
    d = effective_head_dim(op.attn_qk_dim, op.attn_v_dim)
    if prefill:
        rate = peak * float(attention_efficiency(context, d, eff, False, ATTENTION_BACKEND))
        return eff.kernel_overhead_s + flop / rate
    kv_b = FORMAT_BYTES[sv.precision.kv_cache]
    kept = sum(share * (context if w is None else min(context, w)) for share, w in attention_layer_mix(op))
    kv_read = requests * kept * kv_bytes_per_token_per_layer(m, kv_b) / kv_shards(m, t)
    t_mem = float(memory_time_s(kv_read, hw, eff))
    if m.mla is not None:
        flop = queries * heads_share * mla_decode_flop_per_key(m, op.attn_heads) * kept
        return max(t_mem, eff.kernel_overhead_s + flop / (peak * MLA_DECODE_EFFICIENCY))
    rate = peak * float(attention_efficiency(context, d, eff, False, ATTENTION_BACKEND))
    return max(t_mem, eff.kernel_overhead_s + flop / rate)


def mla_decode_flop_per_key(m: ModelSpec, heads: int) -> float:
    """FLOPs a decode query spends per cached token with MLA's absorbed weights: W^UK folded into the
    query and W^UV into the output (DeepSeek-AI 2024, DeepSeek-V2 report sec. 2.1.2), every head attends
    to the latent itself, keys of d_k = d_c + d_r and values of d_v = d_c: 2 h (d_k + d_v) (FlashMLA
    deep dive: 2 h_q s_q s_k (d_k + d_v)). The folded projections are the ``attention/kv_up`` GEMM's
    MACs per token, already counted; prefill runs un-absorbed (the workload's attention core)."""
    x = m.mla
    return 2.0 * heads * (2 * x.kv_lora_rank + x.qk_rope_head_dim)


def _comm_s(kind: LayerKind, m: ModelSpec, sv: ServingSpec, hw: HardwareSpec, eff: Efficiencies,
            tokens_per_group: float, tokens_stage: float) -> float:
    par = sv.parallelism
    h = m.hidden_size
    ar = float(group_time_s(Collective.ALL_REDUCE, tokens_per_group * h * HEAD_BYTES, par.tp, 1, hw, eff))
    if kind is LayerKind.DENSE or (par.ep == 1 and par.attention_dp == 1):
        return TP_ALL_REDUCES_PER_LAYER * ar
    if par.ep == 1:
        # attention data-parallel, every expert split over the stage's GPUs: each GPU needs every
        # group's tokens (all-gather) and hands back its partial sums (reduce-scatter), the two halves
        # of an all-reduce (TensorRT-LLM attention DP with MoE tensor parallelism; SGLang DP attention)
        full = tokens_stage * h * HEAD_BYTES
        return ar + sum(float(group_time_s(op, full, par.stage_gpus, 1, hw, eff))
                        for op in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER))
    per_gpu = tokens_stage / par.stage_gpus * m.moe.top_k * h * FORMAT_BYTES[sv.precision.activations]
    a2a = float(group_time_s(Collective.ALL_TO_ALL, per_gpu, par.ep, par.expert_tp, hw, eff))
    return ar + EP_ALL_TO_ALLS_PER_MOE_LAYER * a2a


def pass_time(m: ModelSpec, sv: ServingSpec, hw: HardwareSpec, eff: Efficiencies,
              requests: float, query_tokens_per_request: float, context: float, prefill: bool) -> PassTime:
    """One forward pass of one pipeline stage over ``requests`` requests of the stage, each with
    ``query_tokens_per_request`` new tokens attending to ``context`` keys, on one GPU.

    Per GPU: the attention group of tp GPUs holds requests / A of them; the expert GEMMs see the
    whole stage's tokens routed over ep."""
    par = sv.parallelism
    tokens_stage = requests * query_tokens_per_request
    reqs_group = requests / par.attention_dp
    tokens_group = reqs_group * query_tokens_per_request
    kinds = layer_kinds(m)
    layers_share = 1 / par.pp
    gemm = attn = elem = comm = 0.0
    kernels = 0.0
    for kind in set(kinds):
        n_layers = sum(1 for k in kinds if k is kind) * layers_share
        g = a = e = 0.0
        k_kind = 0
        for op in serving_layer_ops(m, kind):
            if op.kind is OpKind.GEMM:
                g += _gemm_s(op, tokens_group, sv, hw, eff, tokens_stage, m)
            elif op.kind is OpKind.ATTENTION:
                a += _attention_s(op, m, sv, hw, eff, tokens_group, reqs_group, context, prefill)
            elif not op.multi_local_experts_only:
                e += float(memory_time_s(op.bytes_per_token * tokens_group, hw, eff, op.kernels))
            k_kind += op.kernels
        kernels += n_layers * k_kind
        gemm += n_layers * g
        attn += n_layers * a
        elem += n_layers * e
        comm += n_layers * _comm_s(kind, m, sv, hw, eff, tokens_group, tokens_stage)
    # logits: the last stage computes them for one token per request
    gemm += layers_share * _gemm_s(head_weight_op(m), reqs_group, sv, hw, eff, requests, m)
    if par.pp > 1:
        comm += float(p2p_time_s(tokens_group * m.hidden_size * HEAD_BYTES, False, par.stage_gpus, hw, eff))
    gpu_s = gemm + attn + elem + comm
    host = host_s_per_step(kernels, sv.cuda_graphs and not prefill, eff, gpu_s)
    return PassTime(gemm, attn, elem, comm, host)


def host_s_per_step(kernels: float, cuda_graphs: bool, eff: Efficiencies, gpu_s: float) -> float:
    """Host time a pass adds beyond its GPU time. With CUDA graphs: one launch
    (``GRAPH_LAUNCHES_PER_STEP``). Without: every kernel's launch (``launch_overhead_s``); the host
    runs ahead of the GPU, so only what exceeds the GPU time shows."""
    if cuda_graphs:
        return GRAPH_LAUNCHES_PER_STEP * eff.launch_overhead_s
    return max(0.0, kernels * eff.launch_overhead_s - gpu_s)
