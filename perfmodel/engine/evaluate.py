"""The one place that combines the physical models into a step time.

Per micro-batch on each pipeline stage (first, middle, last):

    t_stage = sum over its layers of [compute_fwd + compute_bwd + recompute
                                      + exposed TP, CP, EP and FSDP communication]
              (+ output layer and MTP on the last stage)

Per step:

    step = m * max_i t_i                      (steady state, the slowest stage sets the pace)
         + (sum_i t_i - max_i t_i) * k        (pipeline bubble: k = 1/v for 1F1B and interleaving,
                                               the schedule's closed form per unit of fill
                                               otherwise, perfmodel.formulas.pipeline)
         + fill/drain activation transfers
         + exposed DP gradient sync and parameter gather
         + exposed activation-offload copies (pp = 1 only)
         + optimizer + launch exposure + fixed per-step syncs + input-pipeline wait

Every term is an array over layouts; ``evaluate`` is used both by ``predict`` (one layout)
and by the layout search (thousands).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from perfmodel.engine.block import BLOCK_TOTALS, block_time, block_totals
from perfmodel.engine.data_parallel import data_parallel_parts
from perfmodel.engine.distinct import once_per_shape
from perfmodel.engine.job import Job, shared_job
from perfmodel.engine.job_memory import job_memory
from perfmodel.engine.stages import add, even_stages, layout_stages, scaled, total
from perfmodel.formulas import comm, offload, overheads, pipeline, traffic
from perfmodel.formulas.activations import activation_bytes_per_layer
from perfmodel.formulas.compute import BACKWARD_HOST_OPS_OVER_FORWARD, BlockTime
from perfmodel.formulas.counts import training_flop_per_token
from perfmodel.formulas.layouts import Layouts, is_row, one_row
from perfmodel.formulas.memory import HIDDEN_DROPOUT, MemoryBreakdown, fits_in_memory
from perfmodel.formulas.overlap import exposed_s, tp_phi, window_used_s
from perfmodel.formulas.recompute import layer_recompute_s, runs_under
from perfmodel.formulas.scalars import batch_of_one, filled, floats, maximum, minimum, where
from perfmodel.formulas.workload import LayerKind, head_ops, layer_kinds, layer_ops, mtp_extra_ops, mtp_layer_kind
from perfmodel.spec.pp_grad_reduce import pp_grad_reduce

COMPONENTS = ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "fsdp_comm", "pp_comm",
              "pipeline_bubble", "dp_comm", "offload", "optimizer", "overheads", "data_wait")
"""Breakdown keys of ``breakdown_s``; their sum is the step time."""

LENS = {
    "compute": "co-design", "memory_bandwidth": "co-design", "recompute": "co-design",
    "tp_comm": "scale serves purpose", "cp_comm": "scale serves purpose",
    "ep_comm": "scale serves purpose", "dp_comm": "scale serves purpose",
    "fsdp_comm": "scale serves purpose",
    "pp_comm": "balanced pipeline", "pipeline_bubble": "balanced pipeline", "offload": "balanced pipeline",
    "optimizer": "amortisation", "overheads": "amortisation", "data_wait": "balanced pipeline",
}
"""Which of the product's four lenses explains each bottleneck."""


@dataclass(frozen=True)
class LayerTime:
    """One layer of one kind, per micro-batch, with its exposed communication."""

    block: BlockTime
    tp_fwd_s: np.ndarray
    tp_bwd_s: np.ndarray
    cp_fwd_s: np.ndarray
    cp_bwd_s: np.ndarray
    ep_fwd_s: np.ndarray
    ep_bwd_s: np.ndarray
    recompute_s: np.ndarray
    fsdp_s: np.ndarray
    used_fwd_s: np.ndarray
    """Forward compute that TP, CP and EP traffic runs beside (``perfmodel.formulas.overlap``): what is
    left of the pass hides the step's data-parallel traffic."""
    used_bwd_s: np.ndarray
    """The same for the backward."""

    @property
    def compute_s(self):
        return self.block.fwd_s + self.block.bwd_s

    @property
    def fwd_pass_s(self):
        """The forward pass with its exposed communication, F of ``perfmodel.formulas.pipeline``."""
        return self.block.fwd_s + self.tp_fwd_s + self.cp_fwd_s + self.ep_fwd_s


LAYER_TIMES = ("tp_fwd_s", "tp_bwd_s", "cp_fwd_s", "cp_bwd_s", "ep_fwd_s", "ep_bwd_s", "recompute_s", "fsdp_s",
               "used_fwd_s", "used_bwd_s")
"""The fields of a ``LayerTime`` that are arrays over layouts."""


def _layer_time(kind: LayerKind, c: Job, L: Layouts, fsdp_per_layer_s) -> LayerTime:
    return _layer_time_under(kind, c, L, fsdp_per_layer_s, c.recompute)


def _layer_time_under(kind: LayerKind, c: Job, L: Layouts, fsdp_per_layer_s, recompute, steady=False) -> LayerTime:
    """One layer of ``kind`` under recompute mode ``recompute`` (a name), or under each row's own
    (its code in ``RECOMPUTE_MODES``: ``perfmodel.engine.evaluate_modes``)."""
    m, hw, eff, sw, seq = c.model, c.hardware, c.efficiency, c.software, c.seq_length
    ov = sw.overlap
    blk = block_time(layer_ops(m, kind, sw), m, L, seq, c.precision, hw, eff, sw)
    phi_tp = tp_phi(ov, L.tp)
    slowdown = eff.overlap_compute_slowdown   # SMs held by hidden collectives (perfmodel.formulas.overlap)
    tp_raw = traffic.tp_layer_s(kind, m, L, seq, hw, eff, c.precision, sw)
    # SP's backward re-gathers each column-parallel GEMM's input, unless the layer's recomputed
    # forward gathered it again (perfmodel.formulas.traffic.sp_regather_s).
    full = runs_under(recompute, "full")
    regather = 0.0 if full is True else traffic.sp_regather_s(kind, m, L, seq, hw, eff, c.precision)
    tp_raw_b = tp_raw + (np.where(full, 0.0, regather) if isinstance(full, np.ndarray) else regather)
    tp_f = exposed_s(tp_raw, blk.gemm_fwd_s, phi_tp, slowdown)
    tp_b = exposed_s(tp_raw_b, blk.gemm_bwd_s, phi_tp, slowdown)
    cp = traffic.cp_layer_parts(m, L, seq, hw, eff, sw)
    # Each part hides behind its share of the pass's attention kernels (perfmodel.spec.context_parallel).
    cp_f = sum(exposed_s(t, share * blk.attn_fwd_s, ov.cp, slowdown) for t, share in cp.fwd)
    cp_b = cp.bwd_tail_s + sum(exposed_s(t, share * blk.attn_bwd_s, ov.cp, slowdown) for t, share in cp.bwd)
    # A stretch of compute hides one collective at a time (perfmodel.formulas.overlap): EP, FSDP and the
    # step's DP traffic hide behind what TP and CP leave of each pass.
    used_f = window_used_s(tp_raw, blk.gemm_fwd_s, phi_tp) + sum(
        window_used_s(t, share * blk.attn_fwd_s, ov.cp) for t, share in cp.fwd)
    used_b = window_used_s(tp_raw_b, blk.gemm_bwd_s, phi_tp) + sum(
        window_used_s(t, share * blk.attn_bwd_s, ov.cp) for t, share in cp.bwd)
    if kind is LayerKind.MOE:
        ep_raw = traffic.ep_layer_s(m, L, seq, hw, eff, sw)
        # Batch-level overlap: the forward all-to-alls of one micro-batch hide behind the
        # layer's backward compute of another, and vice versa (Megatron-Core
        # combined_1f1b, overlap_moe_expert_parallel_comm) in the steady state only
        # (pipeline.combined_1f1b_paired_frac; ``steady``: every pass, the floor's bound, which
        # reads no pipeline column); DualPipe's paired chunks always do (``paired``, spec.schedules).
        phi_ep = ov.ep if steady or not ov.ep else ov.ep * pipeline.combined_1f1b_paired_frac(L.pp, L.vpp, L.num_mb)
        if not pipeline.only_defaults(L.schedule):
            phi_ep = np.where(pipeline.schedule_property(L.schedule, "paired"), 1.0, phi_ep)
        left_b, left_f = blk.bwd_s - used_b, blk.fwd_s - used_f
        ep_slowdown = 0.0 if sw.moe_comm_reserved_sms else slowdown   # its SMs are kept apart
        ep_f = exposed_s(ep_raw, left_b, phi_ep, ep_slowdown)
        ep_b = exposed_s(ep_raw, left_f, phi_ep, ep_slowdown)
        used_b = used_b + window_used_s(ep_raw, left_b, phi_ep)
        used_f = used_f + window_used_s(ep_raw, left_f, phi_ep)
        # A recomputed forward runs inside its own backward, with no other micro-batch's compute
        # paired with it: its all-to-alls are not overlapped.
        ep_redo = ep_raw
    else:
        ep_f = ep_b = ep_redo = filled(blk.fwd_s, 0.0)
    redo = layer_recompute_s(recompute, blk, tp_f, cp_f, ep_redo, m, L, sw, kind)
    fsdp = _fsdp_exposed_s(fsdp_per_layer_s, blk, used_f, used_b, c)
    return LayerTime(blk, tp_f, tp_b, cp_f, cp_b, ep_f, ep_b, redo, fsdp, used_f, used_b)


def _fsdp_exposed_s(fsdp_per_layer_s, blk: BlockTime, used_fwd_s, used_bwd_s, c: Job):
    """ZeRO-3 gathers of one layer behind what its TP, CP and EP traffic leaves of both passes."""
    return exposed_s(fsdp_per_layer_s, blk.fwd_s + blk.bwd_s - used_fwd_s - used_bwd_s, c.software.overlap.fsdp,
                     c.efficiency.overlap_compute_slowdown)


def _layer_totals(kind: LayerKind, c: Job, L: Layouts, steady=False) -> LayerTime:
    """``_layer_time`` before the layer's ZeRO-3 traffic (which depends on the whole layout) and
    without the rows of each operation (``evaluate`` reads only the block's totals): a function
    of the layer's shape, worked out once per distinct one (``perfmodel.engine.distinct``)."""
    if len(L) == 1 and not is_row(L):   # one layout: on its one_row, back as one-element arrays
        lt = _layer_totals(kind, c, one_row(L), steady)
        return batch_of_one(replace(lt, block=batch_of_one(lt.block, BLOCK_TOTALS)), LAYER_TIMES)
    return layer_totals_under(kind, c, L, c.recompute, steady)


def layer_totals_under(kind: LayerKind, c: Job, L: Layouts, recompute, steady=False) -> LayerTime:
    """``_layer_totals`` under recompute mode ``recompute``, or each row's (``_layer_time_under``)."""
    lt = _layer_time_under(kind, c, L, 0.0, recompute, steady)
    return replace(lt, block=replace(lt.block, ops=()))


def layer_parts(kind: LayerKind, c: Job, L: Layouts, steady=False) -> dict:
    """One layer's step components per micro-batch without its ZeRO-3 traffic, as ``evaluate`` sums
    them; ``steady``: every pass's all-to-alls paired (no more than ``evaluate``'s: the floor's)."""
    return _layer_parts(_layer_totals(kind, c, L, steady))


def _per_shape(fn, first, c: Job, L: Layouts, *, recompute: bool):
    """``fn(first, c, L)``, a function of the layer shapes alone, looked up in and added to one
    memo per ``shared_job``, whatever the batch's size: every batch and GPU count of a study
    shares it (``perfmodel.engine.distinct``). One layout (``predict``) is worked out as it is."""
    if len(L) < 2:
        return fn(first, c, L)
    return once_per_shape(fn, first, shared_job(c, recompute=recompute), L, memo=True, min_rows=2)


def prime(c: Job, L: Layouts) -> None:
    """Work out the per-shape parts ``evaluate`` reads from the memos of ``shared_job(c)`` (each
    layer kind's totals, the output layer's, the MTP modules') for every layer shape of ``L``,
    so that the calls that follow, on any batches of those shapes and of jobs that share them
    (other GPU counts on the hardware as placed alike), find them there: one call per part for
    a study's many small batches. The same numbers as without it, to the last bit."""
    if len(L) < 2:
        return
    m, sw = c.model, c.software
    kinds = set(layer_kinds(m))
    if m.mtp_layers:
        kinds.add(mtp_layer_kind(m))
    for kind in (LayerKind.DENSE, LayerKind.MOE):
        if kind in kinds:
            _per_shape(_layer_totals, kind, c, L, recompute=True)
    _per_shape(block_totals, head_ops(m, sw), c, L, recompute=False)
    if m.mtp_layers:
        _per_shape(block_totals, mtp_extra_ops(m), c, L, recompute=False)


def _layer_parts(lt: LayerTime) -> dict:
    return {
        "compute": lt.compute_s, "recompute": lt.recompute_s,
        "tp_comm": lt.tp_fwd_s + lt.tp_bwd_s, "cp_comm": lt.cp_fwd_s + lt.cp_bwd_s,
        "ep_comm": lt.ep_fwd_s + lt.ep_bwd_s, "fsdp_comm": lt.fsdp_s,
    }


@dataclass(frozen=True)
class StepArrays:
    """Step-time breakdown and memory for a batch of layouts."""

    breakdown: dict
    """component -> array of seconds; the step time is their sum."""
    memory: MemoryBreakdown
    fits: np.ndarray
    flop_per_token: float
    gemm_s: np.ndarray
    attention_s: np.ndarray
    memory_bound_s: np.ndarray
    stage_s: pipeline.StageTimes

    @property
    def step_time_s(self):
        return sum(self.breakdown[k] for k in COMPONENTS)


def evaluate(c: Job, L: Layouts, memory: MemoryBreakdown | None = None) -> StepArrays:
    """The step-time breakdown and memory of the job under every layout of ``L``; ``memory``:
    ``job_memory(c, L)`` where the caller has it already (the search, which keeps the layouts
    that fit). One layout (``predict``) is worked out on its ``one_row`` (floats), the same
    numbers, given back as one-element arrays."""
    if len(L) == 1 and not is_row(L) and c.software.pipeline_stages is None:
        step = evaluate(c, one_row(L), job_memory(c, L) if memory is None else memory)
        return replace(batch_of_one(step, ("gemm_s", "attention_s", "memory_bound_s")),
                       breakdown={k: np.array(v, dtype=float).reshape(1) for k, v in step.breakdown.items()},
                       stage_s=batch_of_one(step.stage_s, ("first_s", "middle_s", "last_s")))
    return evaluate_runs(c, L, lambda kind: _per_shape(_layer_totals, kind, c, L, recompute=True), memory)


def evaluate_runs(c: Job, L: Layouts, layer_totals, memory: MemoryBreakdown | None) -> StepArrays:
    """``evaluate`` with each kind's layer totals ``layer_totals(kind)`` (each row's own recompute
    mode's: ``perfmodel.engine.evaluate_modes``)."""
    m, hw, eff, seq, sw = c.model, c.hardware, c.efficiency, c.seq_length, c.software
    ov = sw.overlap
    slowdown = eff.overlap_compute_slowdown   # SMs held by hidden collectives (perfmodel.formulas.overlap)
    kinds = layer_kinds(m)
    n_dense = sum(1 for k in kinds if k is LayerKind.DENSE)
    n_moe = len(kinds) - n_dense
    pp = floats(L.pp)

    layers_per_stage = len(kinds) / pp
    per_layer_units = sw.fsdp_collectives_per_layer
    by_schedule = not pipeline.only_defaults(L.schedule)
    dense_params, expert_params, dp = data_parallel_parts(c, L, by_schedule)
    fsdp_per_layer = per_layer_units * dp.fsdp_per_unit_s

    per_layer: dict = {}
    blocks = []
    used = []   # (forward, backward) compute that layer traffic runs beside, per kind (weighted)
    layers = []   # (layer time, share of the layers) per kind
    for kind, count in ((LayerKind.DENSE, n_dense), (LayerKind.MOE, n_moe)):
        if not count:
            continue
        lt = layer_totals(kind)          # its per-shape part, and its ZeRO-3 traffic
        lt = replace(lt, fsdp_s=_fsdp_exposed_s(fsdp_per_layer, lt.block, lt.used_fwd_s, lt.used_bwd_s, c))
        per_layer = add(per_layer, scaled(_layer_parts(lt), count / len(kinds)))
        blocks.append((lt.block, count / len(kinds)))
        used.append((lt.used_fwd_s * count / len(kinds), lt.used_bwd_s * count / len(kinds)))
        layers.append((lt, count / len(kinds)))
    # FSDP2's copies on the compute stream: ZeRO-3's, and its gradient accumulation under pipelining
    fsdp_copy = {"compute": per_layer_units * (dp.fsdp_copy_per_unit_s + dp.pp_accumulate_per_unit_s)}
    per_layer = add(per_layer, fsdp_copy)
    middle = scaled(per_layer, layers_per_stage)

    head = _per_shape(block_totals, head_ops(m, sw), c, L, recompute=False)
    head_parts = {"compute": head.fwd_s + head.bwd_s}
    mtp_parts: dict = {}   # one MTP module: its layer, its projection and its own head
    if m.mtp_layers:
        mtp_lt = layer_totals(mtp_layer_kind(m))
        mtp_lt = replace(mtp_lt, fsdp_s=_fsdp_exposed_s(fsdp_per_layer, mtp_lt.block, mtp_lt.used_fwd_s,
                                                        mtp_lt.used_bwd_s, c))
        mtp_proj = _per_shape(block_totals, mtp_extra_ops(m), c, L, recompute=False)
        mtp_parts = add(_layer_parts(mtp_lt), fsdp_copy,
                        {"compute": mtp_proj.fwd_s + mtp_proj.bwd_s + head.fwd_s + head.bwd_s})

    if sw.pipeline_stages is None:
        stages, slowest, sum_s = even_stages(L, middle, head_parts, mtp_parts, m.mtp_layers)
        t_max = pipeline.slowest_stage_s(stages, L.pp)
    else:
        stages, slowest, sum_s = layout_stages(sw.pipeline_stages, L, per_layer, head_parts, mtp_parts)
        t_max = total(slowest)
    # Fill and drain (perfmodel.formulas.pipeline): each schedule's bubble per unit of it, from
    # the decoder layers' forward, input-gradient and weight-gradient shares.
    if pipeline.only_defaults(L.schedule):
        bubble = pipeline.bubble_from_stages_s(sum_s, t_max, L.vpp)
    else:
        fwd_s = sum(lt.fwd_pass_s * w for lt, w in layers)
        wgrad_s = sum(lt.block.wgrad_s * w for lt, w in layers)
        split = (fwd_s, total(per_layer) - fwd_s - wgrad_s, wgrad_s)
        bubble = pipeline.bubble_from_stages_s(sum_s, t_max, L.vpp, L.schedule, L.pp, split)

    num_mb = floats(L.num_mb)
    bd = {k: num_mb * v for k, v in slowest.items()}

    # Host dispatch of one micro-batch (forward share 1/3, backward 2/3 of the operations).
    host_ops_per_mb = sum(b.host_ops * w for b, w in blocks) * layers_per_stage
    launches_per_mb = sum(b.extra_launches * w for b, w in blocks) * layers_per_stage
    host_s_per_mb = overheads.host_time_s(host_ops_per_mb, eff.host_op_overhead_s, launches_per_mb,
                                          eff.launch_overhead_s)
    bwd_host_frac = BACKWARD_HOST_OPS_OVER_FORWARD / (1.0 + BACKWARD_HOST_OPS_OVER_FORWARD)

    # Pipeline: steady-state transfers behind a micro-batch, which lasts as long as its GPU work
    # or its host dispatch, whichever is slower; fill/drain transfers exposed.
    # DualPipe's paired chunks send under each other's compute whatever ``overlap.pp`` says.
    t_p2p = traffic.pp_transfer_s(m, L, seq, hw, eff)
    steady_p2p = 2.0 * L.vpp * t_p2p   # forward activation + backward gradient, per chunk
    phi_pp = ov.pp if pipeline.only_defaults(L.schedule) else np.where(
        pipeline.schedule_property(L.schedule, "paired"), 1.0, ov.pp)
    bd["pp_comm"] = (num_mb * exposed_s(steady_p2p, maximum(t_max, host_s_per_mb), phi_pp, slowdown)
                     + pipeline.fill_drain_transfers(L.pp, L.vpp, L.schedule) * t_p2p)
    bd["pipeline_bubble"] = bubble

    # Data parallelism: sync behind the last backward, gather behind the next forward; each
    # pass lasts as long as the GPU work or the host dispatch, whichever is slower, and hides
    # DP traffic in what the layers' own TP, CP and EP traffic leaves of it (perfmodel.formulas.overlap).
    used_fwd = sum(u for u, _ in used) * layers_per_stage
    used_bwd = sum(u for _, u in used) * layers_per_stage
    slow_fwd = maximum(sum(b.fwd_s * w for b, w in blocks) * layers_per_stage,
                          (1.0 - bwd_host_frac) * host_s_per_mb)
    slow_bwd = maximum(sum(b.bwd_s * w for b, w in blocks) * layers_per_stage, bwd_host_frac * host_s_per_mb)
    # Under torch.distributed.pipelining with FSDP2 each stage reduces after its last backward,
    # one stage after another in the drain (perfmodel.spec.pp_grad_reduce).
    drained = pp_grad_reduce(sw.pp_grad_reduce).in_drain & (L.pp > 1)
    grad_s = where(drained, pipeline.drain_reduction_s(dp.grad_sync_s, dp.grad_copy_s, layers_per_stage / L.vpp
                                                       * per_layer_units, L.pp, L.vpp),
                   exposed_s(dp.grad_sync_s, slow_bwd - used_bwd, ov.dp, slowdown))
    bd["dp_comm"] = (grad_s + exposed_s(dp.param_gather_s, slow_fwd - used_fwd, ov.dp, slowdown)
                     + num_mb * dp.fsdp_root_s)   # FSDP2's root group, exposed each micro-batch

    # Activation offload: host copies beside the layers' compute (perfmodel.formulas.offload).
    n_off = sw.activation_offload_layers
    if n_off:
        per_kind = {k: activation_bytes_per_layer(m, k, seq, L.mbs, L.tp, L.sp, L.cp, L.etp, "none", c.precision, sw,
                                                  hidden_dropout=HIDDEN_DROPOUT)
                    for k in set(kinds)}
        copy_s = offload.offloaded_bytes_per_layer(m, n_off, per_kind) / (
            hw.host_link.bandwidth_bytes_per_s * offload.HOST_COPY_EFFICIENCY)
        # each layer's pass lasts as long as its GPU work or its host dispatch, whichever is slower
        host_layer = host_s_per_mb / layers_per_stage
        bd["offload"] = num_mb * offload.exposed_copy_s(
            n_off, len(kinds), copy_s,
            maximum(sum(b.fwd_s * w for b, w in blocks), (1.0 - bwd_host_frac) * host_layer),
            maximum(sum(b.bwd_s * w for b, w in blocks), bwd_host_frac * host_layer))

    # Optimizer over the parameters this GPU owns.
    n_dp = floats(L.dp * L.cp)
    n_edp = floats(L.edp)
    sharded = L.zero_stage >= 1
    owned = (dense_params / where(sharded, n_dp, 1.0)
             + expert_params / where(sharded, n_edp, 1.0))
    bd["optimizer"] = overheads.optimizer_s(owned, hw.gpu.hbm_bandwidth_bytes_per_s * eff.memory_efficiency, sw)

    world_latency = comm.scale_out_fabric(hw, eff).latency_s * np.ceil(np.log2(max(c.num_gpus, 2)))
    # Dropless MoE syncs the host with the GPU in every MoE layer's forward (token counts to the
    # host), so the host cannot run ahead from one pass into the next (perfmodel.formulas.overheads).
    # Each pass's window is its GPU work with the communication it waits on (the host dispatches
    # meanwhile): the forward, its exposed TP/CP/EP traffic and its share of the ZeRO-3 collectives.
    synced = overheads.host_syncs_per_pass(m, sw)
    fwd_window = minimum(t_max, layers_per_stage * sum(
        (lt.fwd_pass_s + traffic.ZERO3_FORWARD_SHARE * lt.fsdp_s) * w for lt, w in layers))
    bd["overheads"] = (where(synced, overheads.synced_host_exposed_s(host_s_per_mb, bwd_host_frac, fwd_window,
                                                                        t_max - fwd_window, num_mb),
                                overheads.host_exposed_s(host_s_per_mb, t_max, num_mb))
                       + overheads.fixed_step_s(world_latency) * filled(num_mb, 1.0))
    busy = sum(bd.values())
    tokens_per_gpu = c.global_batch_size * seq / c.num_gpus
    bd["data_wait"] = overheads.data_wait_s(tokens_per_gpu, busy, c.input_pipeline) * filled(num_mb, 1.0)
    for k in COMPONENTS:
        bd.setdefault(k, filled(num_mb, 0.0))

    mem = job_memory(c, L) if memory is None else memory
    flop = training_flop_per_token(m, seq, causal=True).total
    w_layers = num_mb * layers_per_stage
    return StepArrays(
        breakdown=bd, memory=mem, fits=fits_in_memory(mem, hw), flop_per_token=flop,
        gemm_s=w_layers * sum((b.gemm_fwd_s + b.gemm_bwd_s) * w for b, w in blocks),
        attention_s=w_layers * sum((b.attn_fwd_s + b.attn_bwd_s) * w for b, w in blocks),
        memory_bound_s=w_layers * sum((b.mem_fwd_s + b.mem_bwd_s) * w for b, w in blocks),
        stage_s=stages,
    )
