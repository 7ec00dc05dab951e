"""Job placement on multi-host NVLink domains: how many of a job's GPUs share one domain.

Notation

    D    GPUs in one scale-up domain (``scale_up.domain_size``: 8 for HGX, 72 for NVL72)
    g    GPUs per host, the unit a scheduler allocates (``scale_up.gpus_per_host``: 4 for a
         GB200 compute tray; equal to D when one host is the whole domain)
    N    GPUs of the job; H = N / g hosts
    k    hosts of the job per domain (Slurm ``--segment``)

When one host is the whole domain (HGX, DGX), every domain the job touches is full:
D_job = min(D, N). When a domain spans hosts (NVL72: 18 trays of 4 GPUs), a job that needs
more than one domain is placed in segments of k hosts, each segment inside one domain, with k
the largest whole divisor of H that is at most D / g. This is the rule NVIDIA's benchmark
launchers apply on GB200 (NeMo ``scripts/performance/utils.py`` ``slurm_executor``, commit
7a8f1cc of the dgxc-benchmarking v25.05 pin; Megatron-Bridge
``scripts/performance/utils/executors.py``, v0.2.0: "add --segment flag to sbatch if job uses
GB200 and goes beyond one rack", k = first of 18, 17, ..., 1 dividing the node count), and
what Slurm's block topology does with ``--segment`` (sbatch(1): segment = number of nodes
allocated together within one block). A 256-GPU job (64 trays) gets k = 16: four domains
of 64 GPUs, not three and a half of 72, so a 64-rank group of consecutive ranks never
straddles two racks.

A domain of several racks (GB200 NVL576: eight racks of 72 under a second tier of NVLink
switches) is one Slurm block: the same rule with D = 576 gives segments of up to 144 trays, and
a group that crosses racks inside the segment stays on NVLink (``comm.across_racks_s``).
"""

from __future__ import annotations

import math

from perfmodel.spec.hardware import HardwareSpec


def job_domain_gpus(hw: HardwareSpec, num_gpus: int) -> int:
    """D_job: GPUs of a job of ``num_gpus`` that share one scale-up domain."""
    D, N = hw.scale_up.domain_size, int(num_gpus)
    g = hw.scale_up.gpus_per_host or D
    if N <= D or g >= D:
        return min(D, N)
    hosts = math.ceil(N / g)
    k = next(k for k in range(D // g, 0, -1) if hosts % k == 0)
    return k * g


def placed(hw: HardwareSpec, num_gpus: int) -> HardwareSpec:
    """``hw`` as the job sees it: its scale-up domain is the job's D_job GPUs."""
    d = job_domain_gpus(hw, num_gpus)
    if d == hw.scale_up.domain_size:
        return hw
    return hw.model_copy(update={"scale_up": hw.scale_up.model_copy(update={"domain_size": d})})
