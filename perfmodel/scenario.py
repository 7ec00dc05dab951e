"""Scenario: one training job to predict (format: shared/contracts/scenario.md).

``load_scenario`` turns YAML into a frozen ``Scenario``; ``resolve`` binds it to a
``HardwareSpec`` and a ``ModelSpec`` and checks that the layout can run, raising
``InputError("<field>", "<arithmetic>")`` otherwise. Nothing is silently adjusted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PositiveInt, ValidationError, model_validator

from .errors import InputError, pydantic_message
from .hardware import HardwareSpec, load_hardware
from .model import ModelSpec

Recompute = Literal["none", "selective", "full"]
Precision = Literal["bf16", "fp16", "fp8", "fp4"]
RECOMPUTE_CHOICES: tuple[str, ...] = ("none", "selective", "full")
PRECISION_CHOICES: tuple[str, ...] = ("bf16", "fp16", "fp8", "fp4")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Parallelism(_Frozen):
    tp: PositiveInt = 1
    """Tensor parallel degree."""
    pp: PositiveInt = 1
    """Pipeline parallel degree."""
    vpp: PositiveInt = 1
    """Virtual stages per pipeline rank (interleaved 1F1B)."""
    cp: PositiveInt = 1
    """Context parallel degree."""
    ep: PositiveInt = 1
    """Expert parallel degree (carved out of dp * cp)."""
    etp: PositiveInt = 1
    """Tensor parallel degree inside experts."""
    sequence_parallel: bool | None = None
    """Megatron sequence parallelism; null = (tp > 1)."""
    zero_stage: Literal[0, 1, 2, 3] = 0
    """0 none, 1 optimizer states, 2 + gradients, 3 + parameters (FSDP)."""

    @property
    def sp(self) -> bool:
        return self.tp > 1 if self.sequence_parallel is None else self.sequence_parallel


class Scenario(_Frozen):
    name: str = "scenario"
    hardware: str
    """Id of hardware/<id>.yaml, or a path to a hardware YAML file."""
    num_gpus: PositiveInt
    model: str | ModelSpec
    """A preset id (or a path to a Hugging Face config.json), or an inline mapping."""
    seq_length: PositiveInt
    global_batch_size: PositiveInt
    """Sequences per optimizer step."""
    micro_batch_size: PositiveInt = 1
    parallelism: Parallelism = Field(default_factory=Parallelism)
    recompute: Recompute = "none"
    precision: Precision = "bf16"
    training_tokens: float | None = Field(None, gt=0)
    """Optional: enables time to train, GPU-hours, cost and energy."""


@dataclass(frozen=True)
class Job:
    """A scenario bound to its hardware and model, with the derived data-parallel degree."""

    scenario: Scenario
    hardware: HardwareSpec
    model: ModelSpec
    dp: int
    num_microbatches: int
    """Micro-batches per pipeline per step = global_batch / (micro_batch * dp)."""


def parse_scenario(data: dict) -> Scenario:
    if not isinstance(data, dict):
        raise InputError("scenario", "must be a YAML mapping")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise InputError("scenario", pydantic_message(exc)) from None


def load_scenario(path: str | Path) -> Scenario:
    p = Path(path)
    if not p.exists():
        raise InputError("scenario", f"file not found: {p}")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        raise InputError("scenario", f"{p.name} is not valid YAML ({str(exc).splitlines()[0]})") from None
    return parse_scenario(data)


def scenario_to_dict(s: Scenario) -> dict:
    """Plain mapping in the contract's field names (for YAML export and round trips)."""
    return s.model_dump(mode="json", exclude_none=True)


def check_layout(s: Scenario, m: ModelSpec, hw: HardwareSpec) -> tuple[int, int]:
    """Check that the layout divides; return (dp, micro-batches). Raises InputError."""
    p = s.parallelism
    tp, pp, cp, ep, etp, vpp = p.tp, p.pp, p.cp, p.ep, p.etp, p.vpp
    n = s.num_gpus
    model_par = tp * pp * cp
    if n % model_par:
        raise InputError("num_gpus", f"tp({tp}) * pp({pp}) * cp({cp}) = {model_par} does not divide num_gpus({n})")
    dp = n // model_par
    if m.num_attention_heads % tp:
        raise InputError("parallelism.tp", f"tp({tp}) does not divide num_attention_heads({m.num_attention_heads})")
    if m.mla is None and m.kv_heads % tp and tp % m.kv_heads:
        raise InputError("parallelism.tp", f"tp({tp}) and num_query_groups({m.kv_heads}) do not divide one another")
    if s.seq_length % cp:
        raise InputError("parallelism.cp", f"cp({cp}) does not divide seq_length({s.seq_length})")
    if p.sp and (s.seq_length // cp) % tp:
        raise InputError(
            "parallelism.sequence_parallel",
            f"seq_length({s.seq_length}) / cp({cp}) = {s.seq_length / cp:g} is not divisible by tp({tp})",
        )
    if vpp > 1 and pp == 1:
        raise InputError("parallelism.vpp", f"vpp({vpp}) > 1 needs pp > 1 (pp = {pp})")
    total_chunks = pp * vpp
    if m.num_layers < total_chunks:
        raise InputError("parallelism.pp", f"pp({pp}) * vpp({vpp}) = {total_chunks} exceeds num_layers({m.num_layers})")
    if m.moe is None:
        if ep > 1 or etp > 1:
            raise InputError("parallelism.ep", f"ep({ep}) and etp({etp}) need an MoE model")
    else:
        if m.moe.num_experts % ep:
            raise InputError("parallelism.ep", f"ep({ep}) does not divide moe.num_experts({m.moe.num_experts})")
        if (dp * cp * tp) % (ep * etp):
            raise InputError(
                "parallelism.ep",
                f"ep({ep}) * etp({etp}) = {ep * etp} does not divide dp({dp}) * cp({cp}) * tp({tp}) = {dp * cp * tp}",
            )
    per_step = s.micro_batch_size * dp
    if s.global_batch_size % per_step:
        raise InputError(
            "global_batch_size",
            f"micro_batch_size({s.micro_batch_size}) * dp({dp}) = {per_step} does not divide global_batch_size({s.global_batch_size})",
        )
    num_mb = s.global_batch_size // per_step
    if vpp > 1 and num_mb % pp:
        raise InputError(
            "global_batch_size",
            f"interleaved schedule needs micro-batches({num_mb}) to be a multiple of pp({pp})",
        )
    if not hw.gpu.supports(s.precision):
        raise InputError("precision", f"{hw.gpu.name} has no dense {s.precision} tensor-core peak")
    if p.zero_stage > 0 and dp == 1 and p.zero_stage != 0:
        pass  # ZeRO over a single rank is legal and simply shards nothing
    return dp, num_mb


def resolve(s: Scenario) -> Job:
    """Bind the scenario to hardware and model specs and validate the layout."""
    from .presets import load_model

    hw = load_hardware(s.hardware)
    m = s.model if isinstance(s.model, ModelSpec) else load_model(s.model)
    dp, num_mb = check_layout(s, m, hw)
    return Job(scenario=s, hardware=hw, model=m, dp=dp, num_microbatches=num_mb)
