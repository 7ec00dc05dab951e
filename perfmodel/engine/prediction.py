"""From step arrays to the figures users read: the one place each derived quantity is computed.

``measure`` turns the engine's step arrays for a batch of layouts into an ``Evaluation``:
throughput, MFU (contract definition: model FLOPs without recompute / (step x GPUs x dense
peak of the precision)), hardware FLOP utilisation, the bottleneck, the goodput of the run
(failures, checkpoints and restarts, then start-up: ``perfmodel.formulas.goodput``), and time to
train, GPU-hours, cost and energy, all of the wall time the goodput leaves. ``predict`` is one
row of it, with its goodput waterfall and error band; the layout search keeps many rows of the
same arrays, so a layout the search ranks has exactly the numbers ``predict`` gives it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from math import isnan

import numpy as np

from perfmodel.engine.band import band_dict, band_for_job
from perfmodel.engine.evaluate import COMPONENTS, LENS, StepArrays, evaluate
from perfmodel.engine.job import Job
from perfmodel.engine.rules import Resolved, resolve
from perfmodel.formulas.cost import job_cost
from perfmodel.formulas.counts import param_count
from perfmodel.formulas.goodput import (
    WATERFALL_STAGES,
    job_goodput,
    preempted,
    startup_s,
    training_time_frac,
    waterfall,
)
from perfmodel.formulas.layouts import Layouts
from perfmodel.spec.capacity import CAPACITY, Preemption
from perfmodel.spec.cost import CostModel
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import InputError
from perfmodel.spec.reliability import FailureModel
from perfmodel.spec.scenario import Scenario

RECOMPUTE_FRAC_FLOOR = 1e-30
"""Guards the recompute / compute ratio of HFU against a job with no compute time at all."""
KERNEL_COMPONENTS = ("compute", "recompute")
"""The step's kernel time: the waterfall's 'achieved' stage is model FLOPs over it."""
STALL_COMPONENTS = ("pipeline_bubble", "tp_comm", "cp_comm", "ep_comm", "fsdp_comm", "pp_comm", "dp_comm", "offload")
"""The pipeline bubble and exposed data movement (communication, offload copies); every other
component (optimizer, host overheads, data wait) is a step overhead in the waterfall."""


def bottleneck(breakdown: dict, gemm_s, attention_s, memory_bound_s) -> np.ndarray:
    """The largest component of each step (the first on ties), with ``compute`` named
    ``memory_bandwidth`` where HBM-bound ops outweigh the GEMMs and attention. On one layout's
    floats (``prediction_row``), the name itself, as ``np.argmax`` picks it (the first NaN, else the
    first largest) without stacking one-element arrays (about 25 us)."""
    values = [breakdown[k] for k in COMPONENTS]
    if all(type(v) is float for v in (*values, gemm_s, attention_s, memory_bound_s)):
        first = next((j for j, v in enumerate(values) if isnan(v)), None)
        name = COMPONENTS[values.index(max(values)) if first is None else first]
        return "memory_bandwidth" if name == "compute" and memory_bound_s > gemm_s + attention_s else name
    stacked = np.stack([np.atleast_1d(breakdown[k]) for k in COMPONENTS])
    names = np.array(COMPONENTS, dtype=object)[np.argmax(stacked, axis=0)]
    hbm = (names == "compute") & (np.asarray(memory_bound_s) > np.asarray(gemm_s) + np.asarray(attention_s))
    return np.where(hbm, "memory_bandwidth", names).astype(object)


@dataclass(frozen=True)
class Evaluation:
    """Every figure of one job under a batch of layouts (arrays of equal length)."""

    job: Job
    layouts: Layouts
    step: StepArrays
    step_time_s: np.ndarray
    tokens_per_s: np.ndarray
    mfu: np.ndarray
    hfu: np.ndarray
    """Executed FLOPs (with recompute) over peak: Megatron 2021's '% of peak'."""
    failure_goodput_frac: float
    """Useful over wall time under failures, checkpoints and restarts (Young 1974), for the
    job's GPU count and checkpoint: ``perfmodel.formulas.goodput.job_goodput``."""
    training_time_frac: np.ndarray
    """Share of the run's wall time spent in training steps: the failure goodput, with start-up
    (launch, compilation, warm-up) amortised over the run (without ``training_tokens``, the
    failure goodput alone)."""
    time_to_train_s: np.ndarray | None
    """Wall time of the run: training_tokens / tokens_per_s / training_time_frac (ideal time
    over goodput, plus start-up). None without ``training_tokens``."""
    gpu_hours: np.ndarray
    cost_usd: np.ndarray
    energy_kwh: np.ndarray
    """GPU-hours, cost and facility energy of the whole run's wall time with ``training_tokens``,
    else of one step (``cost_basis``)."""

    @property
    def cost_basis(self) -> str:
        return "step" if self.time_to_train_s is None else "training_tokens"

    @property
    def tokens_per_s_per_gpu(self) -> np.ndarray:
        return self.tokens_per_s / self.job.num_gpus

    @property
    def goodput_frac(self) -> np.ndarray:
        """Useful FLOP/s over the cluster's peak: MFU x the share of wall time that trains."""
        return self.mfu * self.training_time_frac

    def __len__(self) -> int:
        return len(self.layouts)

    def bottleneck_of(self, rows) -> np.ndarray:
        """``bottleneck`` of rows ``rows`` (worked out only for the rows a caller keeps: the
        search's tables, one prediction)."""
        s, n = self.step, len(self)
        def take(x):
            return x[rows] if isinstance(x, np.ndarray) and x.shape == (n,) else np.broadcast_to(x, n)[rows]
        return bottleneck({k: take(s.breakdown[k]) for k in COMPONENTS},
                          *(take(x) for x in (s.gemm_s, s.attention_s, s.memory_bound_s)))


def run_goodput(job: Job, cost_model: CostModel):
    """Goodput under failures, checkpoints and restarts (``job_goodput``), and on preemptible
    capacity (``cost.capacity``: spot) under preemptions too (``goodput.preempted``)."""
    return _run_goodput(*_goodput_inputs(job, cost_model))[0]


def _goodput_inputs(job: Job, cost_model: CostModel) -> tuple:
    """What ``run_goodput`` reads: the GPU count, the parameters, the failure model and, on
    preemptible capacity, the GPUs per node and the preemptions (none of the layout)."""
    if not CAPACITY[cost_model.capacity].preemptible:
        return job.num_gpus, param_count(job.model).total, job.reliability, None, None
    hw = job.hardware
    return (job.num_gpus, param_count(job.model).total, job.reliability,
            hw.scale_up.gpus_per_host or hw.power.gpus_per_node, cost_model.preemption)


GOODPUTS = 256
"""Goodputs kept by ``_run_goodput`` (a study's GPU counts and failure models)."""


@lru_cache(maxsize=GOODPUTS)
def _run_goodput(num_gpus: int, num_params: int, reliability: FailureModel, gpus_per_node: int | None,
                 preemption: Preemption | None) -> tuple:
    """(``run_goodput``, its fraction as a float): a function of frozen inputs that no layout
    changes, worked out once for every layout and micro-batch ``predict`` is asked about."""
    gp = job_goodput(num_gpus, num_params, reliability)
    if preemption is not None:
        gp = preempted(gp, num_gpus, gpus_per_node, preemption.preemptions_per_node_hour, preemption.notice_s,
                       reliability.checkpoint_interval_s)
    return gp, float(gp.fraction)


def measure(job: Job, layouts: Layouts, arrays: StepArrays, cost_model: CostModel) -> Evaluation:
    """The figures of ``arrays`` (``evaluate(job, layouts)``), each computed here and nowhere else."""
    step = arrays.step_time_s
    tokens = job.tokens_per_step
    tps = tokens / step
    peak = job.hardware.gpu.peak_flop_per_s(job.precision)
    mfu = arrays.flop_per_token * tokens / (step * job.num_gpus * peak)
    recompute_frac = arrays.breakdown["recompute"] / np.maximum(arrays.breakdown["compute"], RECOMPUTE_FRAC_FLOOR)
    gp, g = _run_goodput(*_goodput_inputs(job, cost_model))
    ideal = None if not job.training_tokens else job.training_tokens / tps
    su = job.startup
    frac = np.atleast_1d(training_time_frac(0.0 if ideal is None else ideal, g,
                                            startup_s(su.launch_s, su.compile_s, su.warmup_steps, step)))
    with np.errstate(divide="ignore", over="ignore"):
        ttt = None if ideal is None else ideal / frac
        cost = (job_cost(job.num_gpus, step if ttt is None else ttt, job.hardware, cost_model)
                if g > 0 and (ttt is None or np.isfinite(ttt).all()) else None)
    if cost is None or not all(np.isfinite(x).all() for x in (cost.gpu_hours, cost.cost_usd, cost.energy_kwh)):
        raise InputError("reliability", f"a checkpoint every {float(gp.checkpoint_interval_s):.3g} s, each written "
                                        f"in {float(gp.checkpoint_write_s):.3g} s, restarts of "
                                        f"{float(gp.restart_s):.3g} s and a failure every {float(gp.mtbf_s):.3g} s "
                                        f"leave a goodput of {g:.3g}: the run would never finish")
    return Evaluation(
        job=job, layouts=layouts, step=arrays, step_time_s=step, tokens_per_s=tps, mfu=mfu,
        hfu=mfu * (1.0 + recompute_frac), failure_goodput_frac=g, training_time_frac=frac,
        time_to_train_s=ttt, gpu_hours=np.atleast_1d(cost.gpu_hours), cost_usd=np.atleast_1d(cost.cost_usd),
        energy_kwh=np.atleast_1d(cost.energy_kwh))


def evaluate_job(job: Job, layouts: Layouts, cost_model: CostModel) -> Evaluation:
    return measure(job, layouts, evaluate(job, layouts), cost_model)


@dataclass(frozen=True)
class Prediction:
    """One job under one layout: the contract's prediction (shared/contracts/scenario.md)."""

    step_time_s: float
    tokens_per_s: float
    tokens_per_s_per_gpu: float
    mfu: float
    memory_per_gpu_bytes: float
    fits_in_memory: bool
    model_params_total: int
    model_params_active: float
    model_flops_per_token: float
    bottleneck: str
    bottleneck_lens: str
    breakdown_s: dict
    """component -> seconds; the parts sum to ``step_time_s``."""
    memory_breakdown_bytes: dict
    hardware_flops_utilisation: float
    """Executed FLOPs (with recompute) over peak: Megatron 2021's '% of peak'."""
    num_microbatches: int
    dp: int
    goodput_frac: float
    """Useful FLOP/s over the cluster's peak (the last stage of ``goodput_waterfall`` over its first)."""
    training_time_frac: float
    """Share of the run's wall time spent in training steps (failures, checkpoints, restarts and
    start-up take the rest)."""
    goodput_waterfall: tuple
    """({stage, flop_per_s}, ...): the cluster's FLOP/s from its peak to the useful rate
    (``perfmodel.formulas.goodput.WATERFALL_STAGES``)."""
    band: dict | None
    """{figure: {p10, p50, p90}} for tokens/s per GPU, step time and, with ``training_tokens``,
    time to train and cost: the error band (``perfmodel.engine.band``; None only before a band
    table was ever fitted)."""
    band_stratum: str
    """The published runs the band comes from: ``<GPU generation>/<dense|moe>``."""
    band_note: str = ""
    """One line: the model family the band comes from, and where the job lies outside the validated
    runs (the band then widened: ``perfmodel.engine.band.band_for_job``)."""
    time_to_train_s: float | None = None
    gpu_hours: float | None = None
    cost_usd: float | None = None
    energy_kwh: float | None = None

    def to_dict(self) -> dict:
        """The CLI's JSON (``perfmodel predict --format json``), key for key."""
        out = {
            "step_time_s": self.step_time_s, "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu, "mfu": self.mfu,
            "memory_per_gpu_bytes": self.memory_per_gpu_bytes, "fits_in_memory": self.fits_in_memory,
            "model_params_total": self.model_params_total, "model_params_active": self.model_params_active,
            "model_flops_per_token": self.model_flops_per_token, "bottleneck": self.bottleneck,
            "bottleneck_lens": self.bottleneck_lens, "breakdown_s": dict(self.breakdown_s),
            "memory_breakdown_bytes": dict(self.memory_breakdown_bytes),
            "hardware_flops_utilisation": self.hardware_flops_utilisation,
            "num_microbatches": self.num_microbatches, "dp": self.dp,
            "goodput_frac": self.goodput_frac, "training_time_frac": self.training_time_frac,
            "goodput_waterfall": [dict(stage) for stage in self.goodput_waterfall],
        }
        if self.band is not None:
            out.update(band={k: dict(v) for k, v in self.band.items()}, band_stratum=self.band_stratum,
                       band_note=self.band_note)
        for k in ("time_to_train_s", "gpu_hours", "cost_usd", "energy_kwh"):
            v = getattr(self, k)
            if v is not None:
                out[k] = v
        return out


def goodput_waterfall(ev: Evaluation, i: int) -> tuple:
    """Row ``i``'s FLOP/s at each stage from the cluster's peak to the useful rate."""
    job, bd = ev.job, ev.step.breakdown
    kernel_s = sum(float(bd[k][i]) for k in KERNEL_COMPONENTS)
    stall_s = sum(float(bd[k][i]) for k in STALL_COMPONENTS if k in bd)
    step = float(ev.step_time_s[i])
    g = ev.failure_goodput_frac
    levels = waterfall(job.num_gpus * job.hardware.gpu.peak_flop_per_s(job.precision),
                       float(ev.step.flop_per_token) * job.tokens_per_step, kernel_s, stall_s,
                       step - kernel_s - stall_s, g, float(ev.training_time_frac[i]) / g)
    return tuple({"stage": s, "flop_per_s": float(levels[s])} for s in WATERFALL_STAGES)


def prediction_row(ev: Evaluation, i: int) -> Prediction:
    """Row ``i`` of an evaluation as a ``Prediction``."""
    arrays = ev.step
    pc = param_count(ev.job.model)
    job = ev.job
    band = band_for_job(job.hardware, job.model, job.software.stack, job.seq_length, job.num_gpus)
    ttt = None if ev.time_to_train_s is None else float(ev.time_to_train_s[i])
    breakdown_s = {k: float(arrays.breakdown[k][i]) for k in COMPONENTS}
    n, per_gpu = len(ev), float(ev.tokens_per_s_per_gpu[i])
    name = bottleneck(breakdown_s, *(float(x[i] if isinstance(x, np.ndarray) and x.shape == (n,) else
                                           np.broadcast_to(x, n)[i])
                                     for x in (arrays.gemm_s, arrays.attention_s, arrays.memory_bound_s)))
    out = dict(
        step_time_s=float(ev.step_time_s[i]), tokens_per_s=float(ev.tokens_per_s[i]),
        tokens_per_s_per_gpu=per_gpu, mfu=float(ev.mfu[i]),
        memory_per_gpu_bytes=float(arrays.memory.total[i]), fits_in_memory=bool(arrays.fits[i]),
        model_params_total=int(pc.total), model_params_active=float(pc.active),
        model_flops_per_token=float(arrays.flop_per_token), bottleneck=name, bottleneck_lens=LENS.get(name, ""),
        breakdown_s=breakdown_s,
        memory_breakdown_bytes={r["component"]: float(r["bytes"]) for r in arrays.memory.rows(i)},
        hardware_flops_utilisation=float(ev.hfu[i]),
        num_microbatches=int(ev.layouts.num_mb[i]), dp=int(ev.layouts.dp[i]),
        goodput_frac=float(ev.goodput_frac[i]), training_time_frac=float(ev.training_time_frac[i]),
        goodput_waterfall=goodput_waterfall(ev, i), band_stratum="" if band is None else band.stratum,
        band_note="" if band is None else band.note,
        band=None if band is None else band_dict(band, per_gpu, float(ev.step_time_s[i]),
                                                 ttt, None if ttt is None else float(ev.cost_usd[i])),
    )
    if ttt is not None:
        out.update(time_to_train_s=ttt, gpu_hours=float(ev.gpu_hours[i]),
                   cost_usd=float(ev.cost_usd[i]), energy_kwh=float(ev.energy_kwh[i]))
    return Prediction(**out)


def predict_resolved(r: Resolved, cost_model: CostModel) -> Prediction:
    return prediction_row(evaluate_job(r.job, r.layouts, cost_model), 0)


def predict(scenario: Scenario, efficiency: Efficiencies, cost_model: CostModel | None = None) -> Prediction:
    """The scenario's prediction with the given efficiencies (required: ``perfmodel.predict``
    chooses the calibration profile's, ``hardware_of(scenario).efficiency`` names the spec's)
    and cost model (None: the scenario's)."""
    if not isinstance(efficiency, Efficiencies):
        raise TypeError(f"predict needs its efficiencies (an Efficiencies), got {type(efficiency).__name__}")
    return predict_resolved(resolve(scenario, efficiency), cost_model or scenario.cost)
