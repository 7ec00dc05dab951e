"""``python -m calibration clocks``: what SM clock each phase of a run held, from an nvidia-smi log.

A lent GPU logs its clocks beside the work (scripts/gpu_check.sh):

    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,
               clocks_throttle_reasons.active --format=csv -lms 50 > clocks.csv

and the script writes a marks file, one ``NAME YYYY/MM/DD HH:MM:SS.fff`` line at each phase's
start and end. A phase is the samples between two marks; a sample counts as busy above a power
draw (an idle H100 or H200 draws about 70 W). ``attention_clock_ratio`` of a hardware spec is
the mean clock of a training step over the median clock while the suite's attention group ran
(``Efficiencies.attention_clock_ratio``; docs/calibration.md, 'Attention inside a step').
"""

from __future__ import annotations

import argparse
import csv
import io
import itertools
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from perfmodel.spec.errors import InputError, read_text_file
from perfmodel.spec.limits import MAX_LOG_FILE_BYTES

SM_CLOCK = "clocks.current.sm [MHz]"
POWER = "power.draw [W]"
REASONS = "clocks_event_reasons.active"
SW_POWER_CAP = 0x4
"""nvidia-smi clocks_event_reasons: the software power cap holds the clock down (NVML
nvmlClocksEventReasonSwPowerCap)."""
BUSY_W = 150.0
"""A sample above this draws power for kernels (idle: about 70 W on the lent H100 and H200)."""
STEP_BUSY_W = 400.0
"""A training step's samples above this are its GPU work, not the model's setup on the host.
(The ratio moves by under 0.01 between 150 and 500 W on the committed logs.)"""


@dataclass(frozen=True)
class Sample:
    timestamp: str
    sm_mhz: float
    power_w: float
    power_capped: bool


@dataclass(frozen=True)
class Phase:
    name: str
    samples: int
    busy: int
    median_mhz: float
    mean_mhz: float
    median_w: float
    capped: int


def read_samples(path) -> list[Sample]:
    """The samples of an nvidia-smi CSV log (one-line InputError if it is not one)."""
    text = read_text_file(path, str(path), MAX_LOG_FILE_BYTES)
    rows = list(csv.reader(io.StringIO(text), skipinitialspace=True))
    if not rows:
        raise InputError(str(path), "empty nvidia-smi log")
    header = [h.strip() for h in rows[0]]
    for column in ("timestamp", SM_CLOCK, POWER):
        if column not in header:
            raise InputError(str(path), f"no column {column!r} (log with --query-gpu=timestamp,clocks.sm,power.draw,...)")
    at = {name: header.index(name) for name in header}
    out = []
    for row in rows[1:]:
        if len(row) != len(header):
            continue             # a line cut off when the logger was stopped
        try:
            sm = float(row[at[SM_CLOCK]].split()[0])
            power = float(row[at[POWER]].split()[0])
            reasons = int(row[at[REASONS]], 16) if REASONS in at else 0
        except (ValueError, IndexError):
            raise InputError(str(path), f"unreadable sample {','.join(row)[:80]!r}") from None
        out.append(Sample(row[at["timestamp"]].strip(), sm, power, bool(reasons & SW_POWER_CAP)))
    if not out:
        raise InputError(str(path), "no samples")
    return out


MARK = re.compile(r"([A-Za-z][A-Za-z0-9_.-]*) (\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?)")
"""One mark: a name, a space, then the time as nvidia-smi writes its timestamps (date +'%Y/%m/%d %H:%M:%S.%N')."""


def read_marks(path) -> dict[str, str]:
    """``NAME YYYY/MM/DD HH:MM:SS.fff...`` lines: name -> timestamp at nvidia-smi's precision (ms)."""
    marks = {}
    for number, line in enumerate(read_text_file(path, str(path), MAX_LOG_FILE_BYTES).splitlines(), 1):
        if not line.strip():
            continue
        m = MARK.fullmatch(line.strip())
        if m is None:
            raise InputError(str(path), f"line {number} is not 'NAME YYYY/MM/DD HH:MM:SS.fff': {line.strip()[:60]!r}")
        marks[m.group(1)] = m.group(2)[:23]
    return marks


def phase(samples: list[Sample], marks: dict[str, str], start: str, end: str, busy_w: float = BUSY_W) -> Phase:
    """The busy samples between marks ``start`` and ``end``."""
    for mark in (start, end):
        if mark not in marks:
            raise InputError("marks", f"no mark {mark!r} (have {', '.join(marks) or 'none'})")
    inside = [s for s in samples if marks[start] <= s.timestamp <= marks[end]]
    busy = [s for s in inside if s.power_w > busy_w]
    if not busy:
        raise InputError("marks", f"no sample above {busy_w:g} W between {start} and {end}")
    return Phase(f"{start}..{end}", len(inside), len(busy), statistics.median(s.sm_mhz for s in busy),
                 statistics.mean(s.sm_mhz for s in busy), statistics.median(s.power_w for s in busy),
                 sum(s.power_capped for s in busy))


def clock_ratio(step: Phase, attention: Phase) -> float:
    """``attention_clock_ratio``: a step's mean clock over the attention group's median clock."""
    return step.mean_mhz / attention.median_mhz


def _consecutive(marks: dict[str, str]) -> list[tuple[str, str]]:
    names = sorted(marks, key=marks.get)
    return list(itertools.pairwise(names))


def main(argv=None, parser_class=argparse.ArgumentParser) -> int:
    p = parser_class(prog="clocks", description=__doc__.splitlines()[0])
    p.add_argument("log", help="nvidia-smi CSV log")
    p.add_argument("marks", help="marks file (NAME timestamp per line)")
    p.add_argument("--busy-watts", type=float, default=BUSY_W, help=f"busy above this draw (default {BUSY_W:g})")
    args = p.parse_args(argv)
    if not 0 <= args.busy_watts <= 10_000:
        raise InputError("--busy-watts", f"must be 0 to 10000, got {args.busy_watts}")
    samples, marks = read_samples(args.log), read_marks(args.marks)
    print(f"{'phase':44s} {'busy':>5s} {'median MHz':>10s} {'mean MHz':>9s} {'median W':>9s} {'capped':>7s}")
    for start, end in _consecutive(marks):
        try:
            ph = phase(samples, marks, start, end, args.busy_watts)
        except InputError:
            continue              # a phase with no busy sample (a pause between marks)
        print(f"{ph.name:44s} {ph.busy:5d} {ph.median_mhz:10.0f} {ph.mean_mhz:9.0f} {ph.median_w:9.0f} {ph.capped:7d}")
    return 0


def committed_ratio(step_log: Path, step_marks: Path, step_window: tuple[str, str],
                    attention_log: Path, attention_marks: Path) -> tuple[Phase, Phase, float]:
    """The ratio from committed logs: the step's samples above ``STEP_BUSY_W``, the attention
    group's (``attention_start..attention_end``) above ``BUSY_W``."""
    step = phase(read_samples(step_log), read_marks(step_marks), *step_window, busy_w=STEP_BUSY_W)
    attention = phase(read_samples(attention_log), read_marks(attention_marks), "attention_start", "attention_end")
    return step, attention, clock_ratio(step, attention)
