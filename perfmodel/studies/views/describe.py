"""What a job is before any timing: its parameters, FLOPs per token, placement and memory per
GPU (``perfmodel describe``)."""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.engine.job_memory import job_memory
from perfmodel.engine.rules import resolve
from perfmodel.formulas.counts import param_count, training_flop_per_token
from perfmodel.formulas.memory import fits_in_memory
from perfmodel.formulas.placement import job_domain_gpus
from perfmodel.spec.scenario import Scenario, hardware_of


@dataclass(frozen=True)
class Description:
    model: str
    hardware: str
    num_gpus: int
    dp: int
    num_microbatches: int
    gpus_per_scale_up_domain: int
    model_params_total: int
    model_params_active: float
    model_params_stored: int
    model_flops_per_token: float
    """Training FLOPs per token, causal attention (the MFU convention)."""
    model_flops_per_token_full_attention: float
    """The same counting every key of every query (s, not s/2): the convention of older reports."""
    memory_per_gpu_bytes: float
    memory_breakdown_bytes: dict
    usable_hbm_bytes: float
    fits_in_memory: bool

    def to_dict(self) -> dict:
        """The CLI's JSON (``perfmodel describe --format json``)."""
        return {k: (dict(v) if isinstance(v, dict) else v) for k, v in self.__dict__.items()}


def describe(scenario: Scenario) -> Description:
    r = resolve(scenario)
    job, hw = r.job, hardware_of(scenario)
    pc = param_count(job.model)
    mem = job_memory(job, r.layouts)
    return Description(
        model=job.model.name, hardware=hw.id, num_gpus=scenario.num_gpus, dp=r.dp,
        num_microbatches=r.num_microbatches, gpus_per_scale_up_domain=job_domain_gpus(hw, scenario.num_gpus),
        model_params_total=int(pc.total), model_params_active=float(pc.active), model_params_stored=int(pc.stored),
        model_flops_per_token=training_flop_per_token(job.model, scenario.seq_length, causal=True).total,
        model_flops_per_token_full_attention=training_flop_per_token(job.model, scenario.seq_length,
                                                                     causal=False).total,
        memory_per_gpu_bytes=float(mem.total[0]),
        memory_breakdown_bytes={row["component"]: float(row["bytes"]) for row in mem.rows(0)},
        usable_hbm_bytes=hw.gpu.hbm_usable_bytes, fits_in_memory=bool(fits_in_memory(mem, job.hardware)[0]))
