"""What a user measured on a running job: the figures ``diagnose`` and an anchored ``predict`` read.

A ``MeasuredRun`` is one run as a log reader (``perfmodel.spec.observed.logs``) or a ``measured:`` block
gives it, in SI units: a steady-state step time or a throughput, and where the log has them,
per-iteration step times, MFU, TFLOP/s per GPU, GPU utilisation, the data loader's wait, per-phase
timers and peak memory. A run may state the GPU count, the global batch or the sequence length it
ran with; these override the scenario's, so one scenario and several logs make a scaling series.
An ``ObservedRun`` is such a run bound to the scenario it ran.

``measured:`` block keys (a case of a ``perfmodel-cases/1`` file, ``perfmodel.studies.observed.validation``)::

    step_time_s, tokens_per_s_per_gpu, tokens_per_s, samples_per_s, mfu, tflop_per_s_per_gpu,
    gpu_utilisation (fraction), data_wait_s, peak_memory_gib, step_times_s (a list),
    timers_s (a mapping: a step-breakdown component or a Megatron-LM timer name -> seconds per step)

Other keys of a published case (``hfu``, ``hardware_tflops_per_gpu``, ...) are the source's own
record and are not read.
"""

from __future__ import annotations

import math
import reprlib
from dataclasses import dataclass, field

import numpy as np

from perfmodel.spec import limits
from perfmodel.spec.errors import InputError
from perfmodel.spec.scenario import Scenario
from perfmodel.spec.units import GIBI

STEADY_STATE_FRACTION = 0.5
"""The steady-state step time is the median of the last half of the logged iterations: the
first ones carry compilation, autotuning, allocator warm-up and data-loader start-up
(torchtitan and Megatron-LM both report their first steps apart for that reason)."""
MIN_FIGURE = 1e-9
"""Smallest positive measured figure (a step time in seconds, a rate per second, an MFU): a
nanosecond is a thousandth of one kernel launch (``Efficiencies.launch_overhead_s``, microseconds),
so no step is shorter; below it a ratio to a prediction underflows to 0 (``5e-324`` s gave
``diagnose`` a math domain error)."""
MAX_TIMERS = 256
"""Named timers of one run: Megatron-LM logs 24 (``training_log``, timing_log_level 2)."""

MEASURED_KEYS = ("step_time_s", "tokens_per_s_per_gpu", "tokens_per_s", "samples_per_s", "mfu",
                 "tflop_per_s_per_gpu", "gpu_utilisation", "data_wait_s", "peak_memory_gib", "step_times_s",
                 "timers_s")
"""The keys of a ``measured:`` block this module reads."""
THROUGHPUT_KEYS = ("step_time_s", "tokens_per_s_per_gpu", "tokens_per_s", "samples_per_s", "mfu",
                   "tflop_per_s_per_gpu", "step_times_s")
"""At least one of these sets the measured speed of a run."""


@dataclass(frozen=True)
class MeasuredRun:
    """One run's measured figures (SI units; None where the log does not say)."""

    source: str = ""
    """Where the figures come from (a file name and its format)."""
    num_gpus: int | None = None
    global_batch_size: int | None = None
    seq_length: int | None = None
    """The job size the run states, where it differs from the scenario's."""
    step_time_s: float | None = None
    """Steady-state seconds per optimizer step."""
    step_times_s: tuple[float, ...] = ()
    """Per logged iteration, in order (averages over each logging interval)."""
    tokens_per_s_per_gpu: float | None = None
    tokens_per_s: float | None = None
    samples_per_s: float | None = None
    """Sequences per second, whole job."""
    mfu: float | None = None
    tflop_per_s_per_gpu: float | None = None
    """Model TFLOP/s per GPU as the framework counts them (conventions differ: informative only)."""
    gpu_utilisation: float | None = None
    """Fraction of the step a kernel runs on the GPU (nvidia-smi / DCGM 'GPU utilisation')."""
    data_wait_s: float | None = None
    """Seconds per step the training loop waits for its next batch."""
    timers_s: dict = field(default_factory=dict)
    """Per-phase timer -> seconds per step (the slowest rank where the log gives a range)."""
    peak_memory_bytes: float | None = None
    first_over_steady: float | None = None
    """For a log of rates (tokens/s) without times: the steady rate over the first logged one."""
    notes: tuple[str, ...] = ()
    """What the reader assumed (a warm-up left out, a unit converted)."""

    def __post_init__(self) -> None:
        """Every figure finite and in range, whichever reader made the run (a log's ``1e309`` or
        ``inf`` step time is refused here, in one line naming the log, not later as a math error)."""
        where = self.source or "measured"
        for key, upper, inclusive_lower in FIGURE_BOUNDS:
            if getattr(self, key) is not None:
                _figure(getattr(self, key), f"{where}: {key}", upper, inclusive_lower)
        for i, t in enumerate(self.step_times_s):
            _figure(t, f"{where}: step_times_s[{i}]", limits.MAX_SECONDS, False)
        for name, t in self.timers_s.items():
            _figure(t, f"{where}: timers_s.{name}", limits.MAX_SECONDS, True)
        for key in ("num_gpus", "global_batch_size", "seq_length"):
            v = getattr(self, key)
            if v is not None and (type(v) is not int or not 0 < v <= limits.MAX_NUM_GPUS * limits.MAX_SEQ_LENGTH):
                raise InputError(f"{where}: {key}", f"must be a positive whole number, got {reprlib.repr(v)}")

    def steady_step_s(self) -> float | None:
        """The step time as logged: ``step_time_s``, else the median of the last half of the
        per-iteration times."""
        if self.step_time_s is not None:
            return self.step_time_s
        if self.step_times_s:
            tail = self.step_times_s[int(len(self.step_times_s) * (1.0 - STEADY_STATE_FRACTION)):]
            return float(np.median(tail or self.step_times_s))
        return None

    def step_s_for(self, global_batch_size: int, seq_length: int, num_gpus: int, flop_per_token: float,
                   peak_flop_per_s: float) -> tuple[float | None, str]:
        """(seconds per step, which figure gave it) for a job of ``global_batch_size`` sequences
        of ``seq_length`` tokens on ``num_gpus`` GPUs: a step time first, then tokens/s per GPU,
        tokens/s, samples/s, and MFU (model FLOPs of ``flop_per_token`` against
        ``peak_flop_per_s``); None when the run has none of them."""
        tokens = global_batch_size * seq_length
        step = self.steady_step_s()
        if step is not None:
            return step, "step time"
        if self.tokens_per_s_per_gpu:
            return tokens / (self.tokens_per_s_per_gpu * num_gpus), "tokens/s per GPU"
        if self.tokens_per_s:
            return tokens / self.tokens_per_s, "tokens/s"
        if self.samples_per_s:
            return global_batch_size / self.samples_per_s, "samples/s"
        if self.mfu:
            return flop_per_token * tokens / (self.mfu * num_gpus * peak_flop_per_s), "MFU"
        return None, ""

    def first_iteration_ratio(self) -> float | None:
        """The first logged iteration's time over the steady state's (compilation and start-up
        show here), from the step times or, for a log of rates only, as the reader gave it."""
        if len(self.step_times_s) >= 2:
            return self.step_times_s[0] / self.steady_step_s()
        return self.first_over_steady

    def to_dict(self) -> dict:
        """The run as a ``measured:`` block (reads back with ``measured_from_mapping``)."""
        out = {k: getattr(self, k) for k in ("step_time_s", "tokens_per_s_per_gpu", "tokens_per_s", "samples_per_s",
                                             "mfu", "tflop_per_s_per_gpu", "gpu_utilisation", "data_wait_s")
               if getattr(self, k) is not None}
        if self.step_times_s:
            out["step_times_s"] = list(self.step_times_s)
        if self.timers_s:
            out["timers_s"] = dict(self.timers_s)
        if self.peak_memory_bytes is not None:
            out["peak_memory_gib"] = self.peak_memory_bytes / GIBI
        return out


@dataclass(frozen=True)
class ObservedRun:
    """A measured run and the scenario it ran (its GPU count and batch as the run states them)."""

    id: str
    scenario: Scenario
    measured: MeasuredRun


FIGURE_BOUNDS = (("step_time_s", limits.MAX_SECONDS, False),
                 ("tokens_per_s_per_gpu", limits.MAX_MEASURED_RATE_PER_S, False),
                 ("tokens_per_s", limits.MAX_MEASURED_RATE_PER_S, False),
                 ("samples_per_s", limits.MAX_MEASURED_RATE_PER_S, False),
                 ("tflop_per_s_per_gpu", limits.MAX_TFLOP_PER_S, False), ("data_wait_s", limits.MAX_SECONDS, True),
                 ("mfu", 1.0, False), ("gpu_utilisation", 1.0, True),
                 ("peak_memory_bytes", limits.MAX_GIB * GIBI, False),
                 ("first_over_steady", math.inf, False))
"""(figure, upper bound, whether 0 is allowed): the bounds ``measured_from_mapping`` puts on a
``measured:`` block, which a run from any log reader meets too."""


def _float_or_inf(value) -> float:
    """``float(value)``, or inf for a whole number too large for a float (YAML reads ``10**400``
    as an int, which ``math.isfinite`` cannot take)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _figure(value, where: str, upper: float, inclusive_lower: bool) -> None:
    """A run's figure (a number of any float type) is finite and in range, or a one-line InputError."""
    ok = (isinstance(value, (int, float, np.floating)) and not isinstance(value, bool)
          and math.isfinite(_float_or_inf(value)))
    if not ok or not (0 <= value if inclusive_lower else MIN_FIGURE < value) or value > upper:
        raise InputError(where, f"must be a finite number in {'[0' if inclusive_lower else f'({MIN_FIGURE:g}'}, "
                                f"{upper:g}], got {reprlib.repr(value)}")


def _number(value, where: str, upper: float, lower: float = 0.0, inclusive_lower: bool = False) -> float:
    lower = lower if inclusive_lower else max(lower, MIN_FIGURE)
    ok = (type(value) in (int, float) and math.isfinite(_float_or_inf(value))
          and (value >= lower if inclusive_lower else value > lower))
    if not ok or value > upper:
        bound = "[" if inclusive_lower else "("
        raise InputError(where, f"must be a finite number in {bound}{lower:g}, {upper:g}], got {reprlib.repr(value)}")
    return float(value)


def measured_from_mapping(d, where: str = "measured", source: str = "") -> MeasuredRun:
    """A ``measured:`` block as a ``MeasuredRun`` (one-line InputError naming the bad key).
    At least one figure of the run's speed is needed (``THROUGHPUT_KEYS``)."""
    if not isinstance(d, dict):
        raise InputError(where, "must be a mapping")
    rate = limits.MAX_MEASURED_RATE_PER_S
    out: dict = {}
    for key, upper in (("step_time_s", limits.MAX_SECONDS), ("tokens_per_s_per_gpu", rate), ("tokens_per_s", rate),
                       ("samples_per_s", rate), ("tflop_per_s_per_gpu", limits.MAX_TFLOP_PER_S),
                       ("data_wait_s", limits.MAX_SECONDS)):
        if d.get(key) is not None:
            out[key] = _number(d[key], f"{where}.{key}", upper, inclusive_lower=key == "data_wait_s")
    for key in ("mfu", "gpu_utilisation"):
        if d.get(key) is not None:
            out[key] = _number(d[key], f"{where}.{key}", 1.0, inclusive_lower=key == "gpu_utilisation")
    if d.get("peak_memory_gib") is not None:
        out["peak_memory_bytes"] = _number(d["peak_memory_gib"], f"{where}.peak_memory_gib", limits.MAX_GIB) * GIBI
    if d.get("step_times_s") is not None:
        times = d["step_times_s"]
        if not isinstance(times, list) or len(times) > limits.MAX_RECORDS:
            raise InputError(f"{where}.step_times_s", f"must be a list of at most {limits.MAX_RECORDS:,} step times")
        out["step_times_s"] = tuple(_number(t, f"{where}.step_times_s[{i}]", limits.MAX_SECONDS)
                                    for i, t in enumerate(times))
    if d.get("timers_s") is not None:
        timers = d["timers_s"]
        if not isinstance(timers, dict) or len(timers) > MAX_TIMERS:
            raise InputError(f"{where}.timers_s", f"must be a mapping of at most {MAX_TIMERS} timer names to seconds")
        out["timers_s"] = {str(k)[:limits.MAX_NAME_LENGTH]: _number(v, f"{where}.timers_s.{k}", limits.MAX_SECONDS,
                                                                    inclusive_lower=True)
                           for k, v in timers.items()}
    if not any(k in out for k in THROUGHPUT_KEYS):
        raise InputError(where, f"no measured speed: give one of {', '.join(THROUGHPUT_KEYS)}")
    return MeasuredRun(source=source, **out)


def bind_run(run_id: str, scenario: Scenario, measured: MeasuredRun) -> ObservedRun:
    """The run with the scenario at the GPU count, batch and sequence length the run states
    (the layout rules then say whether the scenario's layout runs there)."""
    update = {k: getattr(measured, k) for k in ("num_gpus", "global_batch_size", "seq_length")
              if getattr(measured, k) is not None and getattr(measured, k) != getattr(scenario, k)}
    if update:
        from perfmodel.spec.scenario import parse_scenario, scenario_to_dict
        scenario = parse_scenario({**scenario_to_dict(scenario), **update})
    return ObservedRun(id=run_id, scenario=scenario, measured=measured)

