"""The job editor's words for the software stack's options: each implementation choice's label,
choices and help, and each overlap kind's help (``appkit.sidebar`` draws them)."""

from __future__ import annotations

from perfmodel.spec.software import (
    ATTENTION_BACKEND_CHOICES,
    CROSS_ENTROPY_CHOICES,
    ELEMENTWISE_KERNELS_CHOICES,
    FP8_CASTS_CHOICES,
    MOE_DISPATCHER_CHOICES,
    OPTIMIZER_KERNELS_CHOICES,
)

IMPLEMENTATION_CHOICES = (
    ("Attention kernel", ATTENTION_BACKEND_CHOICES, "attention_backend",
     ("flash: fused kernel at FlashAttention-2's measured rate; cudnn: cuDNN's fused kernel at its own, "
      "about 1.7x faster on H100 (where not measured, flash's); unfused: s x s scores written to HBM "
      "(Megatron-LM before 2022)")),
    ("MoE dispatcher", MOE_DISPATCHER_CHOICES, "moe_dispatcher",
     "alltoall: every routed copy is its own message; flex: DeepEP/HybridEP, one copy per remote NVLink "
     "domain, fanned out over NVLink; alltoall also sorts tokens by local expert"),
    ("Elementwise kernels", ELEMENTWISE_KERNELS_CHOICES, "elementwise_kernels",
     "fused: one kernel per norm and activation (Transformer Engine, torch.compile); eager: PyTorch eager, "
     "one kernel and HBM round trip per op, norms and rotary in fp32"),
    ("Cross-entropy", CROSS_ENTROPY_CHOICES, "cross_entropy",
     "fused: Megatron-Core vocab-parallel loss or a compiled one, 4 bytes per logit kept; eager_fp32: "
     "F.cross_entropy(logits.float()) in eager PyTorch, 12 bytes per logit at the start of the backward"),
    ("Optimizer kernels", OPTIMIZER_KERNELS_CHOICES, "optimizer_kernels",
     "fused: one Adam pass (FusedAdam, AdamW(fused=True)), 30 bytes per parameter; foreach: PyTorch's default "
     "multi-tensor AdamW, one pass per op, 84 bytes"),
    ("FP8 casts", FP8_CASTS_CHOICES, "fp8_casts",
     ("fp8/fp4 only. separate: a cast-transpose kernel per GEMM input (Transformer Engine, torchao), 4 bytes "
      "per element; fused: the compiler writes the 8-bit copy from the producing kernel (XLA, MaxText), 2 bytes")),
)
"""Which kernel or framework implementation the job runs: (label, choices, widget key, help)."""

OVERLAP_HELP = {
    "tp": "TP collectives behind the layer's GEMMs (Megatron-Core default 0: tp_comm_overlap off)",
    "cp": "ring-attention KV exchange behind attention",
    "ep": "MoE dispatch/combine behind another micro-batch's layer compute (batch-level overlap, "
          "Megatron-Core overlap_moe_expert_parallel_comm; 0: in the critical path)",
    "pp": "steady-state pipeline send/recv behind compute",
    "dp": "gradient reduce-scatter / parameter all-gather behind the first and last micro-batch",
    "fsdp": "ZeRO-3 gathers and reduce-scatters behind the layer's compute (FSDP prefetch)",
}
