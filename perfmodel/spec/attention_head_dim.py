"""How the fused attention kernel's rate depends on the head dimension: published rates by head dim.

======================  ====================================================================
d                       head dim of the attention op: (d_qk + d_v) / 2 (``effective_head_dim``)
d_ref                   head dim of the benchmarks an attention curve was fitted to
                        (``AttentionEfficiency.measured_head_dim``)
R_k,g(d)                published rate (TFLOP/s) of kernel k on GPU generation g at head dim d,
                        piecewise-linear in d between the published head dims, clamped outside
f(d)                    R_k,g(d) / R_k,g(d_ref): the head-dim factor on the curve's efficiency
======================  ====================================================================

A kernel's tile loop does about d multiply-adds per score for each (query, key) pair, and the
softmax work per score does not grow with d, so at small head dims the exponentials and the
rescaling take a larger share of each tile and the tensor cores idle more; at large head dims
the tiles that fit in shared memory and registers are smaller (FlashAttention-2, Dao 2023,
sec. 3.3 and fig. 4-6; FlashAttention-3, Shah et al. 2024, sec. 4.1 and fig. 5-6). The rates
below are the published ones; the step model keeps its curve in the sequence length and scales it
by f(d) (``perfmodel.formulas.compute.attention_efficiency``).

Every rate is one column of a published bar chart, chosen before any validation residual was seen:
the 4k-token column (the column of the FA3 paper that ``FA3_OVER_CUDNN`` already used), with the
causal mask where the figure has it (the step model times causal attention). FLOP counts follow the
papers' convention, 4 s^2 d heads (halved under the causal mask), the convention of
``perfmodel.formulas.counts``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

Generation = Literal["ampere", "hopper"]
"""GPU generations with published attention rates at more than one head dim."""
AttentionKernel = Literal["flash", "cudnn", "fa3"]
"""The kernel whose curve an attention op runs at (``perfmodel.formulas.compute.attention_efficiency``)."""


@dataclass(frozen=True)
class HeadDimRates:
    """Published rates of one kernel on one GPU generation, by head dim (TFLOP/s, 16-bit)."""

    forward: tuple[tuple[int, float], ...]
    """(head dim, TFLOP/s) of the forward kernel, in increasing head dim."""
    backward: tuple[tuple[int, float], ...]
    """(head dim, TFLOP/s) of the backward kernel, in increasing head dim."""
    source: str

    def rate(self, backward: bool, head_dim):
        """R(d): piecewise-linear between the published head dims, clamped outside them."""
        points = self.backward if backward else self.forward
        return np.interp(np.asarray(head_dim, dtype=float), [d for d, _ in points], [r for _, r in points])


FA2_A100 = HeadDimRates(
    forward=((64, 156.0), (128, 173.0)), backward=((64, 156.0), (128, 173.0)),
    source="FlashAttention-2 paper (Dao 2023, arXiv 2307.08691) fig. 4 (c, d), the flash-attention README's "
           "A100 chart (assets/flash2_a100_fwd_bwd_benchmark.png): A100 80GB SXM4, forward + backward with the "
           "causal mask at 4k tokens, head dim 64: 156, 128: 173 TFLOP/s. The paper's separate forward and "
           "backward figures (5, 6) were not at hand, so both passes take the combined ratio")
"""FlashAttention-2 on Ampere."""
FA2_H100 = HeadDimRates(
    forward=((64, 284.0), (128, 319.0), (256, 293.0)), backward=((64, 279.0), (128, 310.0)),
    source="FlashAttention-3 paper (Shah et al. 2024, arXiv 2407.08608), H100 80GB SXM5, BF16, 4k tokens, "
           "FlashAttention-2 bars: forward with the causal mask fig. 5 (b, d, f), head dim 64: 284, 128: 319, "
           "256: 293 TFLOP/s; backward fig. 6 (without the causal mask, its only backward), 64: 279, 128: 310 "
           "(no FA2 backward at 256 in the figure: clamped at the 128 rate). The FlashAttention-2 paper's "
           "H100 forward + backward chart (fig. 7 c, d) agrees: causal 4k, 257 against 294 (0.87)")
"""FlashAttention-2 on Hopper."""
CUDNN_H100 = HeadDimRates(
    forward=((64, 363.0), (128, 518.0), (256, 483.0)), backward=((64, 417.0), (128, 499.0)),
    source="FlashAttention-3 paper (Shah et al. 2024, arXiv 2407.08608), H100 80GB SXM5, BF16, 4k tokens, "
           "cuDNN bars: forward with the causal mask fig. 5 (b, d, f), head dim 64: 363, 128: 518, 256: 483 "
           "TFLOP/s; backward fig. 6 (without the causal mask), 64: 417, 128: 499 (none at 256: clamped)")
"""cuDNN's fused attention on Hopper."""
FA3_H100 = HeadDimRates(
    forward=((64, 420.0), (128, 579.0), (256, 612.0)), backward=((64, 453.0), (128, 542.0)),
    source="FlashAttention-3 paper (Shah et al. 2024, arXiv 2407.08608), H100 80GB SXM5, BF16, 4k tokens, "
           "FlashAttention-3 bars: forward with the causal mask fig. 5 (b, d, f), head dim 64: 420, 128: 579, "
           "256: 612 TFLOP/s; backward fig. 6 (without the causal mask), 64: 453, 128: 542 (none at 256: "
           "clamped)")
"""FlashAttention-3 on Hopper."""

HEAD_DIM_RATES: dict[tuple[AttentionKernel, Generation], HeadDimRates] = {
    ("flash", "ampere"): FA2_A100,
    ("flash", "hopper"): FA2_H100,
    ("cudnn", "hopper"): CUDNN_H100,
    ("fa3", "hopper"): FA3_H100,
}
"""(kernel, generation the curve was measured on) -> its published rates by head dim. A pair not
listed has no published head-dim dependence: its factor is 1."""


def effective_head_dim(d_qk, d_v):
    """The head dim an op with query/key dim ``d_qk`` and value dim ``d_v`` runs at: their mean, the
    mean reduction depth of the kernel's two matmuls weighted by their FLOPs (S = Q K^T reduces over
    d_qk, O = P V produces d_v per score; FLOPs 2 (d_qk + d_v) per score). MLA's 192/128 -> 160."""
    return (d_qk + d_v) / 2


def head_dim_factor(kernel: AttentionKernel, generation: Generation | None, backward: bool,
                    head_dim, measured_head_dim: int | None):
    """f(d) = R(d) / R(d_ref) for a curve measured at ``measured_head_dim`` on ``generation``; 1 where
    the curve's head dim or generation is not stated or the pair has no published rates."""
    if isinstance(head_dim, np.ndarray):
        return _head_dim_factor(kernel, generation, backward, head_dim, measured_head_dim)
    return _head_dim_factor_of(kernel, generation, backward, head_dim, measured_head_dim)


def _head_dim_factor(kernel: AttentionKernel, generation: Generation | None, backward: bool, head_dim,
                     measured_head_dim: int | None):
    rates = HEAD_DIM_RATES.get((kernel, generation)) if generation is not None else None
    if rates is None or measured_head_dim is None:
        return 1.0
    return rates.rate(backward, head_dim) / rates.rate(backward, measured_head_dim)


@lru_cache(maxsize=256)
def _head_dim_factor_of(kernel: AttentionKernel, generation: Generation | None, backward: bool, head_dim,
                        measured_head_dim: int | None) -> float:
    """``_head_dim_factor`` of a head dim that is a number, as a Python float (the same number),
    worked out once: a model's attention asks for the same few in every predict (two np.interp each)."""
    return float(_head_dim_factor(kernel, generation, backward, head_dim, measured_head_dim))
