"""Achieved-efficiency parameters: how close software gets to the hardware's peaks.

These are the co-design knobs. A hardware YAML carries defaults (each with a source); a
calibration profile (``perfmodel calibrate``) replaces them with values fitted to measurements.

Forms (each used in exactly one place):

============================  ==========================================================
GEMM (``compute``)            eff(m, n, k) = eff_max * m/(m+d) * n/(n+d) * k/(k+d),
                              d = ``half_dim`` (elements), per precision
Attention (``compute``)       eff(s) = eff_max * s/(s+s_half), forward and backward apart
Memory-bound (``compute``)    achieved = hbm_bandwidth * memory_efficiency
Collective (``comm``)         t(S) = latency_s + algorithm_factor * S / busbw_bytes_per_s
Kernel (``compute``)          t = kernel_overhead_s + roofline time, per kernel on the GPU
Launch (``overheads``)        fixed host seconds per kernel launch
Overlap (``overlap``)         compute beside a collective runs (1 + slowdown) times longer
============================  ==========================================================
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from perfmodel.spec.attention_head_dim import Generation
from perfmodel.spec.limits import (
    MAX_BUSBW_BYTES_PER_S,
    MAX_COLLECTIVE_FITS,
    MAX_HEAD_DIM,
    MAX_NUM_GPUS,
    MAX_RATIO,
    MAX_SECONDS,
    MIN_BUSBW_BYTES_PER_S,
    Name,
    int_field,
    real_field,
)

EAGER_STREAM_FRACTIONS_H100 = {"norm": (0.77, 0.52), "rope": (0.82, 0.77), "repeat_kv": (0.32, 0.27)}
"""``Efficiencies.stream_fractions`` as measured on the H100: medians of seven runs of
calibration/eager_ops_probe.py (Llama 3 8B's RMSNorm, rotary embedding and repeat_kv as
calibration/step_check.py runs them, 4k-16k tokens) on two lent H100 80GB HBM3
(calibration/results/nvidia-h100-80gb-hbm3-2026-11-27-moe/eager_ops/; docs/calibration.md,
'Eager element-wise operations'), against the bytes perfmodel.formulas.eager counts."""
MAX_STREAM_CLASSES = 16
"""Classes of memory-bound operation a spec may give a fraction for (three are used)."""


def saturating_gemm_efficiency(m, n, k, efficiency_max, half_dim):
    """eff_max * m/(m+d) * n/(n+d) * k/(k+d): the one home of the GEMM form (step model and fits); a
    float stays a float (``perfmodel.formulas.layouts.one_row``)."""
    m, n, k = (x if isinstance(x, float) else np.asarray(x, dtype=float) for x in (m, n, k))
    d = half_dim
    return efficiency_max * (m / (m + d)) * (n / (n + d)) * (k / (k + d))


def saturating_attention_efficiency(seq, efficiency_max, half_seq):
    """eff_max * s/(s + s_half): the one home of the attention form (step model and fits)."""
    s = seq if isinstance(seq, float) else np.asarray(seq, dtype=float)
    return efficiency_max * s / (s + half_seq)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


Fraction = real_field(1.0)
"""A finite fraction in (0, 1]."""
NonNegative = real_field(MAX_RATIO, 0.0, exclusive_minimum=False)
"""A finite, non-negative factor or size in elements (``perfmodel.spec.limits.MAX_RATIO``)."""
Seconds = real_field(MAX_SECONDS, 0.0, exclusive_minimum=False)


class GemmEfficiency(_Frozen):
    """Saturating GEMM efficiency for one precision."""

    efficiency_max: Fraction
    """Fraction of the dense peak reached by large, square GEMMs."""
    half_dim: NonNegative
    """Dimension (elements) at which one factor of the saturation is one half."""


class AttentionEfficiency(_Frozen):
    """FlashAttention-style fused attention kernel, as a fraction of the 16-bit dense peak."""

    fwd_efficiency_max: Fraction
    bwd_efficiency_max: Fraction
    half_seq: NonNegative
    """Sequence length (keys per query block) at which efficiency is half of its maximum."""
    bwd_half_seq: NonNegative | None = None
    """The backward kernel's own half_seq where it was measured apart; None = ``half_seq``.
    FlashAttention-2's backward saturates later than its forward (H100 and H200 suites:
    half_seq about 370 forward and 870-990 backward, docs/calibration.md)."""
    measured_head_dim: int_field(MAX_HEAD_DIM) | None = None
    """Head dim of the benchmarks the curve was fitted to. None: not stated, and the curve applies
    at every head dim (``perfmodel.spec.attention_head_dim``)."""
    measured_generation: Generation | None = None
    """GPU generation those benchmarks ran on (a curve borrowed from another GPU names the donor's),
    which picks the published rates by head dim that scale the curve to an op's head dim."""

    @property
    def backward_half_seq(self) -> float:
        return self.half_seq if self.bwd_half_seq is None else self.bwd_half_seq


class CollectiveFit(_Frozen):
    """Alpha-beta fit of one collective over one group: its size, and how it spans domains.

    A fit replaces the modelled time of the groups it describes: ``num_gpus`` GPUs inside one
    scale-up domain (``scale_up``), or ``num_gpus`` GPUs over ``num_domains`` domains
    (``scale_out``; any number of domains above one where ``num_domains`` is not known). A
    16-GPU log of two 8-GPU nodes describes a 16-GPU group over two domains, and no other."""

    op: Name
    """all_reduce | all_gather | reduce_scatter | all_to_all | send_recv"""
    fabric: Literal["scale_up", "scale_out"]
    """scale_up: the group sits in one scale-up domain; scale_out: it spans several."""
    num_gpus: int_field(MAX_NUM_GPUS, minimum=2)
    """GPUs in the measured group (nccl-tests: its ranks)."""
    num_domains: int_field(MAX_NUM_GPUS) | None = None
    """Scale-up domains the group spanned: 1 for scale_up; for scale_out the count (hosts of an
    HGX log), or None where it is not known."""
    latency_s: Seconds
    busbw_bytes_per_s: real_field(MAX_BUSBW_BYTES_PER_S, MIN_BUSBW_BYTES_PER_S, exclusive_minimum=False)
    """Asymptotic bus bandwidth (nccl-tests convention)."""

    @model_validator(mode="after")
    def _span(self) -> "CollectiveFit":
        d = self.num_domains
        if self.fabric == "scale_up" and d not in (None, 1):
            raise ValueError(f"a scale_up fit spans one domain, got num_domains {d}")
        if self.fabric == "scale_out" and d is not None and not 2 <= d <= self.num_gpus:
            raise ValueError(f"a scale_out fit spans 2 to num_gpus({self.num_gpus}) domains, got {d}")
        return self

    def describes(self, num_gpus: int, num_domains: int) -> bool:
        """Whether this fit measured a group of ``num_gpus`` GPUs over ``num_domains`` domains."""
        if num_gpus != self.num_gpus:
            return False
        if self.fabric == "scale_up":
            return num_domains == 1
        return num_domains > 1 and self.num_domains in (None, num_domains)


class Efficiencies(_Frozen):
    """Every efficiency the step model uses, with one source string per group."""

    gemm: dict[Name, GemmEfficiency]
    """Keyed by precision: bf16, fp16, fp8, fp4, tf32."""
    attention: AttentionEfficiency
    """The fused attention kernel of ``attention_backend: flash``: FlashAttention-2's curve
    where the GPU was measured."""
    attention_cudnn: AttentionEfficiency | None = None
    """cuDNN's fused flash attention (``attention_backend: cudnn``), fitted to the suite's
    ``sdpa-cudnn`` records where a lent GPU ran them (``calibration/published.py``). None: not
    measured on this GPU, and ``cudnn`` runs at the ``attention`` curve."""
    memory_efficiency: Fraction
    """Achieved fraction of HBM bandwidth for streaming (copy/triad) kernels."""
    fp8_fast_accum_speedup: real_field(MAX_RATIO) = 1.0
    """Rate of an fp8 GEMM with cuBLASLt fast accumulation (``CUBLASLT_MATMUL_DESC_FAST_ACCUM``)
    over the precise, split-accumulator rate the ``gemm`` fp8 entry describes. Training stacks run
    the forward GEMM fast and the two backward GEMMs precise: Transformer Engine (fprop without,
    dgrad and wgrad with the split accumulator), XLA (DEFAULT precision in the forward, HIGHEST in
    the gradients: openxla/xla PR #6599) and torchao float8 (fast accumulation in the forward only:
    pytorch/ao issue #2377, which reports 1.1-1.2x). Default 1: not measured, the fp8 entry applies
    to every pass. On Blackwell cuBLASLt has no such mode (Transformer Engine PR #2748 review), so a
    measurement there should give 1."""
    attention_clock_ratio: real_field(MAX_RATIO) = 1.0
    """SM clock of a training step over the SM clock at which the attention efficiencies were
    measured: the rate of the attention kernels in a step is their benchmarked rate times this.
    An attention kernel benchmarked alone stays below the power limit and runs near the boost
    clock, while in a step the GEMMs hold the GPU at its power limit and the clock the
    limit leaves is lower; the GEMM sweeps run at that limit themselves, so their efficiencies
    carry it. Default 1: not measured (the benchmarked rate applies in a step)."""
    stream_fractions: dict[Name, tuple[Fraction, Fraction]] = Field(
        default_factory=lambda: dict(EAGER_STREAM_FRACTIONS_H100), max_length=MAX_STREAM_CLASSES)
    """Fraction of the STREAM rate (HBM bandwidth x ``memory_efficiency``) that the kernels of a
    class of memory-bound operation reach, (forward, backward), against the bytes the model counts
    for them: eager PyTorch's ``norm``, ``rope`` and ``repeat_kv`` (``perfmodel.formulas.eager``).
    A class not listed runs at the full rate. Default: as measured on the H100
    (``EAGER_STREAM_FRACTIONS_H100``)."""
    kernel_overhead_s: Seconds
    """GPU time every kernel costs beyond its roofline time (ramp-up, prologue/epilogue, tail
    wave): the intercept of time against work in a GEMM sweep of back-to-back kernels."""
    launch_overhead_s: Seconds
    """Host-side cost of one kernel launch issued from C++ (CUDA graphs hide most)."""
    host_op_overhead_s: Seconds = 15e-6
    """Host cost of dispatching one eager framework operation, its launch included.
    Default: midpoint of 10-20 us per eager PyTorch op (REFERENCES.md 'Efficiency';
    shared/data/microbenchmarks.yaml pytorch_tiny_gemm_launch_overhead_dgxc_sample: 11-18 us)."""
    overlap_compute_slowdown: NonNegative = 0.189
    """How much longer compute takes while a collective runs beside it on the same GPU: the
    collective's kernels hold SMs (NCCL channels, DeepEP/HybridEP blocks) and HBM bandwidth the
    compute then lacks, so hidden traffic still costs slowdown / (1 + slowdown) of its duration
    (``perfmodel.formulas.overlap``). Default: Lee et al. 2025, 'Characterizing Compute-Communication
    Overlap in GPU-Accelerated Distributed Deep Learning' (arXiv 2507.03114, abstract): compute
    overlapped with communication runs 18.9% slower on average (40.0% at most) than alone, over
    GPT and Llama training on four A100, H100, MI250 or MI210 GPUs."""
    scale_up_bus_efficiency: Fraction
    """Achieved busbw / link bandwidth per direction on the scale-up fabric, large messages."""
    scale_out_bus_efficiency: Fraction
    """Achieved busbw / NIC bandwidth per direction on the scale-out fabric, large messages."""
    scale_up_latency_s: Seconds
    """Per-step latency (alpha) of a collective on the scale-up fabric."""
    scale_out_latency_s: Seconds
    """Per-step latency (alpha) of a collective across the scale-out fabric."""
    collectives: tuple[CollectiveFit, ...] = Field((), max_length=MAX_COLLECTIVE_FITS)
    """Optional measured fits that replace the link-derived model for the groups they measured
    (same op, group size and domains spanned, ``CollectiveFit.describes``)."""
    sources: dict[str, str] = Field(default_factory=dict)
    """Where each group of numbers comes from (key = field name)."""
