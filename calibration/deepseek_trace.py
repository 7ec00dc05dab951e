"""Figures of DeepSeek's published DualPipe training trace, by kernel class.

deepseek-ai/profile-data ``train.json`` (PyTorch profiler, H800, EP64, TP1, 4K sequence, one
DualPipe forward chunk paired with one backward chunk of 4 MoE layers each, balanced routing) is
not copied into this project (its repository carries no licence). This script reads a local copy
and prints the figures ``calibration/data/deepseek_v3_train_trace.yaml`` records:

    python -m calibration.deepseek_trace path/to/train.json

Classification of GPU kernels (``cat`` kernel, memcpy, memset), by name, first rule that matches:
``dpsk::ep::`` -> ep_comm (DeepEP; its notify_dispatch / cached_notify kernels -> ep_sync, the
dispatch / combine kernels -> ep_data); ``gemm`` (any case) -> gemm; ``flash::`` -> attention;
everything else -> other. Streams are the trace's ``tid``s.

The DeepEP kernels are also listed by kind (``ep_kernels``: count, total and range of durations):
DeepEP's internode ``dispatch<kLowLatencyMode, kNumRDMARanks, kCachedMode, ...>`` template marks the
forward dispatch (``cached`` false: it computes its own layout) and the backward one (``cached``
true: it reuses the forward's handle); ``combine`` runs in both passes. Their byte counts per token
differ only by element size (FP8 dispatch with a scale per 128 elements, BF16 combine), so their
durations show whether the kernels move data at one rate (docs/moe.md).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict

EP_SYNC = ("notify_dispatch", "cached_notify")
EP_KINDS = (("dispatch<false, 8, true", "dispatch (cached, backward)"),
            ("dispatch<false, 8, false", "dispatch (forward)"),
            ("combine<", "combine"), ("get_dispatch_layout", "layout"),
            ("notify_dispatch", "notify_dispatch"), ("cached_notify", "cached_notify"))


def ep_kind(name: str) -> str | None:
    """The DeepEP kernel kind of a kernel name (first match of ``EP_KINDS``), None if not DeepEP."""
    if "dpsk::ep::" not in name:
        return None
    return next((kind for key, kind in EP_KINDS if key in name), "other")


def kernel_class(name: str) -> str:
    if "dpsk::ep::" in name:
        return "ep_sync" if any(s in name for s in EP_SYNC) else "ep_data"
    if "gemm" in name.lower():
        return "gemm"
    if "flash::" in name:
        return "attention"
    return "other"


def figures(path: str) -> dict:
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    t0 = min(e["ts"] for e in kernels)
    t1 = max(e["ts"] + e["dur"] for e in kernels)
    busy: dict = defaultdict(float)
    ep: dict = defaultdict(list)
    for e in kernels:
        busy[(e["tid"], kernel_class(e["name"]))] += e["dur"]
        kind = ep_kind(e["name"])
        if kind is not None:
            ep[kind].append(e["dur"] / 1e3)
    return {"span_ms": (t1 - t0) / 1e3,
            "busy_ms": {f"stream {tid} {cls}": round(us / 1e3, 2) for (tid, cls), us in sorted(busy.items())},
            "ep_kernels": {kind: {"count": len(d), "total_ms": round(sum(d), 2),
                                  "range_ms": [round(min(d), 2), round(max(d), 2)]} for kind, d in sorted(ep.items())}}


if __name__ == "__main__":
    print(json.dumps(figures(sys.argv[1]), indent=1))
