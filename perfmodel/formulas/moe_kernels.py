"""The flex dispatcher's dispatch and combine kernels at their measured algorithm bandwidth.

=============  ===========================================================================
T              tokens entering the MoE layer on one GPU (``compute.moe_tokens``)
E, e, k        experts, experts per EP rank (E / ep), experts per token (top-k)
p_touch        chance that a token routes to at least one expert of a given rank under
               uniform routing: 1 - C(E - e, k) / C(E, k)
R              tokens one rank receives: ep * T * p_touch (a token goes once to each rank
               holding one of its experts: DeepEP and HybridEP send it once per rank and
               fan it out to the local experts there)
B_d, B_c       the kernels' measured algorithm bandwidth of dispatch and combine, bytes
               received (dispatch) or sent (combine) by one rank per second, as DeepEP's
               and HybridEP's benchmarks define it (tests/test_intranode.py: recv bytes / t)
t              R * h * b / B_d + R * h * 2 / B_c per direction (b: 2 bytes, or 1 + 4/128
               with FP8 dispatch)
=============  ===========================================================================

Inside one NVLink domain perfmodel otherwise prices the dispatch as an NCCL-style all-to-all at
the fabric's bus bandwidth. The flex backends' kernels reach less, and differently by backend,
group size and the SMs they are given (Megatron-Core ``--moe-flex-dispatcher-backend``,
``--moe-flex-dispatcher-num-sms``); where the GPU, backend and EP size were measured, the
measurement sets the time (``flex_layer_s``), interpolated in the SM count between the measured
ones and held at the nearest outside them. Elsewhere (other GPUs, EP groups across domains,
group sizes not measured) it returns None and the fabric model stands.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import comb

import numpy as np

from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.software import SoftwareStack

GIGA = 1e9
BF16_BYTES = 2


@dataclass(frozen=True)
class KernelPoint:
    """One measured configuration: EP ranks, SMs given to the kernels, and the algorithm
    bandwidth of dispatch (16-bit and FP8 tokens) and combine, bytes per second per rank."""

    ranks: int
    num_sms: int
    dispatch_bytes_per_s: float
    dispatch_fp8_bytes_per_s: float
    combine_bytes_per_s: float


def _points(rows) -> tuple[KernelPoint, ...]:
    return tuple(KernelPoint(r, s, d * GIGA, f * GIGA, c * GIGA) for r, s, d, f, c in rows)


HYBRIDEP_DOC = ("NVIDIA Hybrid-EP in DeepEP, Hybrid-EP_Intra-node_Implementation.md (hybrid-ep branch, "
                "as in shifangx/DeepEP commit 1242eb4), 'Performance Results': 4,096 tokens, hidden 7,168, "
                "top-8, random uniform router, 8 local experts; algorithm bandwidth through the Torch API")
FLEX_KERNELS: dict[tuple[str, str], tuple[KernelPoint, ...]] = {
    # (ranks, SMs, dispatch bf16 GB/s, dispatch fp8 GB/s, combine GB/s), Torch API columns of HYBRIDEP_DOC.
    ("hybridep", "gb200-nvl72"): _points([
        (8, 16, 550.10, 421.67, 538.44), (8, 32, 545.71, 455.35, 568.94),
        (16, 16, 472.84, 397.33, 474.48), (16, 32, 523.48, 444.67, 521.55),
        (24, 16, 441.89, 281.73, 444.40), (24, 32, 507.32, 403.20, 483.76),
        (32, 16, 485.50, 236.33, 423.19), (32, 32, 484.22, 392.70, 464.54),
        (36, 16, 469.96, 215.36, 418.27), (36, 32, 479.02, 361.13, 447.89)]),
    ("hybridep", "b200"): _points([(8, 16, 535.94, 409.71, 530.86)]),
    # DeepEP through the same benchmark (HYBRIDEP_DOC, 'DeepEP Performance Results' and the B200
    # comparison table); EP32 on GB200 from the Megatron-LM GB200 guide (docs/discussions/
    # deepseek-v3-gb200-optimization, commit eb0783b6d3, sec. 2.2.1: 'the dispatch can only reach
    # about 400 GB/s and the combine can only reach about 190 GB/s algorithm bandwidth with 24
    # SMs'; it gives no FP8 figure, so FP8 dispatch takes the 16-bit rate there).
    ("deepep", "gb200-nvl72"): _points([
        (8, 16, 362.01, 248.86, 310.21), (8, 24, 512.72, 350.97, 425.95), (8, 32, 615.78, 447.76, 519.57),
        (16, 16, 328.80, 242.51, 278.34), (16, 24, 442.47, 338.87, 378.32), (16, 32, 520.76, 393.72, 442.51),
        (24, 16, 324.64, 258.33, 126.53), (24, 24, 450.22, 351.05, 163.62), (24, 32, 502.84, 405.04, 207.10),
        (32, 24, 400.0, 400.0, 190.0)]),
    ("deepep", "b200"): _points([
        (8, 16, 348, 246, 302), (8, 24, 494, 349, 420), (8, 28, 560, 397, 477), (8, 32, 619, 443, 524),
        (8, 36, 635, 482, 549), (8, 40, 629, 519, 570), (8, 44, 640, 544, 577), (8, 48, 646, 554, 586)]),
}
"""Measured flex-dispatcher kernels by (backend, GPU spec id)."""


def touch_probability(num_experts: int, experts_per_rank: int, top_k: int) -> float:
    """p_touch = 1 - C(E - e, k) / C(E, k): a uniformly routed token reaches a given rank."""
    E, e, k = num_experts, experts_per_rank, top_k
    return 1.0 - comb(E - e, k) / comb(E, k)


def bandwidths(backend: str, gpu_id: str, ranks: int, num_sms: int) -> tuple[float, float, float] | None:
    """(dispatch, FP8 dispatch, combine) bytes/s of ``backend`` on ``gpu_id`` at ``ranks`` EP
    ranks and ``num_sms`` SMs: linear in the SM count between the measured points of that group
    size, the nearest point outside them; None where that group size was not measured."""
    pts = sorted((p for p in FLEX_KERNELS.get((backend, gpu_id), ()) if p.ranks == ranks), key=lambda p: p.num_sms)
    if not pts:
        return None
    sms = [p.num_sms for p in pts]
    return tuple(float(np.interp(num_sms, sms, [getattr(p, f) for p in pts]))
                 for f in ("dispatch_bytes_per_s", "dispatch_fp8_bytes_per_s", "combine_bytes_per_s"))


def flex_layer_s(model: ModelSpec, tokens, ep, etp, load: float, hw: HardwareSpec, sw: SoftwareStack,
                 fp8_bytes_per_element: float):
    """(seconds, measured): dispatch + combine of one MoE layer in one direction at the measured
    kernels' bandwidth (module table), per layout; ``measured`` is False where
    ``sw.moe_flex_backend`` on this GPU at that EP size, inside one NVLink domain and without
    expert tensor parallelism, was not benchmarked (its seconds are then 0, for the caller to
    replace). ``tokens``: T per GPU; ``load``: the busiest rank's routed tokens over the mean
    (``workload.routed_load``)."""
    tokens, ep, etp = (np.asarray(x) for x in (tokens, ep, etp))
    moe = model.moe
    seconds = np.zeros(ep.shape, dtype=float)
    measured = np.zeros(ep.shape, dtype=bool)
    for n in np.unique(ep):
        n = int(n)
        bw = (bandwidths(sw.moe_flex_backend, hw.reference_id, n, sw.moe_flex_num_sms)
              if 1 < n <= hw.scale_up.domain_size else None)
        if bw is None:
            continue
        dispatch_bw, dispatch_fp8_bw, combine_bw = bw
        at = (ep == n) & (etp == 1)
        received = n * tokens[at].astype(float) * touch_probability(moe.num_experts, moe.num_experts // n,
                                                                     moe.top_k) * load
        row_bytes = received * model.hidden_size
        dispatch = (row_bytes * fp8_bytes_per_element / dispatch_fp8_bw if sw.moe_dispatch_fp8
                    else row_bytes * BF16_BYTES / dispatch_bw)
        seconds[at] = dispatch + row_bytes * BF16_BYTES / combine_bw
        measured[at] = True
    return seconds, measured
