"""One job re-evaluated with some resources faster or slower than modelled.

A ``Speeds`` says how many times faster than the model's own figure each resource runs (0.5: at
half speed). The job's hardware spec and efficiencies are copied with the change and the engine
evaluates the same layout again, so every consequence follows the step model exactly: a
collective hidden behind compute stays hidden until it outgrows it, a host that keeps ahead of
the GPU costs nothing, a loader faster than the step never waits.

==========================  ===========================================================================
resource                    what changes (x = its speed factor)
==========================  ===========================================================================
``peak_flops``              every dense tensor-core peak x (the kernels' share of it unchanged)
``hbm_bandwidth``           HBM bandwidth x (memory-bound kernels, the optimizer step)
``scale_up_bandwidth``      NVLink bandwidth per GPU x, and measured scale-up collective fits' busbw
``scale_out_bandwidth``     NIC line rate x, and measured scale-out collective fits' busbw
``latency``                 every collective's per-step latency / x, both fabrics, fits included
``host_overhead``           host time per framework op and per kernel launch / x
``input_pipeline``          the data loader's read rate x (``perfmodel.formulas.overheads``)
``pipeline_bubble``         the pipeline bubble / x (stage imbalance, schedule): a term, not a device
==========================  ===========================================================================
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from perfmodel.engine.evaluate import COMPONENTS, evaluate
from perfmodel.engine.rules import Resolved
from perfmodel.formulas import overheads
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.hardware import HardwareSpec

RESOURCES = ("peak_flops", "hbm_bandwidth", "scale_up_bandwidth", "scale_out_bandwidth", "latency",
             "host_overhead", "input_pipeline")
"""The devices and stages whose speed sets a step (``perfmodel sensitivity``)."""
LEVERS = RESOURCES + ("pipeline_bubble",)
"""Everything ``perturbed`` can change: the resources and the pipeline bubble."""


@dataclass(frozen=True)
class Speeds:
    """Speed of each lever relative to the model (1: as modelled; 2: twice as fast)."""

    peak_flops: float = 1.0
    hbm_bandwidth: float = 1.0
    scale_up_bandwidth: float = 1.0
    scale_out_bandwidth: float = 1.0
    latency: float = 1.0
    host_overhead: float = 1.0
    input_pipeline: float = 1.0
    pipeline_bubble: float = 1.0

    def times(self, lever: str, factor: float) -> "Speeds":
        """These speeds with ``lever`` ``factor`` times faster."""
        return dataclasses.replace(self, **{lever: getattr(self, lever) * factor})


def scaled_hardware(hw: HardwareSpec, s: Speeds) -> HardwareSpec:
    """``hw`` with its peaks, HBM, links and fabric latencies at the speeds ``s``."""
    peaks = hw.gpu.peak_dense_tflop_per_s
    peaks = peaks.model_copy(update={p: getattr(peaks, p) * s.peak_flops for p in type(peaks).model_fields
                                     if getattr(peaks, p) is not None})
    gpu = hw.gpu.model_copy(update={"peak_dense_tflop_per_s": peaks,
                                    "hbm_bandwidth_gb_per_s": hw.gpu.hbm_bandwidth_gb_per_s * s.hbm_bandwidth})
    up = hw.scale_up.model_copy(update={
        "bandwidth_per_direction_gb_per_s": hw.scale_up.bandwidth_per_direction_gb_per_s * s.scale_up_bandwidth,
        "latency_us": hw.scale_up.latency_us / s.latency})
    out = hw.scale_out.model_copy(update={
        "nic_bandwidth_gbit_per_s": hw.scale_out.nic_bandwidth_gbit_per_s * s.scale_out_bandwidth,
        "latency_us": hw.scale_out.latency_us / s.latency})
    return hw.model_copy(update={"gpu": gpu, "scale_up": up, "scale_out": out})


def scaled_efficiency(eff: Efficiencies, s: Speeds) -> Efficiencies:
    """``eff`` with its latencies, host costs and measured collective fits at the speeds ``s``
    (the fits stand in for the links where they match, so they change with them)."""
    fits = tuple(f.model_copy(update={
        "busbw_bytes_per_s": f.busbw_bytes_per_s * (s.scale_up_bandwidth if f.fabric == "scale_up"
                                                    else s.scale_out_bandwidth),
        "latency_s": f.latency_s / s.latency}) for f in eff.collectives)
    return eff.model_copy(update={
        "scale_up_latency_s": eff.scale_up_latency_s / s.latency,
        "scale_out_latency_s": eff.scale_out_latency_s / s.latency,
        "host_op_overhead_s": eff.host_op_overhead_s / s.host_overhead,
        "launch_overhead_s": eff.launch_overhead_s / s.host_overhead, "collectives": fits})


def input_pipeline_s(r: Resolved, s: Speeds) -> float:
    """Seconds the data loader takes to deliver one step's tokens to one GPU at speed ``s``:
    the wait it would cause were the step's work instantaneous (``overheads.data_wait_s``)."""
    tokens_per_gpu = r.job.global_batch_size * r.job.seq_length / r.job.num_gpus
    return float(overheads.data_wait_s(tokens_per_gpu / s.input_pipeline, 0.0, r.job.input_pipeline))


ENGINE_LEVERS = RESOURCES[:-1]
"""The levers the engine must evaluate again for; the input pipeline and the bubble act on its
breakdown afterwards."""


def engine_breakdown(r: Resolved, s: Speeds) -> dict:
    """The engine's step breakdown of the resolved job with the devices at the speeds ``s``
    (the input pipeline and the bubble as modelled)."""
    job = dataclasses.replace(r.job, hardware=scaled_hardware(r.job.hardware, s),
                              efficiency=scaled_efficiency(r.job.efficiency, s))
    return {k: float(v[0]) for k, v in evaluate(job, r.layouts).breakdown.items()}


def finished(r: Resolved, s: Speeds, engine_bd: dict) -> dict:
    """``engine_bd`` with the bubble and the data loader at the speeds ``s``: the loader waits
    max(0, t_load - the rest of the step), as the engine computes it last."""
    bd = dict(engine_bd)
    bd["pipeline_bubble"] /= s.pipeline_bubble
    busy = sum(v for k, v in bd.items() if k != "data_wait")
    bd["data_wait"] = max(0.0, input_pipeline_s(r, s) - busy)
    return {k: bd[k] for k in COMPONENTS}


def perturbed(r: Resolved, s: Speeds) -> dict:
    """The step breakdown (component -> seconds; the parts sum to the step) of the resolved job
    with the levers at the speeds ``s``."""
    return finished(r, s, engine_breakdown(r, s))


class Evaluator:
    """``perturbed`` for one resolved job, each engine evaluation done once (a fit asks for the
    same speeds of the devices many times while it varies the loader or the bubble)."""

    MAX_CACHED = 4096
    """Engine breakdowns kept (a dozen floats each)."""

    def __init__(self, r: Resolved):
        self.resolved = r
        self._engine: dict = {}

    def breakdown(self, s: Speeds) -> dict:
        key = tuple(getattr(s, k) for k in ENGINE_LEVERS)
        bd = self._engine.get(key)
        if bd is None:
            bd = engine_breakdown(self.resolved, s)
            if len(self._engine) < self.MAX_CACHED:
                self._engine[key] = bd
        return finished(self.resolved, s, bd)

    def step_s(self, s: Speeds) -> float:
        return sum(self.breakdown(s).values())


def gpu_idle_s(breakdown: dict) -> float:
    """Seconds of a step no kernel runs on the GPU: the pipeline bubble, the data wait and the
    host's exposed dispatch (``overheads``, which also holds the fixed per-step syncs, latency
    bound). Communication kernels count as busy, as nvidia-smi counts them."""
    return breakdown["pipeline_bubble"] + breakdown["data_wait"] + breakdown["overheads"]
