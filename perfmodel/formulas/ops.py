"""The vocabulary of the step model's operation inventory: kinds of operation and layer, how
tensor parallelism splits a GEMM, and one ``Op`` (``perfmodel.formulas.workload`` builds the
inventory; ``perfmodel.formulas.compute`` prices it)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from perfmodel.spec.precision import FORMAT_BYTES

FLOP_PER_MAC = 2
"""A multiply-accumulate is two FLOPs."""


class OpKind(enum.Enum):
    GEMM = "gemm"
    ATTENTION = "attention"
    MEMORY = "memory"   # elementwise / normalisation: bound by HBM traffic


class TpSplit(enum.Enum):
    """How tensor parallelism shards a GEMM's weight (Shoeybi et al. 2019)."""

    COLUMN = "column"   # split n (output features): QKV, MLP up/gate
    ROW = "row"         # split k (input features): attention out, MLP down
    NONE = "none"       # replicated: router, MLA down-projections


class LayerKind(enum.Enum):
    DENSE = "dense"
    MOE = "moe"


@dataclass(frozen=True)
class Op:
    """One operation of a layer, per token, before any parallel sharding."""

    name: str
    kind: OpKind
    k: int = 0
    """GEMM reduction dimension."""
    n: int = 0
    """GEMM output dimension."""
    count: int = 1
    """Identical GEMMs in the layer (e.g. routed experts)."""
    tokens_frac: float = 1.0
    """Fraction of the layer's tokens each of the ``count`` GEMMs sees (k_e/E for experts)."""
    tp_split: TpSplit = TpSplit.NONE
    expert: bool = False
    """Sharded by expert parallelism (and etp) instead of tensor parallelism."""
    bytes_per_token: float = 0.0
    """MEMORY ops: forward HBM bytes read + written per token (16-bit activations)."""
    multi_local_experts_only: bool = False
    """MEMORY ops that run only where a GPU holds more than one expert (num_experts / ep > 1)."""
    low_precision_only: bool = False
    """MEMORY ops that run only when the scenario's GEMMs are low precision (FP8, FP4)."""
    kernels: int = 1
    """MEMORY ops: GPU kernels (and host dispatches) one forward pass of the op takes."""
    bwd_bytes_per_token: float | None = None
    """MEMORY ops: backward HBM bytes per token where counted kernel by kernel; None = twice
    the forward bytes (the gradient of an elementwise op reads the incoming gradient and the
    saved input and writes one output: twice the forward's one read and one write)."""
    bwd_kernels: int | None = None
    """MEMORY ops with ``bwd_bytes_per_token``: kernels of the backward pass (None = ``kernels``)."""
    stream_class: str | None = None
    """MEMORY ops whose kernels reach less than the STREAM rate: their key in
    ``Efficiencies.stream_fractions`` (None: vectorised streaming kernels, the full rate)."""
    attn_heads: int = 0
    attn_qk_dim: int = 0
    attn_v_dim: int = 0
    attn_window: int | None = None
    """ATTENTION: sliding-window width of the windowed layers (None = full attention)."""
    attn_window_share: float = 0.0
    """ATTENTION: share of the model's layers that use the window; the op stands for the
    average layer (GPT-OSS alternates windowed and full layers)."""

    @property
    def params(self) -> int:
        return self.k * self.n * self.count if self.kind is OpKind.GEMM else 0

    @property
    def fwd_flop_per_token(self) -> float:
        """GEMM forward FLOPs per layer token (attention core depends on s: see below)."""
        if self.kind is not OpKind.GEMM:
            return 0.0
        return FLOP_PER_MAC * self.k * self.n * self.count * self.tokens_frac


QK_NORM_OP = "attention/qk_norm"
"""The per-head query/key norm (``workload.qk_norm_op``)."""
MLA_LATENT_NORM_OP = "mla/latent_norm"
"""MLA's norms of its query and key/value latents (``workload.qk_norm_op``)."""
MLA_QKV_OP = "attention/mla_qkv"
"""Megatron-Core's assembly of MLA's per-head key and value (``megatron_eager.mla_qkv_op``)."""

ACT_BYTES = FORMAT_BYTES["bf16"]
"""Bytes per 16-bit activation element."""
FP32_BYTES = FORMAT_BYTES["fp32"]
"""Bytes per fp32 element (eager PyTorch upcasts norms and rotary embeddings to fp32)."""
