"""Training logs read into measured figures (``perfmodel.spec.observed.measured.MeasuredRun``).

Formats, told apart by content (``parse_log``):

=====================  ============================================================================
Megatron-LM            ``iteration N/M | ... | elapsed time per iteration (ms): T | throughput per
(and Megatron-Bridge)  GPU (TFLOP/s/GPU): F | ... | global batch size: B |`` (``training_log`` in
                       megatron/training/training.py); the ``(min, max) time across ranks (ms):``
                       timer blocks that follow (per iteration, the slowest rank kept); ``memory
                       (MB) | ... | max allocated: X``
NeMo                   ``train_step_timing in s: T`` (NeMo 2) or ``train_step_timing in s=T`` (NeMo 1
                       progress bar), with ``global_batch_size`` where logged
torchtitan             ``step: N  loss: ...  memory: XGiB(..%)  tps: T  tflops: F  mfu: M%``
                       (ANSI colours removed); ``tps`` is tokens/s per GPU (torchtitan
                       ``metrics.py``: tokens since the last log / (time x non-data-parallel size))
Hugging Face Trainer   the metrics dict it prints: ``train_samples_per_second`` (whole job),
                       ``train_tokens_per_second`` (per device, ``include_tokens_per_second``:
                       transformers ``TrainingArguments`` documentation), ``train_steps_per_second``
Lightning, CSV         a CSV with a header: Lightning's ``metrics.csv`` (CSVLogger) with
                       ThroughputMonitor columns (``samples_per_sec``, ``items_per_sec``,
                       ``device/items_per_sec``, ``device/mfu``, any ``train|`` or
                       ``throughput/`` prefix), or a plain table in perfmodel's keys
                       (``step_time_s``, ``tokens_per_s_per_gpu``, ... and optionally
                       ``num_gpus``, ``global_batch_size``, ``seq_length``: one run per distinct
                       job size, a scaling series)
YAML                   a ``measured:`` block, or a list of them (``perfmodel.spec.observed.measured``)
=====================  ============================================================================

nccl-tests output measures one collective, not a training step: ``perfmodel calibrate`` fits a
profile from it, which ``--profile`` then applies. Every reader keeps the steady state: the
median of the last half of the logged iterations (``measured.STEADY_STATE_FRACTION``).
"""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path

import numpy as np

from perfmodel.spec import limits
from perfmodel.spec.errors import InputError, parse_data_text, read_text_file
from perfmodel.spec.observed.measured import STEADY_STATE_FRACTION, MeasuredRun, measured_from_mapping
from perfmodel.spec.units import GIBI, MEBI, MILLI

KNOWN_FORMATS = ("Megatron-LM ('elapsed time per iteration (ms)'), NeMo ('train_step_timing in s'), torchtitan "
                 "('step: ... tps: ...'), a Hugging Face Trainer metrics dict ('train_samples_per_second'), a "
                 "Lightning metrics.csv or a CSV with a step_time_s or tokens_per_s_per_gpu column, or a YAML "
                 "measured block")
MEGATRON_STEP_TIMERS = (
    "forward-backward", "forward-compute", "backward-compute", "batch-generator", "forward-recv", "forward-send",
    "backward-recv", "backward-send", "forward-send-forward-recv", "forward-send-backward-recv",
    "backward-send-forward-recv", "backward-send-backward-recv", "forward-backward-send-forward-backward-recv",
    "layernorm-grads-all-reduce", "embedding-grads-all-reduce", "all-grads-sync", "grads-all-reduce",
    "grads-reduce-scatter", "params-all-gather", "optimizer-copy-to-main-grad", "optimizer-unscale-and-check-inf",
    "optimizer-clip-main-grad", "optimizer-count-zeros", "optimizer-inner-step",
    "optimizer-copy-main-to-model-params", "optimizer")
"""Megatron-LM's per-iteration timers (``timers_to_log`` of ``training_log``, timing_log_level 1
and 2); setup and checkpoint timers are not part of a step and are left out."""
CSV_KEYS = ("step_time_s", "tokens_per_s_per_gpu", "tokens_per_s", "samples_per_s", "mfu", "tflop_per_s_per_gpu",
            "gpu_utilisation", "data_wait_s", "peak_memory_gib")
CSV_JOB_KEYS = ("num_gpus", "global_batch_size", "seq_length")
LIGHTNING_COLUMNS = {"samples_per_sec": "samples_per_s", "items_per_sec": "tokens_per_s",
                     "device/items_per_sec": "tokens_per_s_per_gpu", "device/mfu": "mfu"}
"""Lightning ThroughputMonitor metric -> perfmodel key (items are tokens when the monitor is given
the sequence lengths, as for a language model)."""

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NUM = r"([0-9][0-9,]*(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"
_MEGATRON_TIME = re.compile(r"elapsed time per iteration \(ms\):\s*" + _NUM)
_MEGATRON_TFLOPS = re.compile(r"throughput per GPU \(TFLOP/s/GPU\):\s*" + _NUM)
_MEGATRON_GBS = re.compile(r"global batch size:\s*(\d+)")
_MEGATRON_MEMORY = re.compile(r"memory \(MB\).*\bmax allocated:\s*" + _NUM)
_TIMER_HEADER = re.compile(r"(?:\(min, max\)|max) time across ranks \(ms\):")
_TIMER_LINE = re.compile(r"^\s*([A-Za-z0-9/_-]+) \.*:\s*\(?" + _NUM + r"(?:,\s*" + _NUM + r")?\)?\s*$")
_NEMO_TIME = re.compile(r"train_step_timing in s\s*[:=]\s*" + _NUM)
_NEMO_GBS = re.compile(r"global_batch_size\s*[:=]\s*" + _NUM)
_TITAN_STEP = re.compile(r"\bstep:\s*(\d+)\b")
_TITAN_TPS = re.compile(r"\btps:\s*" + _NUM)
_TITAN_TFLOPS = re.compile(r"\btflops:\s*" + _NUM)
_TITAN_MFU = re.compile(r"\bmfu:\s*" + _NUM + "%")
_TITAN_MEMORY = re.compile(r"\bmemory:\s*" + _NUM + "GiB")
_YAML_KEY = re.compile(r"^\s*[A-Za-z_][A-Za-z0-9_]*\s*:(\s|$)")
_NUMBER = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_HF_PAIR = re.compile(r"""['"]([a-z_]+)['"]\s*:\s*""" + r"(-?[0-9.]+(?:[eE][-+]?[0-9]+)?)")


def _float(text: str) -> float:
    return float(text.replace(",", ""))


def _whole(x: float) -> int | float:
    """``x`` as an int where it is a finite whole number; else as it is (``MeasuredRun`` refuses it)."""
    return int(x) if math.isfinite(x) and x == int(x) else x


def _lines(text: str) -> list[str]:
    """The log's lines (progress bars redraw with carriage returns: each redraw is a line),
    colours removed, overlong lines left out (``limits.MAX_LOG_LINE_CHARS``)."""
    return [_ANSI.sub("", line) for line in re.split(r"\r\n|\r|\n", text) if len(line) <= limits.MAX_LOG_LINE_CHARS]


def _steady(values: list[float]) -> float:
    """Median of the last half of a series (the steady state, ``STEADY_STATE_FRACTION``)."""
    tail = values[int(len(values) * (1.0 - STEADY_STATE_FRACTION)):]
    return float(np.median(tail or values))


def _timers(blocks: list[dict]) -> dict:
    """Each timer's steady value (seconds per step) over the blocks it appears in."""
    names = dict.fromkeys(k for b in blocks for k in b)
    return {k: _steady([b[k] for b in blocks if k in b]) for k in names}


def parse_megatron(lines: list[str], origin: str) -> MeasuredRun:
    times, tflops, gbs, memory, blocks = [], [], None, None, []
    block = None
    for line in lines:
        if _TIMER_HEADER.search(line):
            block = {} if times else None     # setup timers before the first iteration are not a step's
            if block is not None:
                blocks.append(block)
            continue
        if block is not None:
            m = _TIMER_LINE.match(line)
            if m:
                if m.group(1) in MEGATRON_STEP_TIMERS:
                    block[m.group(1)] = _float(m.group(3) or m.group(2)) * MILLI   # the slowest rank
                continue
            block = None
        m = _MEGATRON_TIME.search(line)
        if m:
            times.append(_float(m.group(1)) * MILLI)
            t = _MEGATRON_TFLOPS.search(line)
            if t:
                tflops.append(_float(t.group(1)))
            g = _MEGATRON_GBS.search(line)
            gbs = int(g.group(1)) if g else gbs
            continue
        m = _MEGATRON_MEMORY.search(line)
        if m:
            memory = max(memory or 0.0, _float(m.group(1)) * MEBI)
    if not times:
        raise InputError(origin, "a Megatron-LM log with no 'elapsed time per iteration (ms)' line")
    return MeasuredRun(source=f"{origin} (Megatron-LM)", global_batch_size=gbs, step_times_s=tuple(times),
                       tflop_per_s_per_gpu=_steady(tflops) if tflops else None, timers_s=_timers(blocks),
                       peak_memory_bytes=memory,
                       notes=("peak memory is Megatron-LM's 'max allocated' of rank 0",) if memory else ())


def parse_nemo(lines: list[str], origin: str) -> MeasuredRun:
    times, gbs = [], None
    for line in lines:
        m = _NEMO_TIME.search(line)
        if m:
            times.append(_float(m.group(1)))
            g = _NEMO_GBS.search(line)
            gbs = _whole(_float(g.group(1))) if g else gbs
    if not times:
        raise InputError(origin, "a NeMo log with no 'train_step_timing in s' value")
    return MeasuredRun(source=f"{origin} (NeMo)", global_batch_size=gbs, step_times_s=tuple(times))


def parse_torchtitan(lines: list[str], origin: str) -> MeasuredRun:
    tps, tflops, mfu, memory = [], [], [], []
    for line in lines:
        if "evaluation" in line or not (_TITAN_STEP.search(line) and _TITAN_TPS.search(line)):
            continue
        tps.append(_float(_TITAN_TPS.search(line).group(1)))
        for pattern, out in ((_TITAN_TFLOPS, tflops), (_TITAN_MFU, mfu), (_TITAN_MEMORY, memory)):
            m = pattern.search(line)
            if m:
                out.append(_float(m.group(1)))
    if not tps or min(tps) <= 0:
        raise InputError(origin, "a torchtitan log with no positive 'tps:' value")
    steady = _steady(tps)
    return MeasuredRun(
        source=f"{origin} (torchtitan)", tokens_per_s_per_gpu=steady,
        tflop_per_s_per_gpu=_steady(tflops) if tflops else None,
        mfu=_steady(mfu) / 100.0 if mfu and _steady(mfu) > 0 else None,
        peak_memory_bytes=max(memory) * GIBI if memory else None,
        first_over_steady=steady / tps[0] if len(tps) >= 2 else None,
        notes=("tps is tokens/s per GPU; peak memory is torchtitan's max reserved",))


def parse_hf_trainer(lines: list[str], origin: str) -> MeasuredRun:
    found: dict = {}
    for line in lines:
        if "train_samples_per_second" in line or "train_tokens_per_second" in line or "train_steps_per_second" in line:
            found.update({k: float(v) for k, v in _HF_PAIR.findall(line) if _NUMBER.fullmatch(v)})
    out: dict = {}
    if found.get("train_tokens_per_second", 0) > 0:
        out["tokens_per_s_per_gpu"] = found["train_tokens_per_second"]
    if found.get("train_samples_per_second", 0) > 0:
        out["samples_per_s"] = found["train_samples_per_second"]
    if not out and found.get("train_steps_per_second", 0) > 0:
        out["step_time_s"] = 1.0 / found["train_steps_per_second"]
    if not out:
        raise InputError(origin, "a Hugging Face Trainer log with no positive train_*_per_second figure")
    return MeasuredRun(source=f"{origin} (Hugging Face Trainer)", **out,
                       notes=("Trainer rates are over the whole run, start-up included",))


def _lightning_key(column: str) -> str | None:
    name = column.split("|")[-1].strip()
    name = name[len("throughput/"):] if name.startswith("throughput/") else name
    return LIGHTNING_COLUMNS.get(name)


def parse_csv(text: str, origin: str) -> tuple[MeasuredRun, ...]:
    try:   # newline="": a CSV's lines may end in \r, \r\n or \n (the csv module's own advice)
        rows = list(csv.DictReader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise InputError(origin, f"not a CSV perfmodel reads ({str(exc)[:80]})") from None
    if len(rows) > limits.MAX_RECORDS:
        raise InputError(origin, f"more than {limits.MAX_RECORDS:,} rows")
    columns = [c for c in rows[0] if c is not None] if rows else []   # None: cells past the header's last
    keys = {c: c for c in columns if c in CSV_KEYS + CSV_JOB_KEYS}
    lightning = {c: _lightning_key(c) for c in columns if _lightning_key(c)}
    if not any(k in CSV_KEYS for k in keys) and not lightning:
        raise InputError(origin, f"a CSV with none of the columns {', '.join(CSV_KEYS)} (or Lightning's "
                                 f"ThroughputMonitor columns {', '.join(LIGHTNING_COLUMNS)})")
    groups: dict = {}
    for number, row in enumerate(rows, 2):
        values = {}
        for column, key in {**keys, **lightning}.items():
            cell = (row.get(column) or "").strip()
            if cell:
                try:
                    values[key] = float(cell)
                except ValueError:
                    raise InputError(origin, f"line {number}: {column} is not a number: {cell[:40]!r}") from None
        job = tuple(values.pop(k, None) for k in CSV_JOB_KEYS)
        if values:
            groups.setdefault(job, []).append(values)
    if not groups:
        raise InputError(origin, "the CSV has no row with a measured value")
    if len(groups) > limits.MAX_OBSERVED_RUNS:
        raise InputError(origin, f"{len(groups):,} runs (job sizes); at most {limits.MAX_OBSERVED_RUNS}")
    runs = []
    for job, entries in groups.items():
        d: dict = {}
        for key in dict.fromkeys(k for e in entries for k in e):
            series = [e[key] for e in entries if key in e]
            if key == "step_time_s" and len(series) > 1:
                d["step_times_s"] = series
            else:
                d[key] = _steady(series)
        bad = [k for k, v in zip(CSV_JOB_KEYS, job) if v is not None and (not 0 < v <= 2**40 or v != int(v))]
        if bad:
            raise InputError(origin, f"{bad[0]} must be a positive whole number")
        where = f"{origin}" + "".join(f" {k}={int(v)}" for k, v in zip(CSV_JOB_KEYS, job) if v is not None)
        m = measured_from_mapping(d, where, source=f"{origin} (CSV)")
        sizes = {k: int(v) for k, v in zip(CSV_JOB_KEYS, job) if v is not None}
        runs.append(MeasuredRun(**{**m.__dict__, **sizes}))
    return tuple(runs)


def parse_yaml_runs(data, origin: str) -> tuple[MeasuredRun, ...]:
    """The runs of parsed YAML: a ``measured:`` block (or a mapping holding one), or a list."""
    if isinstance(data, dict) and isinstance(data.get("measured"), dict):
        data = data["measured"]
    items = data if isinstance(data, list) else [data]
    if not items:
        raise InputError(origin, "expected a measured mapping or a list of them")
    if len(items) > limits.MAX_OBSERVED_RUNS:
        raise InputError(origin, f"{len(items):,} runs; at most {limits.MAX_OBSERVED_RUNS}")
    out = []
    for i, item in enumerate(items):
        where = origin if len(items) == 1 else f"{origin}[{i}]"
        m = measured_from_mapping(item, where, source=f"{origin} (YAML)")
        sizes = {k: item[k] for k in CSV_JOB_KEYS if isinstance(item, dict) and item.get(k) is not None}
        for k, v in sizes.items():
            if type(v) is not int or not 0 < v <= limits.MAX_NUM_GPUS * limits.MAX_SEQ_LENGTH:
                raise InputError(f"{where}.{k}", "must be a positive whole number")
        out.append(MeasuredRun(**{**m.__dict__, **sizes}))
    return tuple(out)


def _looks_like_nccl_tests(lines: list[str]) -> bool:
    return any(line.startswith("#") and "busbw" in line and "size" in line for line in lines)


def parse_log(text: str, origin: str = "log") -> tuple[MeasuredRun, ...]:
    """The runs a log holds (one, or one per job size for a CSV or YAML series), or a one-line
    InputError naming ``origin``: what was expected, where the format is unknown."""
    if len(text) > limits.MAX_LOG_FILE_BYTES:
        raise InputError(origin, f"the log is too large ({len(text):,} characters; at most "
                                 f"{limits.MAX_LOG_FILE_BYTES:,}: give its tail)")
    lines = _lines(text)
    if any(_MEGATRON_TIME.search(line) for line in lines):
        return (parse_megatron(lines, origin),)
    if any(_NEMO_TIME.search(line) for line in lines):
        return (parse_nemo(lines, origin),)
    if any(_TITAN_STEP.search(line) and _TITAN_TPS.search(line) for line in lines):
        return (parse_torchtitan(lines, origin),)
    if any("train_samples_per_second" in line or "train_tokens_per_second" in line for line in lines):
        return (parse_hf_trainer(lines, origin),)
    if _looks_like_nccl_tests(lines):
        raise InputError(origin, "nccl-tests output measures one collective, not a training step: fit a profile "
                                 "from it with 'perfmodel calibrate' and pass it with --profile")
    first = next((line for line in lines if line.strip()), "")
    if first.lstrip().startswith(("-", "{")) or _YAML_KEY.match(first):
        try:
            data = parse_data_text(text, origin, name=origin)
        except InputError as exc:
            if "nested" in exc.reason or "too large" in exc.reason or "digits" in exc.reason:
                raise                          # YAML, refused for its shape: say so
            data = None                        # not YAML either: the format is unknown
        if isinstance(data, (dict, list)):
            return parse_yaml_runs(data, origin)
    if "," in first and not first.lstrip().startswith(("{", "[", "-", "#")):
        return parse_csv(text, origin)
    raise InputError(origin, f"not a training log perfmodel reads; expected {KNOWN_FORMATS}")


def read_log(path: str | Path) -> tuple[MeasuredRun, ...]:
    """The runs of a log file the user names (bounded read: ``limits.MAX_LOG_FILE_BYTES``)."""
    p = Path(path)
    text = read_text_file(p, f"log({p.name})", limits.MAX_LOG_FILE_BYTES)
    return parse_log(text, p.name)

