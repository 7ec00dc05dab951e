"""``predict``: one scenario in, the contract's prediction out (shared/contracts/scenario.md)."""

from __future__ import annotations

from dataclasses import dataclass, field


from perfmodel.formulas.cost import CostModel, job_cost
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.formulas.layouts import layouts_from_job
from perfmodel.spec.model import ModelSpec
from perfmodel.formulas.overlap import Overlap
from perfmodel.formulas.placement import placed
from perfmodel.spec.scenario import Job, Scenario, pipeline_stages, resolve
from perfmodel.engine.evaluate import COMPONENTS, LENS, JobConstants, StepArrays, bottleneck, evaluate
from perfmodel.formulas.counts import param_count


@dataclass(frozen=True)
class Prediction:
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
    memory_breakdown_bytes: dict
    hardware_flops_utilisation: float
    """Executed FLOPs (with recompute) over peak: Megatron 2021's '% of peak'."""
    num_microbatches: int
    dp: int
    time_to_train_s: float | None = None
    gpu_hours: float | None = None
    cost_usd: float | None = None
    energy_kwh: float | None = None
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
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
        }
        for k in ("time_to_train_s", "gpu_hours", "cost_usd", "energy_kwh"):
            v = getattr(self, k)
            if v is not None:
                out[k] = v
        return out


def scenario_constants(s: Scenario, model: ModelSpec, hardware: HardwareSpec,
                       efficiency: Efficiencies | None = None, overlap: Overlap | None = None,
                       **override) -> JobConstants:
    """The one place a scenario's fields become ``JobConstants``; ``override`` replaces any of
    them (search and bench vary num_gpus, precision and recompute). The hardware is the job's
    view of it: its scale-up domain holds the GPUs the job places there (``placement``)."""
    fields = dict(
        model=model, hardware=hardware, efficiency=efficiency or hardware.efficiency,
        seq_length=s.seq_length, global_batch_size=s.global_batch_size, num_gpus=s.num_gpus,
        precision=s.precision, recompute=s.recompute, overlap=overlap or s.overlap,
        attention_backend=s.attention_backend, fsdp_collectives_per_layer=s.fsdp_collectives_per_layer,
        fsdp_list_api=s.fsdp_list_api, moe_dispatcher=s.moe_dispatcher,
        grad_reduce_in_fp32=s.grad_reduce_in_fp32, elementwise_kernels=s.elementwise_kernels,
        selective_recompute=s.selective_recompute, cross_entropy=s.cross_entropy,
        recompute_num_layers=s.recompute_num_layers, activation_offload_layers=s.activation_offload_layers,
        pipeline_layout=pipeline_stages(s),
    )
    merged = {**fields, **override}
    merged["hardware"] = placed(merged["hardware"], merged["num_gpus"])
    return JobConstants(**merged)


def job_constants(job: Job, efficiency: Efficiencies | None = None, overlap: Overlap | None = None) -> JobConstants:
    return scenario_constants(job.scenario, job.model, job.hardware, efficiency, overlap)


def prediction_from_arrays(job: Job, c: JobConstants, arrays: StepArrays, i: int = 0,
                           cost_model: CostModel | None = None) -> Prediction:
    s, hw = job.scenario, job.hardware
    breakdown = {k: float(arrays.breakdown[k][i]) for k in COMPONENTS}
    step = float(sum(breakdown.values()))
    tokens = s.global_batch_size * s.seq_length
    tps = tokens / step
    flop = arrays.flop_per_token
    peak = hw.gpu.peak_flop_per_s(s.precision)
    mfu = flop * tokens / (step * s.num_gpus * peak)
    recompute_frac = breakdown["recompute"] / max(breakdown["compute"], 1e-30)
    hfu = mfu * (1.0 + recompute_frac)
    pc = param_count(job.model)
    mem_rows = {r["component"]: float(r["bytes"]) for r in arrays.memory.rows(i)}
    name = bottleneck(breakdown, float(arrays.gemm_s[i]), float(arrays.attention_s[i]),
                      float(arrays.memory_bound_s[i]))
    out = dict(
        step_time_s=step, tokens_per_s=tps, tokens_per_s_per_gpu=tps / s.num_gpus, mfu=mfu,
        memory_per_gpu_bytes=float(arrays.memory.total[i]), fits_in_memory=bool(arrays.fits[i]),
        model_params_total=int(pc.total), model_params_active=float(pc.active),
        model_flops_per_token=float(flop), bottleneck=name, bottleneck_lens=LENS.get(name, ""),
        breakdown_s=breakdown, memory_breakdown_bytes=mem_rows, hardware_flops_utilisation=hfu,
        num_microbatches=job.num_microbatches, dp=job.dp,
    )
    if s.training_tokens:
        t_train = s.training_tokens / tps
        cost = job_cost(s.num_gpus, t_train, hw, cost_model or CostModel())
        out.update(time_to_train_s=t_train, gpu_hours=float(cost.gpu_hours),
                   cost_usd=float(cost.cost_usd), energy_kwh=float(cost.energy_kwh))
    return Prediction(**out)


def predict_job(job: Job, efficiency: Efficiencies | None = None, overlap: Overlap | None = None,
                cost_model: CostModel | None = None) -> Prediction:
    c = job_constants(job, efficiency, overlap)
    arrays = evaluate(c, layouts_from_job(job))
    return prediction_from_arrays(job, c, arrays, 0, cost_model)


def predict(scenario: Scenario, efficiency: Efficiencies | None = None, overlap: Overlap | None = None,
            cost_model: CostModel | None = None) -> Prediction:
    return predict_job(resolve(scenario), efficiency, overlap, cost_model)
