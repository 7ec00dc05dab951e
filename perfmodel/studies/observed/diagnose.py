"""Diagnose observed runs: predicted against measured, the gap's likely causes, the scaling
series, the symptoms of the LENSES table, and the step's sensitivity to each resource.

``diagnose`` takes one or more runs of a job (``perfmodel.spec.observed.measured.ObservedRun``: several GPU
counts, batches or layouts make a series) with their resolved scenarios and predictions, and
returns a ``Diagnosis``:

- per run, predicted against measured step time, tokens/s per GPU, MFU, GPU utilisation and
  memory, with the prediction's error band where perfmodel offers one (``band_of``);
- the gap's causes, ranked (``perfmodel.studies.observed.causes``);
- for runs at several GPU counts, measured against predicted parallel efficiency (tokens/s per
  GPU over the smallest count's) and the first count where they part;
- the rows of the symptom table the measurements show (``perfmodel.studies.observed.symptoms``);
- the sensitivity of the run with the largest gap (``perfmodel.studies.views.sensitivity``).
"""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.engine.prediction import Prediction
from perfmodel.engine.rules import Resolved
from perfmodel.spec import limits
from perfmodel.spec.errors import InputError
from perfmodel.spec.observed.measured import ObservedRun
from perfmodel.studies.observed.causes import Cause, RunData, rank_causes, timer_groups
from perfmodel.studies.observed.symptoms import SYMPTOM
from perfmodel.studies.views.perturb import Evaluator, Speeds, gpu_idle_s
from perfmodel.studies.views.sensitivity import Sensitivity, sensitivity

PART_THRESHOLD = 0.05
"""Measured and predicted parallel efficiency 'part' where they differ by more than this: above
the model's what-if accuracy (median 3.8%, mean 6.7% over published pairs, docs/validation.md)."""
SLOW_START_RATIO = 2.0
"""'Much slower' first iterations: the first logged iteration at least twice the steady step
(compilation, autotuning and loader start-up take many steps' time; noise is a few percent)."""
IDLE_UTILISATION = 0.5
"""'GPUs mostly idle': utilisation at or below one half."""
DATA_WAIT_SHARE = 0.10
"""A data loader that holds the GPUs for a tenth of the step or more shows the input pipeline as
a stage of its own (LENSES.md, balanced pipelines)."""
PLATEAU_GAIN = 0.05
"""'Throughput stops rising': a batch at least twice as large buys under 5% more tokens/s per GPU,
about the model's what-if accuracy (``PART_THRESHOLD``)."""
LOW_EFFICIENCY = 0.5
"""'More GPUs barely shorten the step': a strong-scaling series (same global batch) at under half
its smallest count's tokens/s per GPU."""
EFFICIENCY_DROP = 0.8
"""'Efficiency falls sharply': below 80% of the smallest count's tokens/s per GPU."""
DATA_WAIT_TIMERS = ("data_wait", "batch-generator")


@dataclass(frozen=True)
class RunCheck:
    """One run: predicted against measured."""

    id: str
    num_gpus: int
    global_batch_size: int
    seq_length: int
    measured_step_time_s: float
    basis: str
    """Which measured figure gave the step time."""
    predicted_step_time_s: float
    gap_frac: float
    """measured / predicted step time - 1 (positive: slower than predicted)."""
    measured_tokens_per_s_per_gpu: float
    predicted_tokens_per_s_per_gpu: float
    band: dict | None
    """The prediction's step-time band ({p10, p50, p90}) where perfmodel offers one."""
    predicted_breakdown_s: dict
    predicted_mfu: float
    predicted_gpu_utilisation: float
    predicted_memory_bytes: float
    measured_mfu: float | None = None
    measured_gpu_utilisation: float | None = None
    measured_memory_bytes: float | None = None
    first_iteration_ratio: float | None = None
    timers: tuple = ()
    """(timers' names, the terms they time, measured seconds, predicted seconds) per set of terms."""
    source: str = ""

    @property
    def within_band(self) -> bool | None:
        if not self.band:
            return None
        return self.band["p10"] <= self.measured_step_time_s <= self.band["p90"]

    def to_dict(self) -> dict:
        return {**self.__dict__, "predicted_breakdown_s": dict(self.predicted_breakdown_s),
                "timers": [{"timers": n, "terms": list(t), "measured_s": m, "predicted_s": p}
                           for n, t, m, p in self.timers], "within_band": self.within_band}


@dataclass(frozen=True)
class ScalingPoint:
    num_gpus: int
    measured_efficiency: float
    predicted_efficiency: float
    """tokens/s per GPU over the smallest count's, measured and predicted."""

    @property
    def parted(self) -> bool:
        return abs(self.measured_efficiency - self.predicted_efficiency) > PART_THRESHOLD

    def to_dict(self) -> dict:
        return {**self.__dict__, "parted": self.parted}


@dataclass(frozen=True)
class Detected:
    """A row of the symptom table the measurements show, with the figures that show it."""

    key: str
    figures: dict

    def to_dict(self) -> dict:
        return {**SYMPTOM[self.key].to_dict(), "figures": dict(self.figures)}


@dataclass(frozen=True)
class Diagnosis:
    runs: tuple[RunCheck, ...]
    causes: tuple[Cause, ...]
    """Best first."""
    no_cause_weight: float
    """Likelihood that the gap is the model's usual error, against the causes (all sum to 1)."""
    scaling: tuple[ScalingPoint, ...]
    """For runs at two or more GPU counts; empty otherwise."""
    symptoms: tuple[Detected, ...]
    sensitivity: Sensitivity
    sensitivity_run: str
    """The run whose sensitivity is shown (the one with the largest gap)."""

    @property
    def parts_at_num_gpus(self) -> int | None:
        """The first GPU count where measured and predicted efficiency part."""
        return next((p.num_gpus for p in self.scaling if p.parted), None)

    @property
    def separation_note(self) -> str:
        """'' where the measurements tell the levers apart; else a line saying they cannot and
        what measurement would: one step time is fitted exactly by every lever, so the ranking is
        the priors' alone."""
        if len(self.causes) < 2 or any(c.evidence != ("step time",) for c in self.causes):
            return ""
        return ("one step time cannot separate the causes: every lever reproduces it exactly, so the ranking "
                "is the priors' (how plausible each speed is); measure a second batch or micro-batch size, "
                "the framework's timers, or a profiler trace (perfmodel diagnose --trace) to tell them apart")

    def to_dict(self) -> dict:
        return {"runs": [r.to_dict() for r in self.runs], "causes": [c.to_dict() for c in self.causes],
                "no_cause_weight": self.no_cause_weight, "scaling": [p.to_dict() for p in self.scaling],
                "parts_at_num_gpus": self.parts_at_num_gpus, "symptoms": [s.to_dict() for s in self.symptoms],
                "sensitivity": self.sensitivity.to_dict(), "sensitivity_run": self.sensitivity_run,
                "separation_note": self.separation_note}


def check_run_count(runs) -> None:
    if not 0 < len(runs) <= limits.MAX_OBSERVED_RUNS:
        raise InputError("runs", f"{len(runs):,} runs; give 1 to {limits.MAX_OBSERVED_RUNS}")


def band_of(p: Prediction) -> dict | None:
    """The step-time band of a prediction ({p10, p50, p90}), where the prediction carries one
    (the error band of issue 33 adds ``band`` to ``predict``'s JSON); None otherwise."""
    band = p.to_dict().get("band")
    step = band.get("step_time_s") if isinstance(band, dict) else None
    return dict(step) if isinstance(step, dict) and {"p10", "p90"} <= set(step) else None


def run_data(o: ObservedRun, r: Resolved, p: Prediction) -> RunData:
    s = o.scenario
    peak = r.job.hardware.gpu.peak_flop_per_s(r.job.precision)
    step, basis = o.measured.step_s_for(s.global_batch_size, s.seq_length, s.num_gpus, p.model_flops_per_token, peak)
    if step is None:
        raise InputError(f"runs.{o.id}", "no measured step time, tokens/s, samples/s or MFU")
    return RunData(o.id, Evaluator(r), o.measured, step, basis, timer_groups(o.measured))


def check_run(d: RunData, o: ObservedRun, p: Prediction) -> RunCheck:
    s, m = o.scenario, o.measured
    tokens = s.global_batch_size * s.seq_length
    bd = d.model.breakdown(Speeds())
    return RunCheck(
        id=o.id, num_gpus=s.num_gpus, global_batch_size=s.global_batch_size, seq_length=s.seq_length,
        measured_step_time_s=d.step_s, basis=d.basis, predicted_step_time_s=p.step_time_s,
        gap_frac=d.step_s / p.step_time_s - 1.0, measured_tokens_per_s_per_gpu=tokens / (d.step_s * s.num_gpus),
        predicted_tokens_per_s_per_gpu=p.tokens_per_s_per_gpu, band=band_of(p),
        predicted_breakdown_s=dict(p.breakdown_s), predicted_mfu=p.mfu,
        predicted_gpu_utilisation=1.0 - gpu_idle_s(bd) / sum(bd.values()),
        predicted_memory_bytes=p.memory_per_gpu_bytes,
        measured_mfu=m.mfu, measured_gpu_utilisation=m.gpu_utilisation, measured_memory_bytes=m.peak_memory_bytes,
        first_iteration_ratio=m.first_iteration_ratio(), source=m.source,
        timers=tuple((label, terms, seconds, sum(bd[t] for t in terms)) for terms, seconds, label in d.timer_groups))


def scaling_series(runs: list[RunCheck]) -> tuple[ScalingPoint, ...]:
    """Parallel efficiency per GPU count, against the smallest count (the mean where several runs
    share a count)."""
    counts = sorted({r.num_gpus for r in runs})
    if len(counts) < 2:
        return ()

    def mean(n, key):
        values = [getattr(r, key) for r in runs if r.num_gpus == n]
        return sum(values) / len(values)
    ref = {k: mean(counts[0], k) for k in ("measured_tokens_per_s_per_gpu", "predicted_tokens_per_s_per_gpu")}
    return tuple(ScalingPoint(n, mean(n, "measured_tokens_per_s_per_gpu") / ref["measured_tokens_per_s_per_gpu"],
                              mean(n, "predicted_tokens_per_s_per_gpu") / ref["predicted_tokens_per_s_per_gpu"])
                 for n in counts)


def _data_wait_s(o: ObservedRun) -> float | None:
    m = o.measured
    waits = [m.timers_s[k] for k in DATA_WAIT_TIMERS if k in m.timers_s]
    return m.data_wait_s if m.data_wait_s is not None else (max(waits) if waits else None)


def _batch_plateau(runs: list[RunCheck]) -> Detected | None:
    """The first pair of runs at one GPU count where twice the batch or more buys little."""
    for n in sorted({r.num_gpus for r in runs}):
        rs = sorted((r for r in runs if r.num_gpus == n), key=lambda r: r.global_batch_size)
        for a, b in zip(rs, rs[1:]):
            gain = b.measured_tokens_per_s_per_gpu / a.measured_tokens_per_s_per_gpu - 1.0
            if b.global_batch_size >= 2 * a.global_batch_size and gain < PLATEAU_GAIN:
                return Detected("batch_plateau", {"num_gpus": n, "from_batch": a.global_batch_size,
                                                  "to_batch": b.global_batch_size, "gain": gain})
    return None


def detect_symptoms(observed: list[ObservedRun], runs: list[RunCheck],
                    scaling: tuple[ScalingPoint, ...]) -> tuple[Detected, ...]:
    """The rows of ``SYMPTOMS`` with a detector that the measurements show."""
    out = []
    for o, r in zip(observed, runs):
        wait = _data_wait_s(o)
        share = None if wait is None else wait / r.measured_step_time_s
        util = r.measured_gpu_utilisation
        if (util is not None and util <= IDLE_UTILISATION) or (share is not None and share >= DATA_WAIT_SHARE):
            out.append(Detected("gpu_idle", {"run": r.id, "gpu_utilisation": util, "data_wait_share": share}))
            break
    slow = [r for r in runs if r.first_iteration_ratio is not None and r.first_iteration_ratio >= SLOW_START_RATIO]
    if slow:
        out.append(Detected("slow_start", {"run": slow[0].id, "first_over_steady": slow[0].first_iteration_ratio}))
    plateau = _batch_plateau(runs)
    if plateau:
        out.append(plateau)
    if scaling:
        last = scaling[-1]
        strong = len({r.global_batch_size for r in runs}) == 1
        if strong and last.measured_efficiency < LOW_EFFICIENCY:
            out.append(Detected("gpus_buy_little", {"num_gpus": last.num_gpus, "efficiency": last.measured_efficiency}))
        below = last.measured_efficiency < last.predicted_efficiency - PART_THRESHOLD
        if last.measured_efficiency < EFFICIENCY_DROP or below:
            out.append(Detected("efficiency_drops", {"num_gpus": last.num_gpus, "efficiency": last.measured_efficiency,
                                                     "predicted_efficiency": last.predicted_efficiency}))
    return tuple(out)


def diagnose(observed: list[ObservedRun], resolved: list[Resolved], predictions: list[Prediction]) -> Diagnosis:
    """The diagnosis of ``observed`` runs, each with its resolved scenario and prediction."""
    check_run_count(observed)
    data = [run_data(o, r, p) for o, r, p in zip(observed, resolved, predictions)]
    checks = [check_run(d, o, p) for d, o, p in zip(data, observed, predictions)]
    causes, null = rank_causes(data)
    scaling = scaling_series(checks)
    worst = max(range(len(checks)), key=lambda i: abs(checks[i].gap_frac))
    return Diagnosis(runs=tuple(checks), causes=causes, no_cause_weight=null, scaling=scaling,
                     symptoms=detect_symptoms(observed, checks, scaling), sensitivity=sensitivity(resolved[worst]),
                     sensitivity_run=checks[worst].id)
