"""Fixed costs that only matter relative to the useful work they are amortised over.

==========================  ===================================================================
optimizer step              Adam reads the fp32 gradient (4 B), reads and writes the fp32
                            master weight, m and v (3 x 8 B) and writes the 16-bit weight
                            (2 B): 30 bytes per parameter it owns, HBM-bound (Kingma & Ba
                            2015, Algorithm 1; Megatron-Core distributed optimizer); PyTorch's
                            multi-tensor (foreach) AdamW, one pass per op: 84 bytes
launch / CPU                per micro-batch the host dispatches every framework operation
                            (eager PyTorch: 10-20 us each, REFERENCES.md) plus the extra kernel
                            launches inside grouped operations (2-6 us each); it runs ahead
                            of the GPU, which waits only when the host time of a micro-batch
                            exceeds its GPU time
per-step fixed              loss and gradient-norm all-reduces over all GPUs (latency bound)
input pipeline              a stage that can starve the GPUs: tokens per GPU per step /
                            loader rate, hidden behind the step when faster
==========================  ===================================================================
"""

from __future__ import annotations

import numpy as np

from perfmodel.spec.software import SoftwareStack

OPTIMIZER_BYTES_PER_PARAM = 4 + 3 * 8 + 2
"""fp32 grad read + fp32 master/m/v read and write + 16-bit weight write (Adam, Kingma & Ba 2015),
in one fused pass (``SoftwareStack.optimizer_kernels`` fused: apex/Transformer Engine FusedAdam in
Megatron-Core, torch.optim.AdamW(fused=True))."""
FOREACH_ADAMW_BYTES_PER_PARAM = 8 + 12 + 8 + 16 + 8 + 8 + 8 + 16
"""PyTorch's multi-tensor AdamW (``torch.optim.adamw._multi_tensor_adamw``, PyTorch 2.x, the default
``foreach`` implementation on CUDA), op by op over fp32 parameters, gradients and states, each op
its own pass (multi_tensor_apply batches tensors into a kernel, not ops): weight decay
``_foreach_mul_`` on p (read, write: 8), ``_foreach_lerp_`` of m toward g (read m and g, write m:
12), ``_foreach_mul_`` of v (8), ``_foreach_addcmul_`` of g * g into v (read v and g twice, write v:
16), ``_foreach_sqrt`` of v into the denominator (8), ``_foreach_div_`` by the bias correction (8),
``_foreach_add_`` of eps (8), ``_foreach_addcdiv_`` of m / denominator into p (read p, m and the
denominator, write p: 16): 84 bytes per parameter, against the fused pass's 30."""


def optimizer_bytes_per_param(sw: SoftwareStack) -> float:
    """HBM bytes the optimizer step moves per parameter it owns (``sw.optimizer_kernels``)."""
    return FOREACH_ADAMW_BYTES_PER_PARAM if sw.optimizer_kernels == "foreach" else OPTIMIZER_BYTES_PER_PARAM


STEP_SYNC_COLLECTIVES = 2
"""Per step: loss all-reduce for logging and the global gradient-norm all-reduce for clipping
(Megatron-Core training loop; Pascanu et al. 2013 gradient clipping)."""
LOADER_BYTES_PER_TOKEN = 4
"""Pre-tokenised int32 token ids read from a memory-mapped file (Megatron indexed dataset)."""
LOADER_BYTES_PER_S_PER_GPU = 2.0e9 / 8
"""A conservative 2 GB/s of local NVMe read per 8-GPU node (DGX H100 datasheet: 8 x 3.84 TB
NVMe U.2 data cache; one drive alone sustains several GB/s)."""


def optimizer_s(params_owned, hbm_bytes_per_s: float, sw: SoftwareStack):
    return np.asarray(params_owned, dtype=float) * optimizer_bytes_per_param(sw) / hbm_bytes_per_s


def host_time_s(host_ops, host_op_s: float, launches, launch_s: float):
    """Host time to issue one micro-batch of one stage."""
    return np.asarray(host_ops, dtype=float) * host_op_s + np.asarray(launches, dtype=float) * launch_s


def host_exposed_s(host_s_per_mb, gpu_time_per_mb_s, num_mb):
    """GPU idle time when the host cannot keep ahead: m * max(0, t_host - t_gpu)."""
    return np.asarray(num_mb) * np.maximum(0.0, np.asarray(host_s_per_mb) - np.asarray(gpu_time_per_mb_s))


def fixed_step_s(allreduce_latency_s):
    return STEP_SYNC_COLLECTIVES * np.asarray(allreduce_latency_s)


def data_wait_s(tokens_per_gpu_per_step, step_busy_s):
    t_load = np.asarray(tokens_per_gpu_per_step, dtype=float) * LOADER_BYTES_PER_TOKEN / LOADER_BYTES_PER_S_PER_GPU
    return np.maximum(0.0, t_load - np.asarray(step_busy_s))
