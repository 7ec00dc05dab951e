"""Start-up of a training run: the user's choices of launch, compilation and warm-up time, with
sourced defaults. Start-up happens once per run and is amortised over it
(``perfmodel.formulas.goodput.training_time_frac``); a relaunch after a failure is the reliability
section's ``restart_s``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from perfmodel.spec.limits import MAX_SECONDS, int_field, real_field
from perfmodel.spec.reliability import RESTART_S_DEFAULT

LAUNCH_S_DEFAULT = RESTART_S_DEFAULT
"""Scheduling, process start, rendezvous and NCCL initialisation before the first step: the same
work as a relaunch, 5 minutes, as Kokolis et al. 2025 (arXiv 2410.21680) assume for Meta's
clusters (``perfmodel.spec.reliability.RESTART_S_DEFAULT``)."""
COMPILE_S_DEFAULT = 0.0
"""Nothing is compiled by default: Megatron-Core runs eagerly on Transformer Engine's prebuilt
fused kernels, and torchtitan compiles only when asked (``compile.enable`` is false by default
in its job config). Set it for torch.compile or XLA jobs."""
WARMUP_STEPS_DEFAULT = 10
"""Steps at the start of a run counted as lost: NVIDIA's DGX Cloud benchmarking recipes
(v25.05.01) report the mean of iterations 11-44, leaving the first 10 out as warm-up (memory
allocator, NCCL channels and kernel autotuning settle there). Counting them as wholly lost is
an upper bound."""
MAX_WARMUP_STEPS = 10_000_000
"""Far beyond any run's warm-up (a run is 10^5-10^6 steps)."""


class Startup(BaseModel):
    """Once-per-run start-up. Unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    launch_s: real_field(MAX_SECONDS, 0.0, exclusive_minimum=False) = LAUNCH_S_DEFAULT
    """Job launch: scheduling, process start, rendezvous, communicator set-up, first data."""
    compile_s: real_field(MAX_SECONDS, 0.0, exclusive_minimum=False) = COMPILE_S_DEFAULT
    """Graph compilation (torch.compile, XLA) before the first step."""
    warmup_steps: int_field(MAX_WARMUP_STEPS, 0) = WARMUP_STEPS_DEFAULT
    """Steps at the start that do no useful work (each as long as a steady-state step)."""
