"""A PyTorch profiler trace (``torch.profiler`` ``export_chrome_trace``, Kineto's JSON), read with
bounds: the GPU kernels of one device and the steps the trace marks.

What is read (Kineto's trace format, as PyTorch writes it): the object's ``traceEvents``; of them
complete events (``ph: "X"``) of category ``kernel``, ``gpu_memcpy`` and ``gpu_memset`` (``ts``,
``dur`` in microseconds, ``args.device``), and the ``ProfilerStep#N`` annotations that
``torch.profiler.profile.step()`` adds (category ``user_annotation`` or ``cpu_op``). Everything else
is ignored. The device kept is the one with the most kernel time (a trace is one rank's; a trace of
several GPUs is judged by its busiest).

A trace the user names is untrusted input: the file is read only up to ``MAX_TRACE_BYTES``, the
events counted before any is used (``MAX_TRACE_EVENTS``), and every field checked, with a one-line
error naming the trace and what is wrong.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from perfmodel.spec.errors import InputError, read_text_file

MAX_TRACE_BYTES = 32 * 2**20
"""A trace of a few steps of one rank is a few MB (DeepSeek's published training trace of two
chunks of 4 layers: 3.1 MB, 14,240 events); 32 MB bounds the parse (a few hundred MB of Python objects, about a second)."""
MAX_TRACE_EVENTS = 500_000
"""Events of one trace: the kernels of many steps of one rank fit ten times over."""
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
US = 1e-6


@dataclass(frozen=True)
class Kernel:
    name: str
    category: str
    start_s: float
    dur_s: float
    stream: int


@dataclass(frozen=True)
class ProfilerTrace:
    kernels: tuple[Kernel, ...]
    """The GPU events of the busiest device, by start time (seconds from its first event)."""
    device: int
    num_steps: int
    """``ProfilerStep#`` annotations in the trace (0 where it has none)."""
    device_name: str = ""


def _number(v, where: str) -> float:
    if type(v) not in (int, float) or not math.isfinite(v) or v < 0:
        raise InputError(where, f"must be a finite number >= 0, got {str(v)[:40]!r}")
    return float(v)


def parse_trace(data, origin: str) -> ProfilerTrace:
    events = data.get("traceEvents") if isinstance(data, dict) else data if isinstance(data, list) else None
    if not isinstance(events, list):
        raise InputError(origin, "not a PyTorch profiler trace: expected an object with a 'traceEvents' list")
    if len(events) > MAX_TRACE_EVENTS:
        raise InputError(origin, f"{len(events):,} events; at most {MAX_TRACE_EVENTS:,} (profile fewer steps)")
    by_device: dict = {}
    steps = set()
    for i, e in enumerate(events):
        if not isinstance(e, dict):
            continue
        name = e.get("name")
        if not isinstance(name, str):
            continue
        cat = e.get("cat")
        if name.startswith("ProfilerStep#") and cat in ("user_annotation", "cpu_op"):
            steps.add(name)
            continue
        if cat not in GPU_CATEGORIES or e.get("ph") != "X":
            continue
        where = f"{origin}.traceEvents[{i}]"
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        device = args.get("device", e.get("pid", 0))
        stream = args.get("stream", e.get("tid", 0))
        if type(device) is not int or type(stream) is not int:
            raise InputError(f"{where}.args", "device and stream must be integers")
        by_device.setdefault(device, []).append((name[:200], cat, _number(e.get("ts"), f"{where}.ts"),
                                                 _number(e.get("dur"), f"{where}.dur"), stream))
    if not by_device:
        raise InputError(origin, "no GPU kernels (events of category 'kernel'): profile with "
                                 "activities=[ProfilerActivity.CUDA]")
    device = max(sorted(by_device), key=lambda d: sum(k[3] for k in by_device[d] if k[1] == "kernel"))
    names = data.get("deviceProperties") if isinstance(data, dict) else None
    dev_name = next((str(p.get("name", ""))[:80] for p in names or () if isinstance(p, dict) and p.get("id") == device),
                    "")
    base_us = min(k[2] for k in by_device[device])     # times from the first event: seconds keep their digits
    kernels = tuple(sorted((Kernel(n, c, (ts - base_us) * US, dur * US, st) for n, c, ts, dur, st in by_device[device]),
                           key=lambda k: k.start_s))
    return ProfilerTrace(kernels, device, len(steps), dev_name)


def read_trace(path) -> ProfilerTrace:
    """The trace file a user names (bounded read, then parse)."""
    p = Path(path)
    origin = f"trace({p.name})"
    text = read_text_file(p, origin, MAX_TRACE_BYTES)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(origin, f"not JSON ({type(exc).__name__})") from None
    return parse_trace(data, origin)
