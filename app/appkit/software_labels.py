"""The job editor's words for the software stack's options: a shorter label, the help, the step
and the sidebar group of the options that have them (``appkit.software_form`` generates every
option's widget from the schema; one this table leaves out gets its name as label, its
docstring's first sentence as help, and the "Software stack" group), and each overlap kind's help."""

from __future__ import annotations

from .schema_form import Look

DEFAULT_GROUP = "Software stack"
BATCH = "Batch and precision"
ZERO3 = "Overlap and ZeRO-3"


LOOKS = {
    "grad_reduce_in_fp32": Look(
        "Reduce gradients in fp32",
        "on: 4-byte gradient buffer and data-parallel reduction (Megatron-LM bf16 default, FSDP2 in torchtitan); "
        "off: 16-bit, half the bytes (NVIDIA performance recipes)", BATCH),
    "attention_backend": Look(
        "Attention kernel",
        "flash: fused kernel at FlashAttention-2's measured rate; cudnn: cuDNN's fused kernel at its own, about "
        "1.7x faster on H100 (where not measured, flash's); unfused: s x s scores written to HBM (Megatron-LM "
        "before 2022)", BATCH),
    "moe_dispatcher": Look(
        "MoE dispatcher",
        "alltoall: every routed copy is its own message; flex: DeepEP/HybridEP, one copy per remote NVLink "
        "domain, fanned out over NVLink; alltoall also sorts tokens by local expert", BATCH),
    "elementwise_kernels": Look(
        "Elementwise kernels",
        "fused: one kernel per norm and activation (Transformer Engine); eager: PyTorch eager, one kernel and "
        "HBM round trip per op, norms and rotary in fp32; compiled: torch.compile of torchtitan's block, fused "
        "but its complex rotary still an ATen kernel and repeat_kv a copy", BATCH),
    "cross_entropy": Look(
        "Cross-entropy",
        "fused: Megatron-Core vocab-parallel loss or a compiled one, 4 bytes per logit kept; eager_fp32: "
        "F.cross_entropy(logits.float()) in eager PyTorch, 12 bytes per logit at the start of the backward", BATCH),
    "optimizer_kernels": Look(
        "Optimizer kernels",
        "fused: one Adam pass (FusedAdam, AdamW(fused=True)), 30 bytes per parameter; foreach: PyTorch's default "
        "multi-tensor AdamW, one pass per op, 84 bytes", BATCH),
    "fp8_casts": Look(
        "FP8 casts",
        "fp8/fp4 only. separate: a cast-transpose kernel per GEMM input (Transformer Engine, torchao), 4 bytes "
        "per element; fused: the compiler writes the 8-bit copy from the producing kernel (XLA, MaxText), 2 bytes",
        BATCH),
    "selective_recompute": Look(
        "Selective recompute",
        "used with Recompute = selective. Megatron-Core recompute_modules (core_attn: the attention core, its "
        "default; layernorm, mla_up_proj, moe_act: free an op's output and redo it; mlp, moe, shared_experts: "
        "checkpoint the submodule), or one named policy alone: op_sac, torchtitan's op-level policy, or "
        "save_qkv_proj, MaxText's remat policy (dense Llama-style models)", BATCH),
    "recompute_num_layers": Look(
        "Full-recompute layers per chunk (0 = all)",
        "used with Recompute = full: Megatron-Core's block method recomputes the first N layers of every "
        "pipeline chunk and stores the rest", BATCH),
    "activation_offload_layers": Look(
        "Activation offload layers",
        "Megatron-Core cpu_offloading_num_layers: the first N layers' activations wait in host memory (pp = 1 "
        "and no recompute only); copies the compute does not hide are 'offload'", BATCH),
    "pipeline_layout": Look(
        "Pipeline layout (empty = even split)",
        "Megatron-Core pipeline_model_parallel_layout: pp x vpp virtual stages separated by |, E embedding, "
        "t decoder layer, m MTP module, L loss; x*n and (...)*n repeat, e.g. Et*4|(t*4|)*14tmL. The slowest "
        "rank sets the pace", BATCH),
    "fsdp_collectives_per_layer": Look(
        "ZeRO-3 collectives per layer",
        "1: FSDP / Megatron-FSDP (one flat unit per layer); one per parameter tensor: DeepSpeed ZeRO-3 of 2021 "
        "(12 for a GPT-3 layer)", ZERO3),
    "fsdp_list_api": Look(
        "ZeRO-3 list API",
        "torch.distributed list API: every collective also copies each rank's chunk with its own kernel "
        "(DeepSpeed until October 2021)", ZERO3),
    "fsdp_copy_kernels": Look(
        "ZeRO-3 FSDP2 copies",
        "PyTorch FSDP2: each all-gather copied out of its flat buffer into the parameters, the gradients copied "
        "into the reduce-scatter input, on the compute stream (14 bytes a parameter a micro-batch with fp32 "
        "reduction; torchtitan)", ZERO3),
    "fsdp_root_group": Look(
        "ZeRO-3 FSDP2 root group",
        "PyTorch FSDP2 (torchtitan): the embedding and output layer are one group, gathered as each micro-batch "
        "opens and reduce-scattered after the last block's backward, with no compute beside either", ZERO3),
    "pp_grad_reduce": Look(
        "Pipeline gradient reduction",
        "overlapped: Megatron-Core's reduce-scatter behind the last backward; stage_drain: torch.distributed."
        "pipelining over FSDP2 (torchtitan), each stage reducing after its last backward, one stage after "
        "another in the pipeline drain", ZERO3),
    "moe_router_fusion": Look(
        "MoE router fusion", "Megatron-Core --moe-router-fusion: 31 router kernels per forward instead of 72"),
    "moe_permute_fusion": Look(
        "MoE permute fusion",
        "Megatron-Core --moe-permute-fusion: one kernel per token permutation and unpermutation"),
    "moe_expert_capacity_factor": Look(
        "Expert capacity factor (0 = dropless)",
        "Megatron-Core --moe-expert-capacity-factor: an expert takes at most this many times its mean share of "
        "the routed tokens", step=0.25),
    "moe_pad_expert_input_to_capacity": Look(
        "Pad experts to capacity",
        "Megatron-Core --moe-pad-expert-input-to-capacity: static shapes, every expert runs its capacity"),
    "moe_load_imbalance": Look(
        "MoE load imbalance (busiest rank / mean)",
        "1 = balanced (NVIDIA's benchmarks force it); the busiest expert-parallel rank sets the pace"),
    "attention_dropout": Look(
        "Attention dropout",
        "unfused attention only: the dropout kernel on the scores (flash attention fuses it)"),
    "cuda_graphs": Look(
        "CUDA graphs",
        "Megatron-Core enable_cuda_graph: the host launches one graph per layer and pass instead of every op "
        "(a dropless MoE layer graphs its attention only); matters when the host binds"),
}
"""The options' looks, in the order the sidebar draws them (the others follow in the schema's)."""

OVERLAP_HELP = {
    "tp": "TP collectives behind the layer's GEMMs (Megatron-Core default 0: tp_comm_overlap off)",
    "cp": "ring-attention KV exchange behind attention",
    "ep": "MoE dispatch/combine behind another micro-batch's layer compute (batch-level overlap, "
          "Megatron-Core overlap_moe_expert_parallel_comm; 0: in the critical path)",
    "pp": "steady-state pipeline send/recv behind compute",
    "dp": "gradient reduce-scatter / parameter all-gather behind the first and last micro-batch",
    "fsdp": "ZeRO-3 gathers and reduce-scatters behind the layer's compute (FSDP prefetch)",
}
