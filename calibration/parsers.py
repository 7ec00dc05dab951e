"""Turn other people's measurements into result records.

* nccl-tests stdout (``all_reduce_perf``, ``all_gather_perf``, ``reduce_scatter_perf``,
  ``alltoall_perf``, ``sendrecv_perf``): one record per table row and placement
  (out-of-place, in-place). The collective comes from the ``# Collective test starting``
  line, else from the file name; the group size from the ``# Rank`` lines, else from
  busbw/algbw; the fabric is scale_out when the ranks sit on more than one host, and the
  number of hosts is kept (``num_hosts``), so a fit knows how the group spanned them.
* ``shared/data/microbenchmarks.yaml`` (format ``perfmodel-microbenchmarks/1``): the
  nccl_collective, gemm, hbm_bandwidth, attention_kernel, launch_overhead and host-device
  records of one hardware id. Published busbw becomes time through the nccl-tests
  definition t = factor * S / busbw; a GEMM's TFLOP/s becomes time through 2mnk.
* ``load_any``: any of these, or a suite result file, told apart by content.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from perfmodel.spec.errors import InputError, parse_data_text, pydantic_message, read_text_file
from perfmodel.spec.limits import MAX_LOG_FILE_BYTES, MAX_LOG_ROWS
from perfmodel.spec.units import GIGA, MICRO, TERA

from .results import RESULTS_FORMAT, Metadata, Record, Results, bus_factor, parse_results

MICROBENCHMARKS_FORMAT = "perfmodel-microbenchmarks/1"
NCCL_TEST_OPS = {
    "all_reduce": "all_reduce", "allreduce": "all_reduce", "all_gather": "all_gather",
    "allgather": "all_gather", "reduce_scatter": "reduce_scatter", "reducescatter": "reduce_scatter",
    "alltoall": "all_to_all", "all_to_all": "all_to_all", "sendrecv": "send_recv", "send_recv": "send_recv",
}
NCCL_TYPES = {"float": "fp32", "half": "fp16", "bfloat16": "bf16", "double": "fp64", "int8": "int8",
              "uint8": "uint8", "int32": "int32", "int": "int32", "f8e4m3": "fp8", "f8e5m2": "fp8"}
TRUST_ORDER = ("low", "medium", "high")
SCALE_OUT_WORDS = ("infiniband", " ib ", "ib only", "roce", "partition", "multi-node", "across nodes", "ethernet")
SCALE_UP_WORDS = ("nvlink", "nvswitch", "mnnvl", "xgmi", "infinity fabric")

_RANK_LINE = re.compile(r"^#\s*Rank\s+\d+\s+.*?\bon\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.+)$")
MAX_RANK_LINE_CHARS = 1000
"""A '# Rank' line names a rank, a host, a device and its PCI id: a few dozen characters. Longer
lines are not matched, so no pattern runs over a megabyte-long line."""
_TEST_LINE = re.compile(r"#\s*Collective test starting:\s*(\S+)")
_LIB_CODE = re.compile(r"nccl-library=(\d+)")
_NCCL_VERSION = re.compile(r"NCCL version\s+([0-9][0-9.]*[0-9])")


# ------------------------------------------------------------------------------ nccl-tests
def looks_like_nccl_tests(text: str) -> bool:
    return any(_is_header(line) for line in text.splitlines())


def _is_header(line: str) -> bool:
    words = line.lstrip("#").split()
    return line.startswith("#") and words[:1] == ["size"] and "busbw" in words and "time" in words


def _op_from(text: str, origin: str, op: str | None) -> str:
    if op:
        names = [op]
    else:
        m = _TEST_LINE.search(text)
        names = [m.group(1)] if m else []
        names.append(Path(origin).name)
    for name in names:
        key = re.sub(r"_perf.*$|\.[a-z]+$", "", name.lower())
        for prefix, canonical in NCCL_TEST_OPS.items():
            if prefix in key:
                return canonical
    raise InputError(origin, "cannot tell which collective this nccl-tests log measured; keep its "
                     "'# Collective test starting' line or name the file like all_reduce_perf.txt")


def _nccl_version(text: str) -> str | None:
    m = _NCCL_VERSION.search(text)
    if m:
        return m.group(1)
    m = _LIB_CODE.search(text)
    if m:   # NCCL_VERSION_CODE = major * 10000 + minor * 100 + patch (nccl.h, since 2.9)
        code = int(m.group(1))
        return f"{code // 10000}.{code // 100 % 100}.{code % 100}"
    return None


def _group_size_from_bw(op: str, algbw: float, busbw: float) -> int | None:
    """Invert busbw = factor(n) * algbw for n (nccl-tests PERFORMANCE.md)."""
    if algbw <= 0 or busbw <= 0:
        return None
    r = busbw / algbw
    n = 2.0 / (2.0 - r) if op == "all_reduce" else 1.0 / (1.0 - r) if r < 1 else None
    return round(n) if n and n > 1.5 else None


def parse_nccl_tests(text: str, origin: str = "nccl-tests", op: str | None = None,
                     fabric: str | None = None) -> Results:
    """Records of one nccl-tests run (all rows, out-of-place and in-place)."""
    lines = text.splitlines()
    header = next((line for line in lines if _is_header(line)), None)
    if header is None:
        raise InputError(origin, "no nccl-tests table header ('#  size  count  type ... busbw') found")
    op = _op_from(text, origin, op)
    columns = header.lstrip("#").split()
    time_cols = [i for i, c in enumerate(columns) if c == "time"]
    ranks = [m.groups() for m in (_RANK_LINE.match(line.rstrip()) for line in lines
                                   if len(line) <= MAX_RANK_LINE_CHARS) if m]
    rows = []
    for number, line in enumerate(lines, 1):
        words = line.split()
        if line.startswith("#") or len(words) != len(columns) or not words[0].isdigit():
            continue
        if len(rows) == MAX_LOG_ROWS:
            raise InputError(origin, f"more than {MAX_LOG_ROWS:,} data rows (perfmodel.spec.limits.MAX_LOG_ROWS)")
        try:
            row = {"size": int(words[0]), "type": words[columns.index("type")],
                   "groups": [(float(words[i]), float(words[i + 1]), float(words[i + 2])) for i in time_cols]}
        except ValueError:
            raise InputError(origin, f"line {number}: cannot read numbers from {line.strip()!r}") from None
        if not all(math.isfinite(x) for group in row["groups"] for x in group):
            raise InputError(origin, f"line {number}: a time or bandwidth is not a finite number: {line.strip()!r}")
        rows.append(row)
    if not rows:
        raise InputError(origin, "the nccl-tests table has no data rows")
    num_gpus = len(ranks) or next(
        (n for row in reversed(rows) for _, a, b in row["groups"] if (n := _group_size_from_bw(op, a, b))), None)
    if not num_gpus or num_gpus < 2:
        raise InputError(origin, "cannot tell the number of GPUs (no '# Rank' lines, no usable busbw/algbw)")
    hosts = len({host for host, _ in ranks}) or None
    fabric = fabric or ("scale_out" if (hosts or 1) > 1 else "scale_up")
    records = []
    try:
        for row in rows:
            for place, (time_us, _, _) in enumerate(row["groups"]):
                if time_us <= 0:
                    continue
                records.append(Record(kind="collective", op=op, precision=NCCL_TYPES.get(row["type"], row["type"]),
                                      size_bytes=row["size"], num_gpus=num_gpus, fabric=fabric,
                                      num_hosts=hosts, in_place=bool(place), median_s=time_us * MICRO,
                                      impl="nccl-tests",
                                      source=Path(origin).name))
        meta = Metadata(device=ranks[0][1] if ranks else "unknown", backend="nccl-tests", date="unknown",
                        num_devices=num_gpus, nccl_version=_nccl_version(text), source=Path(origin).name)
    except ValidationError as exc:
        raise InputError(origin, pydantic_message(exc)) from None
    return Results(metadata=meta, records=tuple(records))


# --------------------------------------------------------------------- microbenchmarks.yaml
@dataclass(frozen=True)
class Published:
    """Records of one hardware id, and why the other records of that id were left out."""

    results: Results
    skipped: tuple[str, ...]


def classify_fabric(text: str | None) -> str | None:
    t = f" {(text or '').lower()} "
    if any(w in t for w in SCALE_OUT_WORDS):
        return "scale_out"
    if any(w in t for w in SCALE_UP_WORDS):
        return "scale_up"
    return None


def _cite(entry: dict, name: str) -> str:
    src = entry.get("source") or {}
    return (f"{name}#{entry['id']} ({src.get('title', '?')}; {src.get('locator', '?')}; "
            f"trust {entry.get('trust', '?')})")


def _collective_records(entry, base) -> list[Record]:
    op, n = entry.get("op"), entry.get("num_gpus")
    fabric = classify_fabric(entry.get("fabric"))
    if fabric is None or not n or n < 2:
        raise ValueError(f"fabric {entry.get('fabric')!r} or num_gpus {n!r} not usable")
    in_place = bool((entry.get("params") or {}).get("inplace", False))
    out = []
    for p in entry.get("points") or []:
        S = p.get("size_bytes")
        if not S:
            continue
        variants = [(in_place, p.get("time_us"), p.get("busbw_GBps"))]
        if p.get("inplace_busbw_GBps"):
            variants.append((True, None, p["inplace_busbw_GBps"]))
        for place, time_us, busbw in variants:
            if time_us and time_us > 0:
                t = time_us * MICRO
            elif busbw and busbw > 0:
                t = bus_factor(op, n) * S / (busbw * GIGA)   # nccl-tests: busbw = factor * S / t
            else:
                continue
            out.append(Record(kind="collective", op=op, size_bytes=int(S), num_gpus=n, fabric=fabric,
                              in_place=place, median_s=t, impl=p.get("protocol"), **base))
    return out


def _gemm_records(entry, base) -> list[Record]:
    precision = entry["op"].removeprefix("gemm_")
    out = []
    for p in entry.get("points") or []:
        rate = p.get("tflops", p.get("tflops_fp8_tensor_noquant"))
        m, n, k = p.get("m"), p.get("n"), p.get("k")
        if not (rate and m and n and k):
            continue
        flop = 2.0 * m * n * k
        out.append(Record(kind="gemm", op="matmul", precision=precision, shape=(m, n, k), flop=flop,
                          median_s=flop / (rate * TERA), impl=(entry.get("params") or {}).get("library"), **base))
    return out


def _hbm_records(entry, base) -> list[Record]:
    return [Record(kind="hbm", op=p["stream_op"].lower(), rate_per_s=p["bandwidth_GBps"] * GIGA, **base)
            for p in entry.get("points") or [] if p.get("bandwidth_GBps")]


def _attention_records(entry, base) -> list[Record]:
    params = entry.get("params") or {}
    seq = params.get("seq_len")
    return [Record(kind="attention", op="sdpa_fwd", seq_len=seq, impl=p.get("impl"), precision="bf16",
                   rate_per_s=p["tflops"] * TERA, **base)
            for p in entry.get("points") or []
            if seq and p.get("tflops") and "flash" in str(p.get("impl", "")).lower()]


def _launch_records(entry, base) -> list[Record]:
    return [Record(kind="launch", op=entry.get("op", "launch"), median_s=p["time_us"] * MICRO, **base)
            for p in entry.get("points") or [] if p.get("time_us")]


def _h2d_records(entry, base) -> list[Record]:
    names = {"host to device": "h2d", "device to host": "d2h"}
    return [Record(kind="h2d", op=names[p["direction"].lower()], rate_per_s=p["bandwidth_GBps"] * GIGA, **base)
            for p in entry.get("points") or [] if str(p.get("direction", "")).lower() in names]


KIND_PARSERS = {
    "nccl_collective": _collective_records, "gemm": _gemm_records, "hbm_bandwidth": _hbm_records,
    "attention_kernel": _attention_records, "launch_overhead": _launch_records,
    "pcie_nvlink_bandwidth": _h2d_records,
}


def parse_microbenchmarks(data: dict, hardware_id: str, origin: str = "microbenchmarks.yaml",
                          min_trust: str = "medium") -> Published:
    """The records of ``hardware_id`` with trust >= ``min_trust`` (the file's own rule: "Low-trust
    rows (user reports, blogs) are sanity bounds only")."""
    if not isinstance(data, dict) or data.get("format") != MICROBENCHMARKS_FORMAT:
        raise InputError(origin, f"not a {MICROBENCHMARKS_FORMAT} file")
    if min_trust not in TRUST_ORDER:
        raise InputError("min_trust", f"use one of {TRUST_ORDER}")
    records, skipped = [], []
    entries = data.get("microbenchmarks") or []
    if not isinstance(entries, list):
        raise InputError(f"{origin}.microbenchmarks", "must be a list of records")
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or "id" not in entry or not isinstance(entry.get("kind"), str):
            raise InputError(f"{origin}.microbenchmarks.{i}", "each record needs 'id' and 'kind'")
        for key in ("hardware", "source", "params"):
            if not isinstance(entry.get(key) or {}, dict):
                raise InputError(f"{origin}.microbenchmarks.{i}.{key}", "must be a mapping")
        if not isinstance(entry.get("points") or [], list):
            raise InputError(f"{origin}.microbenchmarks.{i}.points", "must be a list")
        if (entry.get("hardware") or {}).get("id") != hardware_id:
            continue
        parser = KIND_PARSERS.get(entry["kind"])
        trust = entry.get("trust", "low")
        if trust not in TRUST_ORDER:
            raise InputError(f"{origin}.microbenchmarks.{i}.trust", f"use one of {TRUST_ORDER}, got {trust!r}")
        if parser is None:
            skipped.append(f"{entry['id']}: kind {entry['kind']} is a reference value, not a curve")
        elif TRUST_ORDER.index(trust) < TRUST_ORDER.index(min_trust):
            skipped.append(f"{entry['id']}: trust {trust} (sanity bound only)")
        else:
            base = {"source": _cite(entry, Path(origin).name)}
            try:
                new = parser(entry, base)
            except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
                raise InputError(f"{origin}.{entry['id']}", str(exc).splitlines()[0]) from None
            records += new
            if not new:
                skipped.append(f"{entry['id']}: no point with both a shape/size and a rate")
    meta = Metadata(device=hardware_id, backend="published", date="various", hardware_id=hardware_id,
                    source=Path(origin).name)
    return Published(Results(metadata=meta, records=tuple(records)), tuple(skipped))


# ------------------------------------------------------------------------------- any file
def load_any(path, hardware_id: str | None = None, fabric: str | None = None) -> Results:
    """A suite result file, a microbenchmarks.yaml (records of ``hardware_id``), or an
    nccl-tests log, told apart by content."""
    path = Path(path)
    text = read_text_file(path, str(path), MAX_LOG_FILE_BYTES)
    if looks_like_nccl_tests(text):
        return parse_nccl_tests(text, origin=str(path), fabric=fabric)
    data = parse_data_text(text, str(path), json_text=path.suffix == ".json", name=path.name)
    return results_from_data(data, path.name, hardware_id)


def results_from_data(data, name: str, hardware_id: str | None = None) -> Results:
    """Parsed YAML or JSON (``name`` labels it in messages and sources, never opened): a suite
    result file, or a microbenchmarks file's records of ``hardware_id``."""
    fmt = data.get("format") if isinstance(data, dict) else None
    if fmt == MICROBENCHMARKS_FORMAT:
        if hardware_id is None:
            raise InputError(name, "a microbenchmarks file needs --hardware to pick its records")
        return parse_microbenchmarks(data, hardware_id, origin=name).results
    if fmt == RESULTS_FORMAT or (isinstance(data, dict) and "records" in data):
        return parse_results(data, origin=f"results({name})")
    raise InputError(name, "neither a result file, a microbenchmarks file nor an nccl-tests log")
