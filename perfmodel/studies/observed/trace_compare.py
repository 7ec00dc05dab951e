"""A measured profiler trace against the predicted step, kernel class by kernel class
(``perfmodel diagnose SCENARIO --trace profile.json``).

Each GPU kernel of the trace is classed by its name (first match wins, ``KERNEL_CLASSES``):

=============  =====================================================================================
class          kernel names (as cuBLAS, cuDNN, CUTLASS, FlashAttention, NCCL and PyTorch name them)
=============  =====================================================================================
communication  NCCL/RCCL kernels (``nccl``), DeepEP's dispatch and combine (``ep::internode``,
               ``ep::intranode``), PyTorch's symmetric-memory and cross-device copies; memcpy events
attention      FlashAttention (``flash``), cuDNN and CUTLASS fused attention (``fmha``, ``sdpa``,
               ``attn``, ``attention``)
gemm           cuBLAS/cuBLASLt (``gemm``, ``nvjet``, ``xmma``, ``Kernel2``), CUTLASS (``cutlass``),
               grouped GEMMs, Triton matmuls (``matmul``, ``mm_``)
elementwise    every other kernel: elementwise, norms, reductions, casts, copies, memset
=============  =====================================================================================

Per step (the trace's window, the first kernel's start to the last kernel's end, over its
``ProfilerStep#`` count, or one step where it marks none): gemm, attention and elementwise are the
summed kernel time of their class; communication is the time a communication kernel runs while no
compute kernel does (the exposed part, as the model counts it; the total is kept beside it); idle
is the window with no kernel at all. Predicted: ``perfmodel.studies.views.trace_classes``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from perfmodel.engine.rules import Resolved
from perfmodel.spec.observed.profiler_trace import ProfilerTrace
from perfmodel.studies.views.trace_classes import CLASSES, predicted_classes

KERNEL_CLASSES = (
    ("communication", re.compile(r"nccl|rccl|ep::internode|ep::intranode|deep_ep|cross_device|symm_mem|"
                                 r"all_?reduce|all_?gather|reduce_?scatter|alltoall", re.IGNORECASE)),
    ("attention", re.compile(r"flash|fmha|sdpa|attn|attention", re.IGNORECASE)),
    ("gemm", re.compile(r"gemm|nvjet|xmma|cutlass|Kernel2\b|matmul|\bmm_|wgmma|cublas", re.IGNORECASE)),
)


def kernel_class(name: str, category: str = "kernel") -> str:
    if category == "gpu_memcpy":
        return "communication"
    if category == "gpu_memset":
        return "elementwise"
    return next((cls for cls, pattern in KERNEL_CLASSES if pattern.search(name)), "elementwise")


def _union(intervals) -> list[tuple[float, float]]:
    out: list = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _length(intervals) -> float:
    return sum(b - a for a, b in intervals)


def _minus(a, b) -> float:
    """Length of the union ``a`` outside the union ``b`` (both sorted, disjoint)."""
    total, j = 0.0, 0
    for s, e in a:
        covered = 0.0
        while j < len(b) and b[j][1] <= s:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            covered += min(e, b[k][1]) - max(s, b[k][0])
            k += 1
        total += (e - s) - covered
    return total


def measured_classes(trace: ProfilerTrace) -> dict:
    """{class: measured seconds per step}, ``communication_total``, ``step`` and ``steps``."""
    steps = max(trace.num_steps, 1)
    start = min(k.start_s for k in trace.kernels)
    end = max(k.start_s + k.dur_s for k in trace.kernels)
    by_class: dict = {c: [] for c in CLASSES}
    for k in trace.kernels:
        by_class[kernel_class(k.name, k.category)].append((k.start_s, k.start_s + k.dur_s))
    compute = _union(by_class["gemm"] + by_class["attention"] + by_class["elementwise"])
    comm = _union(by_class["communication"])
    out = {c: sum(b - a for a, b in by_class[c]) / steps for c in ("gemm", "attention", "elementwise")}
    out["communication"] = _minus(comm, compute) / steps
    out["communication_total"] = _length(comm) / steps
    out["idle"] = ((end - start) - _length(_union(compute + comm))) / steps
    out["step"] = (end - start) / steps
    out["steps"] = steps
    return out


@dataclass(frozen=True)
class ClassRow:
    kernel_class: str
    measured_s: float
    predicted_s: float

    @property
    def ratio(self) -> float | None:
        return self.measured_s / self.predicted_s if self.predicted_s > 0 else None

    def to_dict(self) -> dict:
        return {"class": self.kernel_class, "measured_s": self.measured_s, "predicted_s": self.predicted_s,
                "measured_over_predicted": self.ratio}


@dataclass(frozen=True)
class TraceComparison:
    rows: tuple[ClassRow, ...]
    """Per class and the whole step (``step``), seconds per step."""
    steps: int
    device: int
    device_name: str
    communication_total_s: float
    """Measured communication kernel time per step, hidden and exposed."""
    kernels: int

    def to_dict(self) -> dict:
        return {"rows": [r.to_dict() for r in self.rows], "steps": self.steps, "device": self.device,
                "device_name": self.device_name, "communication_total_s": self.communication_total_s,
                "kernels": self.kernels}


def compare_trace(trace: ProfilerTrace, r: Resolved) -> TraceComparison:
    m, p = measured_classes(trace), predicted_classes(r)
    rows = tuple(ClassRow(c, m[c], p[c]) for c in (*CLASSES, "step"))
    return TraceComparison(rows, m["steps"], trace.device, trace.device_name, m["communication_total"],
                           len(trace.kernels))
