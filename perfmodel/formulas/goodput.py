"""Failures, checkpoints and goodput: how much of the wall-clock time trains the model.

Notation (Young 1974; Daly 2006):

=====  ======================================================  ===============================
λ      job interruption rate, 1/s (sum over GPUs, nodes, racks)  ``failure_rate_per_s``
M      mean time between job interruptions, s = 1/λ              ``mtbf_s``
δ      blocking checkpoint write time, s                         ``checkpoint_write_s``
τ      compute time between checkpoints, s                       ``checkpoint_interval_s``
R      restart time after a failure (relaunch + load), s         ``restart_s``
T_s    failure-free ("ideal") training time, s                   ``ideal_s``
=====  ======================================================  ===============================

Model (first order, Young 1974): per second of useful compute the job also spends

* δ/τ       writing checkpoints,
* τ/(2M)    redoing work lost since the last checkpoint (on average half an interval),
* R/M       restarting,

so goodput = useful / wall = 1 / (1 + δ/τ + τ/(2M) + R/M), which lies in (0, 1].
Minimising δ/τ + τ/(2M) gives Young's interval τ* = sqrt(2 δ M). The expected time lost
per failure is τ/2 + R.

Cross-check (Daly 2006, complete model for Poisson failures, counting failures during
checkpoints and restarts): T_wall = M e^{R/M} (e^{(τ+δ)/M} - 1) T_s / τ, with the
higher-order optimum τ ≈ sqrt(2δM) [1 + (1/3) sqrt(δ/2M) + (1/9) δ/(2M)] - δ for δ < 2M.

Spot capacity (``preempted``) adds preemptions at a rate λ_p = 1/M_p beside failures: each
costs a restart R/M_p, and either a checkpoint on notice δ/M_p (when the notice covers a write:
no work lost) or the rework τ/(2M_p); τ is re-optimised for the interruptions that lose work.

Start-up (launch, compilation, warm-up steps: S seconds, once per run) is added to the wall
time: W = T_s / goodput + S, so the share of the wall time that trains is
T_s / W = 1 / (1 / goodput + S / T_s) (``training_time_frac``).

The goodput waterfall (``waterfall``) follows the cluster's FLOP/s from its peak to the useful
rate, one loss at a time: kernels (model FLOP/s while computing), the pipeline bubble and
exposed communication, the step's other overheads (optimizer, host, data wait), failures and
checkpoints, start-up. Each stage is the previous one times a fraction in (0, 1]; their product
is useful / peak, the goodput fraction.

Failures are independent and memoryless (Poisson); a failure anywhere stops the whole
synchronous job. Every function broadcasts over numpy arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.spec.errors import InputError
from perfmodel.spec.reliability import CHECKPOINT_BYTES_PER_PARAM, FailureModel
from perfmodel.spec.units import SECONDS_PER_HOUR

# --- independent references, used by the tests -----------------------------------------
META_RSC1_FAILURES_PER_NODE_DAY = 6.50e-3
"""Meta RSC-1 (16k A100, 8 GPUs/node): 6.50 failures per 1000 node-days (Kokolis et al.
2025, arXiv 2410.21680, failure-model section)."""
META_RSC2_FAILURES_PER_NODE_DAY = 2.34e-3
"""Meta RSC-2 (8k A100, 8 GPUs/node): 2.34 failures per 1000 node-days (same source)."""
META_RSC_GPUS_PER_NODE = 8
BLOOM_FAILURES_PER_WEEK = (1.0, 2.0)
"""BLOOM-176B on 384 A100s (48 nodes): on average 1-2 GPU failures per week (BigScience
2022, arXiv 2211.05100, training section; quoted by Cottier et al. 2024 app. A.3)."""
BLOOM_NUM_GPUS = 384

def _arr(field: str, values, *, positive: bool) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    bad = np.isnan(arr) | ((arr <= 0) if positive else (arr < 0))
    if bad.any():
        first = arr[bad].flat[0] if arr.ndim else float(arr)
        raise InputError(field, f"must be {'> 0' if positive else '>= 0'}, got {first}")
    return arr


def _out(x):
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x


# --- failures ---------------------------------------------------------------------------
def failure_rate_per_s(num_gpus, fm: FailureModel):
    """λ = N λ_gpu + ceil(N / g_node) λ_node + ceil(N / g_rack) λ_rack, per second."""
    N = _arr("num_gpus", num_gpus, positive=True)
    per_hour = (
        N * fm.gpu_failures_per_gpu_hour
        + np.ceil(N / fm.gpus_per_node) * fm.node_failures_per_node_hour
        + np.ceil(N / fm.gpus_per_rack) * fm.rack_failures_per_rack_hour
    )
    return _out(per_hour / SECONDS_PER_HOUR)


def mtbf_s(num_gpus, fm: FailureModel):
    """M = 1/λ: mean time between job interruptions; ``inf`` when every rate is zero."""
    lam = np.asarray(failure_rate_per_s(num_gpus, fm))
    with np.errstate(divide="ignore", over="ignore"):   # tiny rates give inf, as zero does
        return _out(1.0 / lam)


def expected_interruptions(num_gpus, duration_s, fm: FailureModel):
    """λ T: expected job interruptions while ``num_gpus`` GPUs run for ``duration_s``."""
    T = _arr("duration_s", duration_s, positive=False)
    return _out(np.asarray(failure_rate_per_s(num_gpus, fm)) * T)


# --- checkpoint and restart -------------------------------------------------------------
def checkpoint_state_bytes(num_params, bytes_per_param: float = CHECKPOINT_BYTES_PER_PARAM):
    """Unique bytes in one checkpoint: ``num_params * bytes_per_param`` (14 B by default)."""
    return _out(_arr("num_params", num_params, positive=True) * bytes_per_param)


def _io_time_s(state_bytes, num_gpus, storage_bytes_per_s, per_gpu_bytes_per_s):
    S = _arr("model_state_bytes", state_bytes, positive=True)
    N = _arr("num_gpus", num_gpus, positive=True)
    cap = np.inf if per_gpu_bytes_per_s is None else per_gpu_bytes_per_s
    return _out(S / np.minimum(storage_bytes_per_s, N * cap))


def checkpoint_write_s(
    model_state_bytes, num_gpus, storage_bandwidth_bytes_per_s, per_gpu_bandwidth_bytes_per_s=None
):
    """δ = S / min(B_storage, N b_gpu): the job's GPUs write one copy of the state in parallel."""
    S, N = model_state_bytes, num_gpus
    return _io_time_s(S, N, storage_bandwidth_bytes_per_s, per_gpu_bandwidth_bytes_per_s)


def restart_time_s(model_state_bytes, num_gpus, fm: FailureModel):
    """R = relaunch + reading the checkpoint back: restart_s + S / min(B_read, N b_gpu)."""
    S, N = model_state_bytes, num_gpus
    load_s = _io_time_s(S, N, fm.storage_read_bandwidth_bytes_per_s, fm.per_gpu_io_bandwidth_bytes_per_s)
    return _out(fm.restart_s + np.asarray(load_s))


# --- checkpoint interval ----------------------------------------------------------------
def young_daly_interval_s(checkpoint_write_s, mtbf_s):
    """τ* = sqrt(2 δ M) (Young 1974, "A first order approximation to the optimum checkpoint
    interval", CACM 17(9); Daly 2006 first-order model)."""
    d = _arr("checkpoint_write_s", checkpoint_write_s, positive=True)
    M = _arr("mtbf_s", mtbf_s, positive=True)
    return _out(np.sqrt(2 * d) * np.sqrt(M))   # not sqrt(2 d M): 2 d M overflows for rare failures


def daly_interval_s(checkpoint_write_s, mtbf_s):
    """Daly 2006 ("A higher order estimate of the optimum checkpoint interval for restart
    dumps", FGCS 22(3)) perturbation solution: sqrt(2δM)[1 + sqrt(x)/3 + x/9] - δ with
    x = δ/(2M), for δ < 2M; τ = M otherwise."""
    d = _arr("checkpoint_write_s", checkpoint_write_s, positive=True)
    M = _arr("mtbf_s", mtbf_s, positive=True)
    x = d / (2 * M)
    higher_order = np.sqrt(2 * d) * np.sqrt(M) * (1 + np.sqrt(x) / 3 + x / 9) - d
    return _out(np.where(d < 2 * M, higher_order, M))


def daly_wall_time_s(ideal_s, checkpoint_interval_s, checkpoint_write_s, restart_s, mtbf_s):
    """Expected wall time under Poisson failures (Daly 2006 complete model):
    M e^{R/M} (e^{(τ+δ)/M} - 1) T_s / τ. An independent check of the first-order goodput."""
    T = _arr("ideal_s", ideal_s, positive=False)
    tau = _arr("checkpoint_interval_s", checkpoint_interval_s, positive=True)
    d = _arr("checkpoint_write_s", checkpoint_write_s, positive=False)
    R = _arr("restart_s", restart_s, positive=False)
    M = _arr("mtbf_s", mtbf_s, positive=True)
    return _out(M * np.exp(R / M) * np.expm1((tau + d) / M) * T / tau)


# --- goodput ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Goodput:
    """First-order goodput (Young 1974) from its four times; everything else is derived."""

    checkpoint_interval_s: float | np.ndarray
    checkpoint_write_s: float | np.ndarray
    restart_s: float | np.ndarray
    mtbf_s: float | np.ndarray
    preemption_mtbf_s: float | np.ndarray = float("inf")
    """M_p: mean time between preemptions of spot capacity (``preempted``); inf: none."""
    notice_saves_work: bool = False
    """The preemption notice covers a checkpoint write: each preemption costs δ + R, no rework."""

    def _per_failure(self, seconds, M=None):
        M = np.asarray(self.mtbf_s if M is None else M, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return _out(np.where(np.isinf(M), 0.0, np.asarray(seconds, dtype=float) / M))

    @property
    def checkpoint_overhead(self):
        """δ/τ: checkpoint-writing seconds per second of useful compute (+ δ/M_p: a checkpoint on
        each preemption's notice, where the notice covers it)."""
        tau = np.asarray(self.checkpoint_interval_s, dtype=float)
        with np.errstate(invalid="ignore", divide="ignore"):
            periodic = np.where(np.isinf(tau), 0.0, np.asarray(self.checkpoint_write_s) / tau)
        on_notice = self._per_failure(self.checkpoint_write_s, self.preemption_mtbf_s) if self.notice_saves_work else 0
        return _out(periodic + np.asarray(on_notice))

    @property
    def rework_overhead(self):
        """τ/(2M) (+ τ/(2M_p) when the notice cannot save the work): recomputed seconds (work lost
        since the last checkpoint) per useful second."""
        half = np.asarray(self.checkpoint_interval_s, dtype=float) / 2
        lost_p = 0 if self.notice_saves_work else self._per_failure(half, self.preemption_mtbf_s)
        return _out(np.asarray(self._per_failure(half)) + np.asarray(lost_p))

    @property
    def restart_overhead(self):
        """R/M + R/M_p: restart seconds per useful second."""
        return _out(np.asarray(self._per_failure(self.restart_s))
                    + np.asarray(self._per_failure(self.restart_s, self.preemption_mtbf_s)))

    @property
    def total_overhead(self):
        parts = (self.checkpoint_overhead, self.rework_overhead, self.restart_overhead)
        return _out(sum(np.asarray(p) for p in parts))

    @property
    def fraction(self):
        """Goodput = useful / wall time = 1 / (1 + total overhead), in (0, 1]."""
        return _out(1.0 / (1.0 + np.asarray(self.total_overhead)))

    @property
    def lost_time_per_failure_s(self):
        """Expected wall time lost per failure: τ/2 (rework) + R (restart)."""
        return _out(np.asarray(self.checkpoint_interval_s, dtype=float) / 2 + np.asarray(self.restart_s))

    def wall_time_fractions(self) -> dict[str, float | np.ndarray]:
        """Shares of wall time (they sum to 1): compute, checkpoint, rework, restart."""
        g = np.asarray(self.fraction)
        return {
            "compute": _out(g),
            "checkpoint": _out(g * np.asarray(self.checkpoint_overhead)),
            "rework": _out(g * np.asarray(self.rework_overhead)),
            "restart": _out(g * np.asarray(self.restart_overhead)),
        }


def goodput_fraction(
    num_gpus, model_state_bytes, fm: FailureModel | None = None, checkpoint_interval_s=None
) -> Goodput:
    """Goodput of a job on ``num_gpus`` GPUs checkpointing ``model_state_bytes``.

    δ from :func:`checkpoint_write_s`, R from :func:`restart_time_s`, M from :func:`mtbf_s`;
    τ is ``checkpoint_interval_s``, else the failure model's, else Young's sqrt(2δM).
    """
    fm = fm or FailureModel()
    S, N = model_state_bytes, num_gpus
    d = checkpoint_write_s(S, N, fm.storage_write_bandwidth_bytes_per_s, fm.per_gpu_io_bandwidth_bytes_per_s)
    M = mtbf_s(num_gpus, fm)
    if checkpoint_interval_s is None:
        checkpoint_interval_s = fm.checkpoint_interval_s
    if checkpoint_interval_s is None:
        tau = young_daly_interval_s(d, M)
    else:
        tau = _out(_arr("checkpoint_interval_s", checkpoint_interval_s, positive=True) + 0 * np.asarray(d))
    return Goodput(
        checkpoint_interval_s=tau,
        checkpoint_write_s=d,
        restart_s=restart_time_s(model_state_bytes, num_gpus, fm),
        mtbf_s=M,
    )


def effective_time_to_train_s(ideal_s, goodput: Goodput):
    """Wall time = failure-free time / goodput fraction."""
    T = _arr("ideal_s", ideal_s, positive=False)
    return _out(T / np.asarray(goodput.fraction))


def job_goodput(num_gpus, num_params, fm: FailureModel) -> Goodput:
    """Goodput of a job of ``num_params`` parameters: its checkpoint holds
    ``fm.checkpoint_bytes_per_param`` bytes per parameter (weights and optimizer state)."""
    return goodput_fraction(num_gpus, checkpoint_state_bytes(num_params, fm.checkpoint_bytes_per_param), fm)


# --- spot preemption -------------------------------------------------------------------
def preemption_rate_per_s(num_gpus, gpus_per_node: int, preemptions_per_node_hour: float):
    """λ_p = ceil(N / g_node) x preemptions per node-hour / 3600: any node taken stops the job."""
    N = _arr("num_gpus", num_gpus, positive=True)
    return _out(np.ceil(N / gpus_per_node) * preemptions_per_node_hour / SECONDS_PER_HOUR)


def preempted(goodput: Goodput, num_gpus, gpus_per_node: int, preemptions_per_node_hour: float, notice_s: float,
              fixed_interval_s) -> Goodput:
    """``goodput`` on spot capacity, preempted at λ_p (``preemption_rate_per_s``) beside failures.

    Each preemption costs a restart R. When the notice covers a checkpoint write (notice >= δ)
    the job checkpoints then and loses no work (δ per preemption); otherwise it loses τ/2 as on a
    failure. The interval is re-optimised for the interruptions that lose work (Young 1974):
    τ* = sqrt(2 δ M_r), 1/M_r = 1/M + (0 if the notice saves the work else 1/M_p); a fixed
    interval (``fixed_interval_s``, not None) is kept."""
    lam = np.asarray(preemption_rate_per_s(num_gpus, gpus_per_node, preemptions_per_node_hour))
    with np.errstate(divide="ignore", over="ignore"):
        Mp = _out(1.0 / lam)
    d = np.asarray(goodput.checkpoint_write_s, dtype=float)
    saves = bool(np.all(notice_s >= d))
    tau = goodput.checkpoint_interval_s
    if fixed_interval_s is None:
        with np.errstate(divide="ignore"):
            inv_M = 1.0 / np.asarray(goodput.mtbf_s, dtype=float) + (0.0 if saves else lam)
            M_r = np.where(inv_M > 0, 1.0 / np.where(inv_M > 0, inv_M, 1.0), np.inf)
        tau = young_daly_interval_s(d, M_r)
    return Goodput(checkpoint_interval_s=tau, checkpoint_write_s=goodput.checkpoint_write_s,
                   restart_s=goodput.restart_s, mtbf_s=goodput.mtbf_s, preemption_mtbf_s=Mp, notice_saves_work=saves)


# --- start-up and the run ---------------------------------------------------------------
def startup_s(launch_s: float, compile_s: float, warmup_steps: int, step_time_s):
    """S = launch + compilation + warm-up steps x step time: once per run."""
    return _out(launch_s + compile_s + warmup_steps * np.asarray(step_time_s, dtype=float))


def training_time_frac(ideal_s, goodput_frac, startup_time_s):
    """T_s / W with W = T_s / g + S: the share of the run's wall time spent training. With no
    training time (``ideal_s`` 0) there is no run to amortise start-up over, so it is g."""
    T = _arr("ideal_s", ideal_s, positive=False)
    g = np.asarray(goodput_frac, dtype=float)
    S = _arr("startup_s", startup_time_s, positive=False)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _out(np.where(T > 0, T / (T / g + S), g))


# --- waterfall --------------------------------------------------------------------------
WATERFALL_STAGES = ("peak", "achieved", "after_bubble_and_communication", "after_step_overheads",
                    "after_failures_and_checkpoints", "useful")
"""Stages of the goodput waterfall, from the cluster's peak to its useful FLOP/s."""


def waterfall(peak_flop_per_s, model_flop_per_step, compute_s, stall_s, overhead_s, failure_frac, startup_frac):
    """The cluster's FLOP/s at each of ``WATERFALL_STAGES``:

    peak                             N x dense peak of the precision
    achieved                         F / t_c            (model FLOPs over the kernel time)
    after_bubble_and_communication   F / (t_c + t_x)    (pipeline bubble, exposed communication)
    after_step_overheads             F / (t_c + t_x + t_o) = MFU x peak (optimizer, host, data)
    after_failures_and_checkpoints   x goodput of failures, checkpoints and restarts
    useful                           x the share of the run left after start-up

    with F the model FLOPs of one step over all GPUs. Returns {stage: FLOP/s}."""
    F = np.asarray(model_flop_per_step, dtype=float)
    t_c, t_x, t_o = (np.asarray(t, dtype=float) for t in (compute_s, stall_s, overhead_s))
    after_overheads = F / (t_c + t_x + t_o)
    after_failures = after_overheads * np.asarray(failure_frac, dtype=float)
    levels = (peak_flop_per_s, F / t_c, F / (t_c + t_x), after_overheads, after_failures,
              after_failures * np.asarray(startup_frac, dtype=float))
    return {stage: _out(level) for stage, level in zip(WATERFALL_STAGES, levels)}
