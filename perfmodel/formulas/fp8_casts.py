"""How a low-precision GEMM's 16-bit inputs become 8 bits: the bytes per element of the cast
(``SoftwareStack.fp8_casts``), Transformer Engine's current-scaling amax pass
(``fp8_current_scaling``) and the quantisation kernels per grouped GEMM (``fp8_mxfp8``,
``fp8_current_scaling``). ``perfmodel.formulas.compute.op_time`` prices them beside the GEMM.
"""

from __future__ import annotations

from perfmodel.formulas.ops import ACT_BYTES
from perfmodel.spec.software import SoftwareStack

FP8_CAST_BYTES_PER_ELEMENT = {"separate": 2 + 1 + 1, "fused": 1 + 1}
"""HBM bytes per element that turn a low-precision GEMM's 16-bit input into 8 bits
(``SoftwareStack.fp8_casts``). Forward: the GEMM input (m x k); backward: the output gradient
(m x n). Hopper FP8 GEMMs take only the TN layout, so the weight-gradient GEMM needs a
transposed copy of both.
separate: Transformer Engine's fused cast-transpose kernel (and torchao float8's cast) reads
the 2-byte tensor and writes the 1-byte copy and its 1-byte transpose.
fused: the quantisation is an elementwise op of a known scale that the compiler fuses into the
kernel producing the tensor, so the 16-bit tensor is not read again; that kernel writes the
1-byte copy and its transpose. XLA matches the quantise-dequantise pattern around a dot and
calls cuBLASLt's FP8 GEMM on the 8-bit tensor, transposes allowed in between (NVIDIA
JAX-Toolbox docs/NATIVE_FP8.md, "Exact pattern that XLA can match for FP8 MatMul"); flax's
Fp8DotGeneralOp quantises with the scale of earlier steps' amax history (delayed scaling,
flax/linen/fp8_ops.py in_qdq, out_qdq), so no reduction over the tensor has to finish first.
torchao's dynamic (current) scaling needs the tensor's amax before the cast, so it stays a
pass of its own: separate. Where XLA emits the transpose as a kernel of its own (its FP8 rewrite
tests show a ``transpose`` of the 8-bit operand, xla/service/gpu/transforms/
gemm_rewriter_fp8_test.cc) the fused form costs 1 + 2 = 3 bytes; 2 takes the transpose as fused
into the producer too. At 3 the anchored what-ifs of 2026-11-27 (HEAD 57c7de1) were 5.27% instead
of 5.22%."""


CURRENT_SCALING_AMAX_BYTES_PER_ELEMENT = ACT_BYTES
"""Transformer Engine's per-tensor current scaling (``Float8CurrentScalingQuantizer::quantize``,
``pytorch/csrc/quantizer.cpp``, v2.7 to v2.14) reads the 16-bit tensor once for its amax
(``nvte_compute_amax``) before the cast-transpose reads it again: 2 more bytes per element than
``FP8_CAST_BYTES_PER_ELEMENT``'s separate cast. The output gradients of the backward and
every forward input not written by a Transformer Engine norm pay it; a norm fused into the next
GEMM (``TELayerNormColumnParallelLinear``) computes the amax as it writes its output
(``normalization.cpp`` ``FUSED_NORM_AMAX_FP8``), so that GEMM's forward does not
(``NORM_FED_GEMMS``)."""
CURRENT_SCALING_KERNELS = 3
"""Kernels per quantised tensor under current scaling: amax, the scale from the amax, the cast.
Per expert in ``GroupedLinear``: ``tex.split_quantize`` fuses the experts' casts into one kernel
only for delayed scaling (``multi_tensor_quantize_impl``, ``pytorch/csrc/extensions/cast.cpp``,
v2.9: "Currently only have fused kernel for FP8 delayed scaling") and quantises them one by one
otherwise."""
NORM_FED_GEMMS = ("attention/qkv", "mlp/up")
"""The GEMMs whose input a fused Transformer Engine norm writes (Megatron-Core's TE layer spec:
``TELayerNormColumnParallelLinear`` for the QKV projection and a dense MLP's fc1)."""


MXFP8_KERNELS = 1
"""Kernels per quantised tensor under MXFP8: one quantise kernel (block scales need no amax
pass). Per expert in ``GroupedLinear``: ``tex.split_quantize`` allocates the experts' MXFP8
tensors in bulk but quantises them one by one (``multi_tensor_quantize_impl``, cast.cpp, v2.9
and v2.14; TE 2.14's grouped MXFP8 kernel, ``nvte_group_quantize``, serves ``group_quantize``,
which ``GroupedLinear`` does not call)."""


QUANTISATIONS_PER_LINEAR_FWD_BWD = 2
"""Input quantisations of a linear layer per forward and backward: its input forward, its output
gradient backward (the weight gradient reuses the forward's column-wise copy). Each one's kernels
beyond the first are launches inside the same host operation (``OpTime.extra_launches``)."""


def quantisation_cast(op_name: str, count: int, sw: SoftwareStack) -> tuple[float, float, int]:
    """(forward, backward) bytes per element beside the cast, and kernels per pass, of a
    low-precision GEMM's input quantisation (``count``: the grouped GEMMs of the op): under
    ``sw.fp8_current_scaling`` the amax pass and three kernels per GEMM; under ``sw.fp8_mxfp8`` one
    kernel per GEMM; otherwise one cast kernel per pass, as before (delayed scaling's experts
    share one multi-tensor cast-transpose, ``nvte_multi_cast_transpose``)."""
    if sw.fp8_current_scaling:
        fwd = 0.0 if op_name in NORM_FED_GEMMS else CURRENT_SCALING_AMAX_BYTES_PER_ELEMENT
        return fwd, CURRENT_SCALING_AMAX_BYTES_PER_ELEMENT, CURRENT_SCALING_KERNELS * count
    return 0.0, 0.0, MXFP8_KERNELS * count if sw.fp8_mxfp8 else 1


def input_cast(op_name: str, count: int, sw: SoftwareStack) -> tuple[float, float, int]:
    """(forward, backward) HBM bytes per element of a low-precision GEMM's input cast, and its
    kernels per pass: ``FP8_CAST_BYTES_PER_ELEMENT`` and ``quantisation_cast``."""
    amax_fwd, amax_bwd, kernels = quantisation_cast(op_name, count, sw)
    cast = FP8_CAST_BYTES_PER_ELEMENT[sw.fp8_casts]
    return cast + amax_fwd, cast + amax_bwd, kernels
