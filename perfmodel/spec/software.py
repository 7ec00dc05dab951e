"""The software stack: how a framework runs the job, as one frozen object.

Every choice that is the framework's rather than the model's or the hardware's lives here: which attention
kernel, how communication overlaps compute, how ZeRO-3 issues its collectives, which MoE dispatcher, the
gradient-reduction dtype and where pipeline stages reduce, fused or eager elementwise kernels, what selective
recompute keeps, the loss kernel, and the recompute, offload and pipeline-layout refinements of Megatron-Core.
A scenario carries it under ``software:``; formula functions take it whole, never as separate defaulted
arguments, so an option a caller forgets is an error.

None of these is in the scenario contract (``shared/contracts/scenario.md``): they are perfmodel's own, and
every default is what Megatron-Core / NeMo do unless told otherwise.
"""

from __future__ import annotations

import functools
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints, model_validator

from perfmodel.spec import pipeline_layout
from perfmodel.spec.context_parallel import CpCommTypeName
from perfmodel.spec.limits import (MAX_FSDP_COLLECTIVES_PER_LAYER, MAX_NAME_LENGTH, MAX_NUM_EXPERTS, MAX_NUM_LAYERS,
                                   MAX_PIPELINE_LAYOUT_CHARS, int_field, real_field)
from perfmodel.spec.megatron_paths import MegatronPaths
from perfmodel.spec.pp_grad_reduce import PpGradReduceName
from perfmodel.spec.stacks import list_stacks, stack_options, unknown_stack_reason

AttentionBackend = Literal["flash", "cudnn", "fa3", "unfused"]
MoeDispatcher = Literal["alltoall", "flex"]
MoeFlexBackend = Literal["deepep", "hybridep"]
ElementwiseKernels = Literal["fused", "eager", "compiled"]
SelectiveRecompute = Literal["core_attn", "op_sac", "save_qkv_proj"]
RecomputeModule = Literal["core_attn", "layernorm", "mla_up_proj", "moe_act", "mlp", "moe", "shared_experts"]
CrossEntropy = Literal["fused", "eager_fp32"]
OptimizerKernels = Literal["fused", "foreach"]
Fp8Casts = Literal["separate", "fused"]
OptimizerMoments = Literal["fp32", "bf16"]
Fp8Scaling = Literal["tensorwise", "blockwise"]
ATTENTION_BACKEND_CHOICES: tuple[str, ...] = get_args(AttentionBackend)
MOE_DISPATCHER_CHOICES: tuple[str, ...] = get_args(MoeDispatcher)
ELEMENTWISE_KERNELS_CHOICES: tuple[str, ...] = get_args(ElementwiseKernels)
SELECTIVE_RECOMPUTE_CHOICES: tuple[str, ...] = get_args(SelectiveRecompute)
RECOMPUTE_MODULE_CHOICES: tuple[str, ...] = get_args(RecomputeModule)
CROSS_ENTROPY_CHOICES: tuple[str, ...] = get_args(CrossEntropy)
OPTIMIZER_KERNELS_CHOICES: tuple[str, ...] = get_args(OptimizerKernels)
FP8_CASTS_CHOICES: tuple[str, ...] = get_args(Fp8Casts)
OPTIMIZER_MOMENTS_CHOICES: tuple[str, ...] = get_args(OptimizerMoments)
FP8_SCALING_CHOICES: tuple[str, ...] = get_args(Fp8Scaling)

NAMED_POLICIES = ("op_sac", "save_qkv_proj")
"""Selective policies of other frameworks, each a whole policy rather than a module list."""


def selective_modules(policy) -> tuple[str, ...]:
    """The Megatron-Core modules a selective policy recomputes (``()`` for the named policies)."""
    if policy in NAMED_POLICIES:
        return ()
    return (policy,) if isinstance(policy, str) else tuple(policy)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


MAX_RESERVED_SMS = 1024
"""More SMs than any GPU of the catalogue has (the count is checked against the GPU's own)."""
Phi = real_field(1.0, 0.0, exclusive_minimum=False)
"""An overlap fraction in [0, 1]."""


class Overlap(_Frozen):
    """Communication/computation overlap, an explicit fraction per traffic kind.

    With overlap fraction phi in [0, 1], a collective of t_comm beside compute t_window leaves
    max(0, t_comm - phi * t_window) exposed (``perfmodel.formulas.overlap``): phi = 0 is the
    upper bound t_math + t_comm, phi = 1 the lower bound max(t_math, t_comm). Defaults follow
    how Megatron-Core / NeMo (and FSDP for ZeRO-3) run."""

    tp: Phi | None = 0.0
    """TP all-gather/reduce-scatter behind the layer's GEMMs. Default 0: Megatron-Core's
    TransformerConfig default tp_comm_overlap=False, so TP collectives sit in the critical
    path. None = ideal chunked pipelining, where the collective is split into tp chunks and
    all but the first hide behind GEMM chunks, phi = (tp - 1) / tp (Wang et al., ASPLOS 2023,
    'Overlap communication with dependent computation via decomposition'; Transformer Engine
    userbuffers). The SMs the overlapped collectives take from those GEMMs are charged by
    ``exposed_s``."""
    cp: Phi = 1.0
    """Ring-attention KV exchange behind the attention blocks (Liu et al. 2023, Ring
    Attention; Megatron-Core context parallelism sends the next KV chunk while computing)."""
    ep: Phi = 0.0
    """MoE dispatch and combine. Default 0: Megatron-Core's dispatchers run them in the
    critical path. Batch-level overlap is opt-in (Megatron-Core
    overlap_moe_expert_parallel_comm, MCore v0.14; DeepSeek-V3's DualPipe): the forward of
    one micro-batch runs beside the backward of another, so the forward all-to-alls hide
    behind the layer's backward compute and the backward ones behind its forward compute
    (Megatron-Core API docs, core.pipeline_parallel.combined_1f1b); that compute is the
    window. The unpaired first forward and last backward are not modelled."""
    pp: Phi = 1.0
    """Steady-state pipeline send/recv behind compute (batched isend/irecv); the fill and
    drain transfers are always exposed (Narayanan et al. 2021, sec. 2.2)."""
    dp: Phi = 1.0
    """Gradient reduce-scatter behind the last micro-batch's backward and parameter
    all-gather behind the next forward (Megatron-Core overlap_grad_reduce and
    overlap_param_gather, on in NeMo/Megatron-Bridge recipes; PyTorch DDP buckets, Li et al. 2020)."""
    fsdp: Phi = 1.0
    """ZeRO-3/FSDP per-layer all-gathers prefetched behind the previous layer's compute
    (PyTorch FSDP, Zhao et al. 2023, sec. 4.3)."""


class SoftwareStack(_Frozen, MegatronPaths):
    """How the framework runs the job (the scenario's ``software:`` section)."""

    stack: Annotated[str, StringConstraints(max_length=MAX_NAME_LENGTH)] | None = None
    """A named preset of ``perfmodel/data/stacks.yaml`` (``perfmodel.spec.stacks``): the
    framework's documented defaults, each with its source. The options given beside it
    override the preset's (``overlap`` kind by kind); the name is resolved when the section is
    read, so the other fields always hold the options in force. null = no preset: every option
    at the defaults below, which are Megatron-Core's (the ``megatron-core`` preset)."""
    attention_backend: AttentionBackend = "flash"
    """Attention kernel: flash = a fused kernel at the FlashAttention-2 curve of the profile
    (``Efficiencies.attention``), the s x s scores never reach HBM; cudnn = cuDNN's fused flash
    attention, at its own measured curve (``Efficiencies.attention_cudnn``; where the GPU has
    none, the flash curve); unfused = scores and probabilities materialised in HBM (Megatron-LM
    before FlashAttention, 2022). Transformer Engine prefers cuDNN on Hopper and later when both
    kernels are available (transformer_engine/pytorch/attention.py v1.4, 'Select FusedAttention
    on sm90'; dot_product_attention/utils.py today), so the Megatron-Core stacks most likely ran
    cuDNN; they keep ``flash`` as a stand-in chosen from their published runs, which at cuDNN's
    curve come out 25-43% fast: they lose time beside their attention that the model does not
    name (docs/calibration.md, 'Attention inside a step'). A stack whose own recipe names cuDNN
    (MaxText's ``attention=cudnn_flash_te``) runs ``cudnn``. fa3 = FlashAttention-3 (Shah et al.
    2024, arXiv 2407.08608), the Hopper kernels of DeepSeek's trace (``flash::FlashAttnBwd``,
    ``flash::compute_attn_ws``); like cuDNN's it is a warp-specialised TMA/WGMMA kernel, within 5%
    of cuDNN at 4k tokens in the FA3 paper's own H100 benchmark (fig. 5, forward, head dim 128: 638
    against 609 TFLOP/s without the causal mask, 579 against 518 with it), and with no FA3
    measurement in calibration/ it runs at cuDNN's measured curve (``Efficiencies.attention_cudnn``)
    times the paper's FA3/cuDNN ratio (``perfmodel.formulas.compute.FA3_OVER_CUDNN``): at 4k
    tokens that gives 538 TFLOP/s forward and 437 backward on an H100-class GPU at the step's clock,
    where the trace's FA3 kernels reach 555 and 404 on the 112 SMs DeepEP leaves them
    (calibration/data/deepseek_v3_train_trace.yaml)."""
    attention_dropout: StrictBool = False
    """Dropout on the attention probabilities. Unfused attention runs it as a kernel of its own
    after the fused scale-mask-softmax (Megatron-LM v2 megatron/model/transformer.py
    ParallelAttention, self.attention_dropout(attention_probs)): the forward reads the
    probabilities and writes the dropped ones and a 1-byte mask, the backward reads the gradient
    and the mask and writes the input gradient, 5 bytes per score each way (``perfmodel.formulas.
    compute.unfused_attention_s``). Flash attention applies it inside the kernel, not counted.
    Default false: NVIDIA's and torchtitan's recipes for Llama-style models train without it."""
    overlap: Overlap = Field(default_factory=Overlap)
    """Communication/computation overlap per traffic kind: any of tp, cp, ep, pp, dp, fsdp,
    a fraction in [0, 1]; kinds left out keep the defaults of ``Overlap``."""
    fsdp_collectives_per_layer: int_field(MAX_FSDP_COLLECTIVES_PER_LAYER) = 1
    """ZeRO-3 collectives per layer and direction: the layer's parameters are all-gathered (forward and backward)
    and its gradients reduce-scattered in this many separate collectives, each paying its own ring latency. 1 = one
    flat unit per transformer block (PyTorch FSDP/FSDP2 auto-wrap, Megatron-FSDP). DeepSpeed ZeRO-3 up to v0.3.x
    issued one all_gather and one reduce_scatter per parameter tensor
    (deepspeed/runtime/zero/partition_parameters.py, _allgather_param and _reduce_scatter_gradient, v0.3.14 commit
    112ebff): 12 for a GPT-2/3 layer with biases and LayerNorms. Ignored below ZeRO stage 3."""
    fsdp_list_api: StrictBool = False
    """ZeRO-3 collectives through torch.distributed's list API: each all-gather and reduce-scatter also copies every
    rank's chunk with its own kernel, n kernels per collective (PyTorch ProcessGroupNCCL). DeepSpeed ZeRO-3 used it
    from v0.3.13 (March 2021) until it moved to the flat _all_gather_base in October 2021 (DeepSpeed #834, #1188).
    Ignored below ZeRO stage 3."""
    fsdp_copy_kernels: StrictBool = False
    """ZeRO-3 copies on the compute stream, FSDP2's (``perfmodel.formulas.traffic.fsdp_copy_bytes_per_param``)."""
    fsdp_root_group: StrictBool = False
    """ZeRO-3 without pipelining: the embedding and output layer are FSDP2's root group, gathered as each micro-batch
    opens and reduce-scattered as its backward closes, beside no compute (``perfmodel.formulas.traffic.dp_traffic``)."""
    moe_dispatcher: MoeDispatcher = "alltoall"
    """MoE token dispatcher (Megatron-Core's --moe-token-dispatcher-type): alltoall sends every routed copy of a
    token as its own message; flex is the hierarchical dispatch of DeepEP and HybridEP
    (--moe-flex-dispatcher-backend), which crosses the network once per destination domain and fans out over NVLink.
    Across scale-up domains they differ in network bytes; inside one they send the same all-to-all, and only
    alltoall sorts tokens by local expert after it. Ignored for dense models."""
    moe_flex_backend: MoeFlexBackend = "deepep"
    """The flex dispatcher's kernels (--moe-flex-dispatcher-backend; Megatron-Core's default deepep).
    Inside one NVLink domain, on GPUs where they were benchmarked, dispatch and combine run at the
    backend's measured algorithm bandwidth (``perfmodel.formulas.moe_kernels``)."""
    moe_flex_num_sms: int_field(MAX_RESERVED_SMS) = 20
    """SMs the flex dispatcher's kernels run on (--moe-flex-dispatcher-num-sms, formerly
    --moe-deepep-num-sms and --moe-hybridep-num-sms; DeepEP's historical default 20, Megatron-Core
    transformer_config.py). It picks the measured bandwidth; it does not reserve SMs from compute
    (that is ``moe_comm_reserved_sms``)."""
    moe_router_fusion: StrictBool = False
    """The router's score function, top-k and auxiliary-loss arithmetic in fused kernels
    (Megatron-Core --moe-router-fusion, core_r0.14, Transformer Engine PR 1883): 31 kernels per
    forward instead of 72, as counted on DeepSeek-V3's router (Megatron-LM
    docs/discussions/deepseek-v3-gb200-optimization, sec. 2.1.4). Default off, Megatron-Core's
    default; Megatron-Bridge's performance recipes switch it on. Ignored for dense models (see
    ``perfmodel.formulas.workload.moe_elementwise_ops``)."""
    moe_permute_fusion: StrictBool = False
    """Token permutation and unpermutation as one Transformer Engine kernel each
    (Megatron-Core --moe-permute-fusion, TE >= 2.1) instead of the masked_select / index_select /
    scatter_add sequence of megatron/core/transformer/moe/moe_utils.py permute and unpermute
    (core_r0.13), 7 kernels each, whose unpermute also multiplies every routed copy by its
    probability and zero-fills the output in passes of their own. Default off, Megatron-Core's
    default. Ignored for dense models."""
    moe_expert_capacity_factor: real_field(float(MAX_NUM_EXPERTS)) | None = None
    """Megatron-Core --moe-expert-capacity-factor: an expert takes at most this many times its
    mean share of the routed tokens (top_k T / E) and drops the rest. null = token-dropless,
    Megatron-Core's default. Ignored for dense models."""
    moe_pad_expert_input_to_capacity: StrictBool = False
    """Megatron-Core --moe-pad-expert-input-to-capacity: with a capacity factor, every expert
    runs its full capacity, padded (static shapes). Default off."""
    moe_load_imbalance: real_field(float(MAX_NUM_EXPERTS), 1.0, exclusive_minimum=False) = 1.0
    """Routed tokens of the busiest expert-parallel rank over the mean: the slowest rank sets
    the pace of the expert GEMMs, the permutations and the all-to-alls. 1 = balanced, as
    NVIDIA's benchmark recipes force (Megatron-Core --moe-router-force-load-balancing); a job
    with learned routing states its own (the router's tokens_per_expert statistics). Ignored for
    dense models. See ``perfmodel.formulas.workload.routed_load``."""
    grad_reduce_in_fp32: StrictBool = True
    """Data-parallel gradients kept and reduced in fp32 (Megatron-Core's
    DistributedDataParallelConfig flag of that name). true: a 4-byte gradient buffer and
    4-byte reduce-scatter or all-reduce (Megatron-LM forces it on for bf16; PyTorch FSDP2
    reduces in fp32 in torchtitan). false: both in the 16-bit training dtype, half the bytes,
    as NVIDIA's performance recipes set (NeMo 2 performance_mode recipes and
    scripts/performance, Megatron-Bridge scripts/performance: grad_reduce_in_fp32 = False;
    NeMo 1 configs: optim.grad_sync_dtype bf16). Applies to bf16, fp8 and fp4 training; fp16
    gradients are 2 bytes in memory either way."""
    elementwise_kernels: ElementwiseKernels = "fused"
    """How norms, rotary embeddings and the MLP activation run: fused = one kernel each
    (Transformer Engine and Megatron-Core fused kernels); eager = PyTorch eager, one kernel and
    one HBM round trip per elementwise op, with the fp32 upcasts of torchtitan's Llama block
    (RMSNorm 36 bytes per element in 8 kernels instead of 4 in 1); compiled = torch.compile of that
    block: fused, but its fp32 complex rotary embedding falls back to ATen between generated casts
    and repeat_kv's copies stay (``perfmodel.formulas.eager``)."""
    fp8_casts: Fp8Casts = "separate"
    """How a low-precision GEMM's 16-bit inputs become 8-bit (fp8 and fp4 runs only):
    separate = a cast-transpose kernel of their own that reads the 16-bit tensor and writes
    the 8-bit copy and its transpose, 4 bytes per element (Transformer Engine, torchao
    float8); fused = the compiler folds the quantisation into the kernel that produces the
    tensor, which writes the 8-bit copy and its transpose, 2 bytes per element (XLA with
    flax's delayed-scaling ``Fp8DotGeneralOp``, as MaxText's ``quantization: fp8`` runs;
    ``perfmodel.formulas.fp8_casts.FP8_CAST_BYTES_PER_ELEMENT``)."""
    fp8_scaling: Fp8Scaling = "tensorwise"
    """How an fp8 GEMM scales its inputs: tensorwise = one scale per tensor (Transformer Engine's
    delayed and current scaling), the ``gemm.fp8`` curve with fast accumulation in the forward;
    blockwise = a scale per 1 x 128 activation tile and 128 x 128 weight block, the partial sums
    promoted to FP32 on CUDA cores (DeepSeek-V3 report, arXiv 2412.19437, sec. 3.3.2), at the
    ``gemm.fp8_blockwise`` curve where the GPU has one (Hopper: DeepSeek's CUTLASS 3.6 kernels,
    fitted to DeepGEMM's published H800 table by calibration/blockwise_fp8.py), else the fp8 curve
    without fast accumulation. fp8 runs only (``perfmodel.formulas.compute.gemm_curve``)."""
    cuda_graphs: StrictBool = False
    """Each transformer layer's forward and backward replay as captured CUDA graphs, so the host
    launches a graph per layer and pass instead of dispatching every operation (Megatron-Core
    ``enable_cuda_graph``, which NeMo's and Megatron-Bridge's performance recipes set as
    ``cuda_graphs``; ``perfmodel.formulas.compute.host_dispatched``). It changes only the host's
    dispatch time, which binds when a micro-batch's GPU work is shorter (fast GPUs, Grace hosts).
    A MoE layer is a graph whole only with ``moe_pad_expert_input_to_capacity`` (static shapes, as
    the recipes that graph MoE models set through token drop); dropless, its attention part is
    graphed and the router, permutations and experts stay eager. Default false, Megatron-Core's."""
    te_module_host_ops: real_field(10.0, 1.0, exclusive_minimum=False) = 1.0
    """Host cost of one Transformer Engine GEMM module call (Linear, GroupedLinear) in eager
    framework operations (``Efficiencies.host_op_overhead_s``). TransformerEngine issue #2053
    (2025-08, BF16 Linear forward, h 2048, 8192 tokens): 99.66 us of CPU time per TE Linear against
    37.08 per torch.nn.Linear on GB200 (2.69x; GH200 90.53 against 33.17), before TE's CPU-overhead
    work (PRs #2377 and #2400, TE 2.10; #2439, 2.13; #2559, 2.14). Default 1, a TE module as cheap
    as a torch op, as TE issue #2126 reports from 2026-01 on (``perfmodel.formulas.compute``)."""
    optimizer_kernels: OptimizerKernels = "fused"
    """How the Adam step runs: fused = one pass over gradient, master weight and states (apex /
    Transformer Engine FusedAdam under Megatron-Core's distributed optimizer,
    torch.optim.AdamW(fused=True)), 30 bytes per parameter; foreach = PyTorch's default
    multi-tensor AdamW, one pass per elementwise op, 84 bytes per parameter
    (``perfmodel.formulas.overheads.FOREACH_ADAMW_BYTES_PER_PARAM``)."""
    optimizer_moments: OptimizerMoments = "fp32"
    """Dtype of Adam's two moments (m, v): fp32 = Megatron-Core's default; bf16 = 2 bytes each
    beside the fp32 master weight, as Megatron-Core's ``--use-precision-aware-optimizer`` with
    ``--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16`` keeps them (megatron/training/arguments.py,
    core_r0.12+) and DeepSeek-V3 trained (arXiv 2412.19437 sec. 3.3.3, 'Low-Precision Optimizer
    States'). Optimizer states 8 bytes per parameter instead of 12
    (``perfmodel.formulas.model_states.stack_state_bytes_per_param``), and the optimizer step
    moves 8 bytes fewer (``perfmodel.formulas.overheads.optimizer_bytes_per_param``)."""
    moe_fp8_activation_cache: StrictBool = False
    """The SwiGLU inputs of the experts (routed and shared) kept for the backward in FP8, 1 byte
    per element instead of 2 (DeepSeek-V3 report, arXiv 2412.19437, sec. 3.3.2, 'Low-Precision
    Storage and Communication': 'we cache the inputs of the SwiGLU operator and recompute its
    output in the backward pass. These activations are also stored in FP8 with our fine-grained
    quantization method'). Recomputing the SwiGLU output is the ``moe_act`` recompute module.
    Default off: Megatron-Core keeps them 16-bit. Ignored for dense models
    (``perfmodel.formulas.activations``)."""
    moe_dispatch_fp8: StrictBool = False
    """Tokens dispatched to the experts in FP8 with a 4-byte scale per 128 elements, 1 + 4/128
    bytes per element instead of 2; the combine stays 16-bit (DeepSeek-V3 report, arXiv
    2412.19437, sec. 3.3.2, 'Low-Precision Communication'; DeepEP's dispatch takes FP8 tokens with
    their scales, deepseek-ai/DeepEP README). Default off. Ignored for dense models
    (``perfmodel.formulas.traffic.ep_layer_s``)."""
    moe_comm_reserved_sms: int_field(MAX_RESERVED_SMS, minimum=0) = 0
    """SMs the framework keeps for its expert-parallel communication kernels for the whole step:
    its compute kernels are launched on the others only, so every layer computes at
    (num_sms - reserved) / num_sms of its rate, and the dispatch and combine beside it slow it
    no further (``perfmodel.formulas.overlap.reserved_sm_scale``). DeepSeek-V3 report sec. 3.2.2:
    20 of the H800's 132 SMs run the all-to-alls (DeepEP ``Buffer.set_num_sms``); in
    deepseek-ai/profile-data train.json the persistent GEMM kernels run grids of 112 blocks.
    0 = none reserved: the collectives share the SMs while they run
    (``Efficiencies.overlap_compute_slowdown``), as Megatron-Core's cuBLAS GEMMs beside DeepEP do."""
    moe_probs_in_activation: StrictBool = False
    """The router probabilities travel with the dispatched tokens and multiply the experts' SwiGLU
    output (a weighted SwiGLU), so the combine sums unweighted copies and the probabilities'
    gradient needs only the SwiGLU output, not the h-wide expert output: that tensor is not kept
    for the backward (Megatron-Core megatron/core/transformer/moe/experts.py, TEGroupedMLP with
    ``weighted_bias_swiglu_impl`` on ``permuted_probs``; DeepEP's dispatch returns the top-k
    weights beside the received tokens, deepseek-ai/DeepEP README). Default off: an unpermute
    that multiplies each expert output by its probability keeps it (moe_utils.unpermute with probs);
    Megatron-Core 0.14-0.18 weigh the activation (the megatron-bridge presets). Dense: ignored."""
    selective_recompute: SelectiveRecompute | Annotated[tuple[RecomputeModule, ...], Field(
        max_length=len(RECOMPUTE_MODULE_CHOICES))] = "core_attn"
    """What ``recompute: selective`` recomputes (unused for none and full, but always checked against the model,
    since the layout search tries selective too): core_attn = Megatron-Core's default, the attention core; op_sac =
    torchtitan's operator-level policy (selective_ac_option 'op'), which keeps matmul and SDPA outputs except every
    second matmul and recomputes the rest (dense Llama-style layers only); save_qkv_proj = MaxText's remat policy,
    which keeps the Q, K and V projections and recomputes the rest of the layer (dense layers without MLA); or a
    list of Megatron-Core ``recompute_modules`` (core_attn, layernorm, mla_up_proj, moe_act, mlp, moe,
    shared_experts), each recomputed as Megatron-Core does it (see ``perfmodel.formulas.recompute``).
    ``core_attn`` and ``[core_attn]`` are the same policy."""
    recompute_num_layers: int_field(MAX_NUM_LAYERS) | None = None
    """With ``recompute: full``, how many layers of each model chunk (pipeline stage, or virtual stage with
    interleaving) are recomputed (Megatron-Core ``recompute_method: block`` with ``recompute_num_layers``): the
    first N layers of every chunk store only their input and are recomputed, the others store everything. null =
    every layer (``full`` as the contract defines it). A chunk with fewer layers recomputes all of them, as in
    Megatron-Core."""
    activation_offload_layers: int_field(MAX_NUM_LAYERS, minimum=0) = 0
    """Transformer layers whose activations are copied to host memory during the forward and back before their
    backward (Megatron-Core ``cpu_offloading`` with ``cpu_offloading_num_layers``, through Transformer Engine's
    ``get_cpu_offload_context``). The first N layers are offloaded; Megatron-Core allows it only with pp = 1, no
    recompute and N < num_layers. 0 = off. See ``perfmodel.formulas.offload``."""
    pipeline_layout: Annotated[str, StringConstraints(max_length=MAX_PIPELINE_LAYOUT_CHARS)] | None = None
    """Which layers each virtual pipeline stage runs (Megatron-Core ``pipeline_model_parallel_layout`` in its string
    form, e.g. ``Et*4|(t*4|)*14tmL``): ``|`` separates the pp * vpp virtual stages, E is the embedding, t a decoder
    layer, m an MTP module, L the output layer and loss, ``x*n`` and ``(...)*n`` repeat. null = the even split,
    l / pp layers per rank with the embedding on the first and the output layer on the last. See
    ``perfmodel.spec.pipeline_layout``."""
    cp_comm_type: CpCommTypeName = "p2p"
    """How context parallelism moves keys and values: p2p = Megatron-Core's default ring, each send behind one
    step's kernel; torch_allgather = PyTorch's experimental context_parallel (one K/V all-gather behind the first
    step, a float32 dKV ring). Records in ``perfmodel.spec.context_parallel``, with their sources. Ignored when
    cp = 1."""
    pp_grad_reduce: PpGradReduceName = "overlapped"
    """Where a pipeline stage's gradient reduction runs: overlapped = Megatron-Core's, behind the last backward;
    stage_drain = torch.distributed.pipelining with FSDP2, after each stage's last backward, in the drain. Records
    in ``perfmodel.spec.pp_grad_reduce``. Ignored when pp = 1."""
    cross_entropy: CrossEntropy = "fused"
    """How the loss runs: fused = Megatron-Core's vocab-parallel cross-entropy (or a compiled loss), fp32 logits
    kept, 4 bytes per logit (Korthikanti et al. 2022, sec. 4.3); eager_fp32 = ``F.cross_entropy(logits.float(),
    labels)`` in eager PyTorch (torchtitan before it compiled the loss), 12 bytes per logit at the start of the
    backward and 14 bytes of forward traffic (``perfmodel.formulas.memory``, ``perfmodel.formulas.workload``)."""

    @model_validator(mode="before")
    @classmethod
    def _resolve_stack(cls, data):
        """The preset's options under the ones given beside ``stack``."""
        if not isinstance(data, dict) or data.get("stack") is None:
            return data
        name = data["stack"]
        if not isinstance(name, str) or name not in list_stacks():
            raise ValueError(unknown_stack_reason(name))
        preset = stack_options(name)
        merged = {**preset, **data}
        if isinstance(preset.get("overlap"), dict) and isinstance(data.get("overlap"), dict):
            merged["overlap"] = {**preset["overlap"], **data["overlap"]}
        return merged

    @property
    def flash_attention(self) -> bool:
        """A fused kernel (FlashAttention or cuDNN): the scores never reach HBM."""
        return self.attention_backend != "unfused"

    @property
    def pipeline_stages(self) -> tuple[str, ...] | None:
        """``pipeline_layout`` as virtual stages (``perfmodel.spec.pipeline_layout.parse``), or None."""
        return None if self.pipeline_layout is None else _stages(self.pipeline_layout)


@functools.lru_cache(maxsize=256)
def _stages(text: str) -> tuple[str, ...]:
    return pipeline_layout.parse(text)


SOFTWARE_FIELDS: tuple[str, ...] = tuple(SoftwareStack.model_fields)
"""The options that moved from the top level of a scenario into ``software:``."""


def software_to_dict(sw: SoftwareStack) -> dict:
    """The ``software:`` mapping that reads back as ``sw``: its stack, and only the options that
    differ from that stack's (from the defaults when it names none). A null that differs is kept
    (``overlap.tp: null`` is ideal chunked TP overlap, where a dropped key would read back as 0)."""
    full = sw.model_dump(mode="json")
    base = SoftwareStack(stack=sw.stack).model_dump(mode="json")
    out: dict = {} if sw.stack is None else {"stack": sw.stack}
    for key, value in full.items():
        if key == "stack":
            continue
        if key == "overlap":
            changed = {k: v for k, v in value.items() if v != base["overlap"][k]}
            if changed:
                out["overlap"] = changed
        elif value != base[key]:
            out[key] = value
    return out
