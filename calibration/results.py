"""Result files of the microbenchmark suite: what was measured, on what, and how long it took.

A file (YAML, or JSON when its name ends in ``.json``) holds one ``metadata`` block and a list
of ``records``. One record is one measured point:

==============  =========================================================================
kind            gemm | attention | hbm | elementwise | launch | h2d | collective
op              what ran: ``matmul``, ``scaled_mm``, ``sdpa_fwd``, ``copy``, ``triad``,
                ``all_reduce`` ...
precision       bf16 | fp16 | fp8 | fp32 | tf32 | fp64 (compute kinds and collectives)
shape           gemm (m, n, k), per problem for a grouped GEMM of ``groups`` problems;
                attention (batch, heads, seq, head_dim), or only ``seq_len`` for a
                published attention rate
size_bytes      collective: the nccl-tests message size S; hbm, elementwise: bytes read
                plus written by one call (the STREAM convention); h2d: bytes transferred
flop            work of one call (gemm 2mnk, times ``groups``; attention in
                ``perfmodel.formulas.compute``'s convention)
times_s         every timed repeat, seconds per call
timing          cuda-graph | cuda-events | host (suite runs only)
median_s        median of ``times_s`` (or the single published/reported time)
p10_s, p90_s    spread of the repeats
rate_per_s      a published rate, only where time or work is unknown (FLOP/s or bytes/s)
==============  =========================================================================

The ``derived`` block that is written with each record (FLOP/s, bytes/s, algbw, busbw) is
recomputed from ``median_s`` on every load; it is there for readers of the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StrictBool, computed_field, model_validator

from perfmodel.formulas import comm
from perfmodel.spec.errors import read_data_file, validated, write_text_file
from perfmodel.spec.limits import (
    MAX_KERNEL_DIM,
    MAX_KERNEL_FLOP,
    MAX_MEASURED_RATE_PER_S,
    MAX_MESSAGE_BYTES,
    MAX_NUM_EXPERTS,
    MAX_NUM_GPUS,
    MAX_RECORDS,
    MAX_SECONDS,
    MAX_SEQ_LENGTH,
    Name,
    int_field,
    real_field,
)

RESULTS_FORMAT = "perfmodel-calibration-results/1"

Kind = Literal["gemm", "attention", "hbm", "elementwise", "launch", "h2d", "collective"]
COLLECTIVE_OPS = tuple(c.value for c in comm.Collective)
MEMORY_KINDS = ("hbm", "elementwise", "h2d")
SHAPE_LENGTH = {"gemm": 3, "attention": 4}
FAST_ACCUM_IMPL = "torch._scaled_mm fast_accum"
"""``impl`` of fp8 GEMM records timed with cuBLASLt fast accumulation (``use_fast_accum=True``);
the plain ``torch._scaled_mm`` records accumulate precisely."""


def bus_factor(op: str, num_gpus: int) -> float:
    """busbw / algbw for a collective named ``op`` (``perfmodel.formulas.comm.bus_factor``)."""
    return float(comm.bus_factor(comm.Collective(op), num_gpus))


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


Seconds = real_field(MAX_SECONDS)
"""A measured time: finite, positive (``perfmodel.spec.limits.MAX_SECONDS``)."""


class Metadata(_Frozen):
    """Where the numbers come from. No host names are recorded."""

    device: str
    """GPU (or CPU) model name, as the driver reports it."""
    backend: str
    """numpy | torch-cpu | torch-cuda | nccl-tests | published"""
    date: str
    """ISO date of the run (UTC)."""
    num_devices: int_field(MAX_NUM_GPUS) = 1
    driver_version: str | None = None
    cuda_version: str | None = None
    torch_version: str | None = None
    nccl_version: str | None = None
    numpy_version: str | None = None
    hardware_id: str | None = None
    """Project hardware id, when known (``h100-sxm``)."""
    source: str | None = None
    """Citation or file name for parsed (not measured) results."""
    notes: str = ""


class Record(_Frozen):
    """One measured point (see the module table)."""

    kind: Kind
    op: Name
    precision: Name | None = None
    shape: Annotated[tuple[int_field(MAX_KERNEL_DIM), ...], Field(max_length=4)] | None = None
    size_bytes: int_field(MAX_MESSAGE_BYTES) | None = None
    flop: real_field(MAX_KERNEL_FLOP) | None = None
    groups: int_field(MAX_NUM_EXPERTS) | None = None
    """Grouped GEMMs (MoE experts): the number of (m, n, k) problems one call computes."""
    num_gpus: int_field(MAX_NUM_GPUS) = 1
    fabric: Name | None = None
    """Collectives: scale_up (one NVLink domain) or scale_out (across nodes)."""
    num_hosts: int_field(MAX_NUM_GPUS) | None = None
    """Collectives: the hosts the ranks ran on, where the log names them (nccl-tests '# Rank'
    lines). On systems whose host is the whole scale-up domain (HGX) it is the number of
    domains the group spanned."""
    in_place: StrictBool | None = None
    causal: StrictBool | None = None
    seq_len: int_field(MAX_SEQ_LENGTH) | None = None
    """Attention without a full shape (published rates): the sequence length s."""
    impl: Name | None = None
    """Kernel or library: cublas, flash, numpy, nccl-tests ..."""
    timing: Literal["cuda-graph", "cuda-events", "host"] | None = None
    """How the suite timed it: CUDA-graph replays (GPU time alone), CUDA events around eager
    calls (host dispatch included when it is the slower side), or the host clock."""
    times_s: Annotated[tuple[Seconds, ...], Field(max_length=MAX_RECORDS)] = ()
    median_s: Seconds | None = None
    p10_s: Seconds | None = None
    p90_s: Seconds | None = None
    rate_per_s: real_field(MAX_MEASURED_RATE_PER_S) | None = None
    source: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _drop_derived(cls, data):
        if isinstance(data, dict) and "derived" in data:
            data = {k: v for k, v in data.items() if k != "derived"}
        return data

    @model_validator(mode="after")
    def _check(self) -> "Record":
        if self.median_s is None and self.rate_per_s is None:
            raise ValueError("give median_s (a time) or rate_per_s (a published rate)")
        if any(t <= 0 for t in self.times_s):
            raise ValueError("times_s must all be positive")
        if self.times_s and not min(self.times_s) <= (self.median_s or 0) <= max(self.times_s):
            raise ValueError(f"median_s({self.median_s}) lies outside times_s "
                             f"[{min(self.times_s)}, {max(self.times_s)}]")
        want = SHAPE_LENGTH.get(self.kind)
        if want and self.shape is not None and len(self.shape) != want:
            raise ValueError(f"shape of a {self.kind} record has {want} entries, got {len(self.shape)}")
        if self.kind == "attention" and self.shape is None and self.seq_len is None:
            raise ValueError("an attention record needs shape or seq_len")
        if self.kind == "gemm" and self.precision is None:
            raise ValueError("a gemm record needs a precision")
        if self.kind == "collective":
            if self.op not in COLLECTIVE_OPS:
                raise ValueError(f"collective op {self.op!r} is not one of {COLLECTIVE_OPS}")
            if self.num_gpus < 2 or self.size_bytes is None or self.fabric is None:
                raise ValueError("a collective record needs num_gpus >= 2, size_bytes and fabric")
            if self.num_hosts is not None and self.num_hosts > self.num_gpus:
                raise ValueError(f"num_hosts({self.num_hosts}) exceeds num_gpus({self.num_gpus})")
        if self.kind in MEMORY_KINDS and self.median_s is not None and self.size_bytes is None:
            raise ValueError(f"a timed {self.kind} record needs size_bytes")
        if self.kind in ("gemm", "attention") and self.median_s is not None and self.flop is None:
            raise ValueError(f"a timed {self.kind} record needs flop")
        return self

    @computed_field
    @property
    def derived(self) -> dict[str, float]:
        """Throughputs from ``median_s`` (or the published rate), for readers of the file."""
        t, out = self.median_s, {}
        if self.kind in ("gemm", "attention"):
            rate = self.flop / t if t and self.flop else self.rate_per_s
            out["flop_per_s"] = rate
        elif self.kind in MEMORY_KINDS:
            out["bytes_per_s"] = self.size_bytes / t if t and self.size_bytes else self.rate_per_s
        elif self.kind == "collective" and t:
            algbw = self.size_bytes / t
            out["algbw_bytes_per_s"] = algbw
            out["busbw_bytes_per_s"] = algbw * bus_factor(self.op, self.num_gpus)
        return {k: v for k, v in out.items() if v is not None}

    @property
    def attention_seq(self) -> int | None:
        return self.shape[2] if self.kind == "attention" and self.shape else self.seq_len

    @property
    def throughput_per_s(self) -> float | None:
        """FLOP/s (compute kinds) or bytes/s (memory kinds); busbw for collectives."""
        d = self.derived
        return d.get("flop_per_s", d.get("bytes_per_s", d.get("busbw_bytes_per_s")))


class Results(_Frozen):
    format: Literal["perfmodel-calibration-results/1"] = RESULTS_FORMAT
    metadata: Metadata
    records: Annotated[tuple[Record, ...], Field(max_length=MAX_RECORDS)]


def parse_results(data, origin: str = "results") -> Results:
    """Validate a mapping into Results, or raise a one-line InputError naming the field."""
    return validated(Results, data, origin, "must be a mapping with 'metadata' and 'records'")


def read_mapping(path: Path):
    """YAML or JSON text of ``path`` as Python data; InputError (one line) if unreadable."""
    return read_data_file(path, str(path))


def load_results(path) -> Results:
    return parse_results(read_mapping(Path(path)), origin=f"results({Path(path).name})")


def write_results(results: Results, path, field: str = "--out") -> Path:
    """Write YAML (or JSON for a ``.json`` name), creating parent folders; a one-line InputError
    naming ``field`` where it cannot be written."""
    path = Path(path)
    data = results.model_dump(mode="json", exclude_none=True)
    if path.suffix == ".json":
        text = json.dumps(data, indent=1, allow_nan=False) + "\n"
    else:
        text = yaml.safe_dump(data, sort_keys=False, width=120)
    return write_text_file(path, text, field)
