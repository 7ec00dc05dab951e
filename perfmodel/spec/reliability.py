"""Failures and recovery: the user's choices of interruption rates, restart time and checkpoint
storage, with sourced defaults. The formulas (Young/Daly, goodput) are ``perfmodel.formulas.goodput``."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from perfmodel.spec.limits import (
    MAX_COUNT,
    MAX_FAILURES_PER_HOUR,
    MAX_GB_PER_S,
    MAX_SECONDS,
    MIN_RATE,
    int_field,
    real_field,
)
from perfmodel.spec.units import GIGA, SECONDS_PER_DAY, SECONDS_PER_HOUR

# --- Llama 3 405B pre-training (Llama Team 2024, "The Llama 3 Herd of Models", sec. 3.3.4, table 5)
LLAMA3_UNEXPECTED_INTERRUPTIONS = 419
"""Unexpected job interruptions in a 54-day snapshot (466 in all, 47 of them planned)."""
LLAMA3_NUM_GPUS = 16_384
LLAMA3_SNAPSHOT_DAYS = 54
LLAMA3_HARDWARE_FRAC = 0.78
"""About 78% of the unexpected interruptions were confirmed or suspected hardware issues."""
LLAMA3_GPU_HOURS_IN_SNAPSHOT = LLAMA3_NUM_GPUS * LLAMA3_SNAPSHOT_DAYS * SECONDS_PER_DAY / SECONDS_PER_HOUR
GPU_FAILURES_PER_GPU_HOUR_LLAMA3 = LLAMA3_UNEXPECTED_INTERRUPTIONS / LLAMA3_GPU_HOURS_IN_SNAPSHOT
"""419 / (16,384 GPUs x 54 d x 24 h) = 1.973e-5 per GPU-hour (a GPU-equivalent MTBF of
~50,700 h). All causes (hardware and software) are charged to the per-GPU term."""

# --- sourced defaults -------------------------------------------------------------------
RESTART_S_DEFAULT = 300.0
"""Relaunch overhead (rescheduling, process start-up, NCCL init), excluding checkpoint
load: 5 minutes, the value Kokolis et al. 2025 (arXiv 2410.21680) assume in their ETTR
estimates. FlashRecovery (arXiv 2509.03047) reports 150 s on 4,800 devices as a best case."""
STORAGE_BANDWIDTH_BYTES_PER_S_DEFAULT = 2.0e12
"""Llama 3 sec. 3.3.1: Tectonic serves 2 TB/s sustained (7 TB/s peak) to the 16K-GPU job."""
GPUS_PER_NODE_DEFAULT = 8
"""HGX/DGX H100 servers: 8 GPUs (DGX H100 datasheet)."""
GPUS_PER_RACK_DEFAULT = 72
"""GB200 NVL72: 72 GPUs share one NVLink rack (NVIDIA GB200 NVL72 product page)."""
CHECKPOINT_BYTES_PER_PARAM = 14
"""bf16 weights (2) + fp32 master weights (4) + Adam m (4) + Adam v (4). Mixed-precision
Adam holds 16 B/param (Rajbhandari et al. 2020, ZeRO, sec. 3.1: 2 + 2 + 12); the bf16
gradients (2) are not checkpointed. BLOOM-176B's full checkpoint was 2.3 TB
(Bekman 2022, "The Technology Behind BLOOM Training", Hugging Face blog)."""
MAX_CHECKPOINT_BYTES_PER_PARAM = 64.0
"""4x the 16 B/param of mixed-precision Adam with its gradients (ZeRO sec. 3.1)."""


Rate = real_field(MAX_FAILURES_PER_HOUR, 0.0, exclusive_minimum=False)
BytesPerS = real_field(MAX_GB_PER_S * GIGA, MIN_RATE * GIGA, exclusive_minimum=False)
"""A storage or I/O bandwidth in bytes/s, from a MB/s to a PB/s (``perfmodel.spec.limits``)."""


class FailureModel(BaseModel):
    """Interruption rates and recovery costs. Rates are per component-hour (edge units)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu_failures_per_gpu_hour: Rate = GPU_FAILURES_PER_GPU_HOUR_LLAMA3
    """Job interruptions charged per GPU (default derived from Llama 3, all causes)."""
    node_failures_per_node_hour: Rate = 0.0
    """Extra interruptions per server (host CPU, NIC, PSU); 0: already in the GPU term."""
    rack_failures_per_rack_hour: Rate = 0.0
    """Extra interruptions per scale-up rack (NVLink switch trays, power shelves, liquid
    cooling of an NVL72); 0 by default: no public rate found."""
    gpus_per_node: int_field(MAX_COUNT) = GPUS_PER_NODE_DEFAULT
    gpus_per_rack: int_field(MAX_COUNT) = GPUS_PER_RACK_DEFAULT
    restart_s: real_field(MAX_SECONDS, 0.0, exclusive_minimum=False) = RESTART_S_DEFAULT
    """Relaunch time after a failure, excluding reading the checkpoint."""
    storage_write_bandwidth_bytes_per_s: BytesPerS = STORAGE_BANDWIDTH_BYTES_PER_S_DEFAULT
    storage_read_bandwidth_bytes_per_s: BytesPerS = STORAGE_BANDWIDTH_BYTES_PER_S_DEFAULT
    per_gpu_io_bandwidth_bytes_per_s: BytesPerS | None = None
    """Per-GPU cap on checkpoint I/O (host link or front-end NIC share); None = no cap."""
    checkpoint_bytes_per_param: real_field(MAX_CHECKPOINT_BYTES_PER_PARAM) = CHECKPOINT_BYTES_PER_PARAM
    """Checkpoint size per model parameter: weights and optimizer state (default 14 B, Adam)."""
    checkpoint_interval_s: real_field(MAX_SECONDS) | None = None
    """Compute time between checkpoints; None = Young's interval sqrt(2 delta M), the optimum."""
