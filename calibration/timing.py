"""What the microbenchmark backends share: the plan of a run, timing on the host, and the
record of a measurement (``bench`` runs the suite with numpy or torch; ``bench_torch`` is the
torch backend)."""

from __future__ import annotations

import platform
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from .results import Record

MAX_INNER = 10_000
"""Upper bound on back-to-back calls in one timed repeat."""


@dataclass(frozen=True)
class Plan:
    """What the suite measures; ``plan_for`` gives the defaults per device class."""

    gemm_squares: tuple[int, ...]
    gemm_models: tuple[str, ...]
    gemm_tokens: tuple[int, ...]
    """Tokens per micro-batch (GEMM m) for the workload shapes."""
    gemm_tps: tuple[int, ...]
    """Tensor-parallel degrees whose sharded shapes are measured."""
    gemm_max_flop: float
    """Shapes above this work are skipped (keeps CPU runs short)."""
    grouped_models: tuple[str, ...]
    grouped_tokens: tuple[int, ...]
    """Tokens per expert (m of each expert GEMM)."""
    attention_seqs: tuple[int, ...]
    attention_tokens: int
    attention_heads: int
    attention_head_dim: int
    stream_array_bytes: tuple[int, ...]
    h2d_bytes: tuple[int, ...]
    collective_max_bytes: int
    repeats: int
    warmup: int
    target_sample_s: float


def timed_record(measured, **fields) -> Record:
    times, timing = measured
    t = np.asarray(times, dtype=float)
    p10, median, p90 = np.percentile(t, [10, 50, 90])
    return Record(timing=timing, times_s=tuple(float(x) for x in t), median_s=float(median),
                  p10_s=float(p10), p90_s=float(p90), **fields)


# --------------------------------------------------------------------------------- shapes
def host_time_calls(fn, inner: int, repeats: int, sync=None) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        if sync is not None:
            sync()
        out.append((time.perf_counter() - t0) / inner)
    return out


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def today() -> str:
    return datetime.now(timezone.utc).date().isoformat()


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "device"
