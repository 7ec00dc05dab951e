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
input pipeline              a stage that can starve the GPUs: tokens per GPU per step x the
                            slower of storage read (bytes per token / read bandwidth) and the
                            loader workers (1 / their token rate), prefetched behind the step,
                            so it binds only when it is the slowest stage
==========================  ===================================================================
"""

from __future__ import annotations

from perfmodel.formulas.scalars import floats, maximum
from perfmodel.spec.input_pipeline import InputPipeline
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


BF16_MOMENTS_BYTES_SAVED_PER_PARAM = 2 * 2 * 2
"""With bf16 Adam moments (``SoftwareStack.optimizer_moments``) the fused step reads and writes m
and v at 2 bytes instead of 4: 2 moments x (read + write) x 2 bytes fewer."""


def optimizer_bytes_per_param(sw: SoftwareStack) -> float:
    """HBM bytes the optimizer step moves per parameter it owns (``sw.optimizer_kernels``,
    ``sw.optimizer_moments``)."""
    if sw.optimizer_kernels == "foreach":
        return FOREACH_ADAMW_BYTES_PER_PARAM
    saved = BF16_MOMENTS_BYTES_SAVED_PER_PARAM if sw.optimizer_moments == "bf16" else 0
    return OPTIMIZER_BYTES_PER_PARAM - saved


STEP_SYNC_COLLECTIVES = 2
"""Per step: loss all-reduce for logging and the global gradient-norm all-reduce for clipping
(Megatron-Core training loop; Pascanu et al. 2013 gradient clipping)."""


def optimizer_s(params_owned, hbm_bytes_per_s: float, sw: SoftwareStack):
    return floats(params_owned) * optimizer_bytes_per_param(sw) / hbm_bytes_per_s


def host_time_s(host_ops, host_op_s: float, launches, launch_s: float):
    """Host time to issue one micro-batch of one stage."""
    return floats(host_ops) * host_op_s + floats(launches) * launch_s


def host_exposed_s(host_s_per_mb, gpu_time_per_mb_s, num_mb):
    """GPU idle time when the host cannot keep ahead: m * max(0, t_host - t_gpu)."""
    return floats(num_mb) * maximum(0.0, floats(host_s_per_mb) - floats(gpu_time_per_mb_s))


def host_syncs_per_pass(m, sw: SoftwareStack) -> bool:
    """Whether the host waits for the GPU inside every forward pass: a dropless MoE layer copies its
    tokens-per-expert counts to the host before its expert GEMMs (their sizes are host-side
    arguments), a device-to-host sync in every MoE layer (Megatron-Core MoE README, 'dropless';
    Megatron-LM docs/discussions/deepseek-v3-gb200-optimization sec. 3.1: 'eliminate the
    device-host sync in the MoE model (its purpose is to get the tokens per expert information)').
    Padded to capacity (static shapes) there is none."""
    return m.moe is not None and not sw.moe_pad_expert_input_to_capacity


def synced_host_exposed_s(host_s_per_mb, bwd_host_frac, fwd_gpu_s, bwd_gpu_s, num_mb):
    """``host_exposed_s`` when the host syncs with the GPU in every forward: the forward's host work
    cannot run ahead into the backward's GPU time, so each pass exposes its own excess:
    m * (max(0, H_f - G_f) + max(0, H_b - G_b)) >= m * max(0, H - G)."""
    h = floats(host_s_per_mb)
    h_f, h_b = (1.0 - bwd_host_frac) * h, bwd_host_frac * h
    return floats(num_mb) * (maximum(0.0, h_f - floats(fwd_gpu_s)) + maximum(0.0, h_b - floats(bwd_gpu_s)))


def fixed_step_s(allreduce_latency_s):
    return STEP_SYNC_COLLECTIVES * floats(allreduce_latency_s)


def input_s_per_token(pipe: InputPipeline) -> float:
    """Seconds per token of the input pipeline: the slower of its storage read and its loader
    workers, which run as a pipeline (each prefetches for the next)."""
    read_s = pipe.bytes_per_token / pipe.storage_read_bytes_per_s_per_gpu
    loader_s = 0.0 if pipe.loader_tokens_per_s_per_gpu is None else 1.0 / pipe.loader_tokens_per_s_per_gpu
    return max(read_s, loader_s)


def data_wait_s(tokens_per_gpu_per_step, step_busy_s, pipe: InputPipeline):
    """GPU idle time waiting for data: max(0, tokens x input seconds per token - busy time). The
    loader prefetches the next step's batch while the GPUs work on this one."""
    t_load = floats(tokens_per_gpu_per_step) * input_s_per_token(pipe)
    return maximum(0.0, t_load - floats(step_busy_s))
