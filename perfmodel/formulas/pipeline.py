"""Pipeline schedules: the bubble, the activations in flight and the parameters of each rank.

========  ====================================================================
p         pipeline ranks (pp)
v         model chunks per rank (vpp): interleaved, or 2 for the V schedules
m         micro-batches per step per pipeline = global_batch / (micro_batch * dp)
t_i       forward + backward time of one micro-batch on rank i (all its chunks)
F, B, W   the parts of t (one rank, one micro-batch): forward; input-gradient backward
          (with recompute and the backward's exposed communication); weight-gradient
          backward (``perfmodel.formulas.compute.BlockTime.wgrad_s``). t = F + B + W.
========  ====================================================================

Steady state runs at the slowest rank: m * max_i t_i. The rest of the step is the bubble.
For p equal ranks each schedule's bubble is a closed form (``bubble_closed_form_s``), held with
its other properties in the schedule's record (``perfmodel.spec.schedules``):

===========  ===============================  ==========  ======  =====================================
schedule     bubble                           in flight   params  source
===========  ===============================  ==========  ======  =====================================
1f1b         (p - 1)(F + B + W)               p           1x      Narayanan et al. 2021 sec. 2.2
interleaved  (p - 1)(F + B + W) / v           p(1 + (p-1)/(pv))  1x  ibid.; Korthikanti et al. 2022 4.2.3
zb-h1        (p - 1)(F + B - W)               p           1x      Qi et al. 2023 (arXiv 2401.10241) table 2
zb-h2        (p - 1)(F + B - 2W), >= 0        2p - 1      1x      ibid., table 2
zb-v         (p - 1)(max(F, B) - W), >= 0     p           1x      Qi et al. 2024 (arXiv 2405.15362); derived
dualpipe     (p/2 - 1)(F + 2B - W)            p + 1       2x      DeepSeek-V3 report (arXiv 2412.19437) table 2
dualpipe-v   (p - 1)(F + 2B - W) / 2          p + 1/2     1x      DualPipe README table (PP = 2p stages)
===========  ===============================  ==========  ======  =====================================

"in flight": micro-batch activations of one rank's l/p layers held at the peak by the fullest
rank. The zero-bubble papers split the backward into B and W (Qi et al. 2023 sec. 2, their
table 1: W is the weight GEMMs' backward alone) and count a rank's idle time between its
first and last operation (their optimizer post-validation, sec. 4, lets ranks start and end a
step apart). Notes on each form:

- ZB-H1 and ZB-H2: the table's forms are the exact bubble of their handcrafted orders, which
  ``perfmodel.formulas.schedule_orders`` reproduces, wherever B >= F >= W (transformer layers:
  Qi et al. 2023 table 1) and m >= p (ZB-H1) or m >= 2p - 1 (ZB-H2).
- ZB-V: the paper states zero bubble when F = B = W (1F1B's memory, two chunks per rank in a
  V; PyTorch's ScheduleZBVZeroBubble documents the same condition). Its order's bubble is
  (p - 1)(max(F, B) - W) wherever B >= F >= W and m >= 2p - 1 (each V chunk is half a rank;
  the first rank waits max(F, B) - W per rank below it): zero when F = B = W.
- DualPipe / DualPipeV: the tables write (PP/2 - 1)(F&B + B - 3W) with B the full backward
  and F&B a forward chunk overlapped with a backward chunk; the overlapped pair computes
  F + B + W (the communication hides, not the compute), which gives the forms above. The
  repository's step order (dualpipe.py steps 1-8) has exactly this bubble when F = B; for
  B > F it has less (DualPipe: by up to (p/2 - 1)(B - F)), so the model keeps the README's.

Uneven ranks (first and last stages carry the embedding and the head, or an explicit
``pipeline_layout``): fill and drain take every rank but the slowest once, so the bubble is
(sum_i t_i - max_i t_i) times the schedule's bubble per rank, the closed form over
(p - 1) t (``bubble_over_fill``): 1 for 1F1B, 1/v interleaved.

Transfers of fill and drain cannot overlap anything: the first micro-batch's forward crosses
each rank boundary of its path in turn, so its hops lie on the critical path each way (p * v -
1 for the linear schedules; 2p - 2 for a V, whose turn stays on one rank; p - 1 per direction
for DualPipe, whose two directions fill at once). DualPipe and DualPipeV pair every
steady-state forward chunk with a backward chunk of another micro-batch and run one's
communication under the other's compute (DeepSeek-V3 report sec. 3.2.1): their pipeline sends
and expert-parallel all-to-alls are overlapped whatever the overlap settings (their records' ``paired``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from perfmodel.formulas.scalars import floats, maximum, minimum, where
from perfmodel.spec.schedules import SCHEDULES, schedule as schedule_record

ONE_F_ONE_B, INTERLEAVED = 0, 1
"""The codes of Megatron-Core's two schedules, the first two records of
``perfmodel.spec.schedules.SCHEDULES``: what a layout that names no schedule runs."""


def schedule_code(name: str) -> int:
    """A layout's ``schedule`` column holds the index of its schedule's record in ``SCHEDULES``."""
    schedule_record(name)
    return list(SCHEDULES).index(name)


def schedule_name(code: int) -> str:
    return list(SCHEDULES)[int(code)]


def schedule_of(code: int):
    """The record (``perfmodel.spec.schedules.Schedule``) of a schedule code."""
    return list(SCHEDULES.values())[int(code)]


@lru_cache(maxsize=64)
def _column(records: tuple, field: str) -> np.ndarray:
    return np.array([getattr(r, field) for r in records])


def schedule_property(schedule_codes, field: str) -> np.ndarray:
    """Per layout, the ``field`` of its schedule's record: the one place where the engine's
    integer codes become the records' properties."""
    return _column(tuple(SCHEDULES.values()), field)[np.asarray(schedule_codes)]


def runs_on_chunks(schedule, vpp) -> np.ndarray:
    """Whether a schedule runs a layout's vpp model chunks per rank (its record's
    ``chunks_per_rank``: one, two in a V, or several for interleaved 1F1B)."""
    s, v = np.asarray(schedule), np.asarray(vpp)
    chunks = schedule_property(s, "chunks_per_rank")
    several = np.equal(chunks, None)
    return np.where(several, v > 1, v == np.where(several, 0, chunks).astype(np.int64))


def default_schedule_code(vpp):
    """The schedule of a layout that names none: 1f1b, or interleaved when vpp > 1
    (``perfmodel.spec.schedules.default_schedule``)."""
    return np.where(np.asarray(vpp) > 1, INTERLEAVED, ONE_F_ONE_B)


def only_defaults(schedule) -> bool:
    """True when every layout runs 1F1B or interleaving (the formulas then take their short way)."""
    if isinstance(schedule, int):   # a one_row's code
        return schedule <= INTERLEAVED
    s = np.asarray(schedule)
    return bool((s <= INTERLEAVED).all())


@dataclass(frozen=True)
class StageTimes:
    """Per-micro-batch times of the three representative stages (arrays over layouts)."""

    first_s: np.ndarray
    middle_s: np.ndarray
    last_s: np.ndarray


def slowest_stage_s(st: StageTimes, pp):
    return where(pp == 1, st.first_s, maximum(maximum(st.first_s, st.last_s), where(pp > 2, st.middle_s, 0.0)))


def sum_stages_s(st: StageTimes, pp):
    return where(pp == 1, st.first_s, st.first_s + st.last_s + maximum(pp - 2, 0) * st.middle_s)


def bubble_closed_form_s(schedule, pp, vpp, fwd_s, bwd_input_s, bwd_weight_s):
    """The bubble of one step with p equal ranks (the module's table; each schedule's record's
    ``bubble``), per schedule code; 0 without a pipeline (p = 1)."""
    p, v = np.asarray(pp, dtype=float), np.asarray(vpp, dtype=float)
    F, B, W = (np.asarray(x, dtype=float) for x in (fwd_s, bwd_input_s, bwd_weight_s))
    s = np.asarray(schedule)
    records = list(SCHEDULES.values())
    return np.where(p > 1, np.select([s == code for code in range(len(records))],
                                     [r.bubble(p, v, F, B, W) for r in records]), 0.0)


def bubble_over_fill(schedule, pp, vpp, fwd_s, bwd_input_s, bwd_weight_s):
    """The bubble per unit of fill and drain, the closed form over (p - 1)(F + B + W): what
    multiplies sum_i t_i - max_i t_i for uneven ranks (0 where p = 1)."""
    t = np.asarray(fwd_s) + np.asarray(bwd_input_s) + np.asarray(bwd_weight_s)
    fill = (np.asarray(pp, dtype=float) - 1) * t
    closed = bubble_closed_form_s(schedule, pp, vpp, fwd_s, bwd_input_s, bwd_weight_s)
    return np.where(fill > 0, closed / np.where(fill > 0, fill, 1.0), 0.0)


def bubble_from_stages_s(sum_s, max_s, vpp, schedule=None, pp=None, split=None):
    """Fill and drain: every stage but the slowest once, (sum - max), in chunks of 1/v for
    1F1B and interleaving; times ``bubble_over_fill`` for the other schedules, whose F, B, W
    shares ``split`` = (F, B, W) gives."""
    base = (floats(sum_s) - floats(max_s)) / floats(vpp)
    if schedule is None:
        return base
    if only_defaults(schedule):
        return base
    own = schedule_property(schedule, "megatron_order")
    k = bubble_over_fill(schedule, pp, vpp, *split)
    return np.where(own, base, (np.asarray(sum_s) - np.asarray(max_s)) * k)


def bubble_s(st: StageTimes, pp, vpp):
    """1F1B or interleaved bubble of uneven stages: (sum - max) / v."""
    return bubble_from_stages_s(sum_stages_s(st, pp), slowest_stage_s(st, pp), vpp)


def bubble_fraction(pp, vpp, num_mb):
    """Ideal bubble fraction for equal stages, (p - 1) / (v * m)."""
    return (np.asarray(pp) - 1.0) / (np.asarray(vpp) * np.asarray(num_mb))


def combined_1f1b_paired_frac(pp, vpp, num_mb) -> np.ndarray:
    """Share of a rank's forward (and of its backward) chunk passes that Megatron-Core's combined
    1F1B (``overlap_moe_expert_parallel_comm``) runs paired with a pass of another micro-batch,
    so that one's all-to-alls hide behind the other's compute: the steady state only. The warmup
    forwards and the cooldown backwards run alone. Interleaved (the overlap needs virtual stages
    when p > 1, transformer_config.py), rank 0 warms up with 2(p - 1) + (v - 1)p chunks plus one
    more micro-batch forward that the overlap schedules before the 1F1B steps
    (schedules.py ``get_pp_rank_microbatches``, Megatron-Core dev 0.15.0 0d8e071, the 25.11
    container's, and core_v0.15.0 to 0.18.0); without pipelining the first forward and the last
    backward run alone (``combined_1f1b_schedule_for_no_pipelining``). Of the v m passes each way."""
    unpaired = where(pp > 1, 2 * (pp - 1) + (vpp - 1) * pp + 1, 1)
    paired = 1.0 - unpaired / (vpp * num_mb)
    return where(paired > 0.0, paired, 0.0)


def chunks_in_flight(rank, pp, vpp, num_mb, schedule) -> np.ndarray:
    """Micro-batch x model-chunk activations a pipeline rank holds at its peak (chunks of
    l / (p v) layers; a micro-batch's activations are freed by its input-gradient backward).

    1F1B and ZB-H1: rank r warms up with p - r - 1 forwards and holds p - r (Narayanan et al.
    2021 sec. 2.2; Qi et al. 2023 table 2, p M_B). Interleaved: 2(p - r - 1) + (v - 1)p + 1
    chunks of l/(pv) layers (Megatron-LM schedules); on rank 0 that is p * (1 + (p - 1)/(p v))
    stages' worth, the factor of Korthikanti et al. 2022, sec. 4.2.3. ZB-H2: 2(p - r) - 1
    (ibid., (2p - 1) M_B on the first rank). ZB-V: 2p chunks of l/(2p) layers on every rank,
    1F1B's p M_B (Qi et al. 2024; the V fills every rank to the same peak). DualPipe: p + 1
    stages on every rank; DualPipeV: 2p + 1 chunks (DeepSeek-V3 table 2 and the DualPipe
    README: PP + 1). Never more than the m * v chunks a step has.
    """
    s = np.asarray(schedule)
    if only_defaults(s):
        one_f_one_b = pp - rank
        interleaved = 2 * (pp - rank - 1) + (vpp - 1) * pp + 1
        return minimum(where(vpp > 1, interleaved, one_f_one_b), num_mb * vpp)
    records = list(SCHEDULES.values())
    held = np.select([s == code for code in range(len(records))], [r.in_flight(rank, pp, vpp) for r in records])
    return minimum(held, num_mb * vpp)


def parameter_copies(schedule) -> np.ndarray:
    """Stages of parameters a rank holds per stage it computes (the record's
    ``parameter_copies``: 2 under DualPipe, else 1)."""
    return schedule_property(schedule, "parameter_copies")


def fill_drain_transfers(pp, vpp, schedule):
    """Activation sends on the critical path of fill and drain, both ways: twice the record's
    ``fill_drain_hops`` (p * v - 1 for the linear schedules, 2p - 2 for a V, whose turn stays on
    one rank, p - 1 for DualPipe); 0 at p = 1."""
    linear = where(pp > 1, 2 * (pp * vpp - 1), 0)
    if only_defaults(schedule):
        return linear
    pp, vpp, s = np.asarray(pp), np.asarray(vpp), np.asarray(schedule)
    records = list(SCHEDULES.values())
    hops = np.select([s == code for code in range(len(records))], [r.fill_drain_hops(pp, vpp) for r in records])
    return np.where(pp > 1, 2 * hops, 0)


def drain_reduction_s(reduce_s, copy_s, units_per_chunk, pp, vpp):
    """Gradient reduction run stage by stage in the drain (``perfmodel.spec.pp_grad_reduce``,
    stage_drain): each of the p v virtual stages, after its last backward, copies each of its u
    groups' gradients into a reduce-scatter input and reduce-scatters it, the compute stream
    waiting for each group's collective before the next copy, and only then sends its input
    gradient upstream. ``reduce_s`` and ``copy_s`` are one GPU's, for its v chunks; the last
    group's reduce-scatter runs beside the send, except on the first stage, where the step ends
    with it:

        T = p v (c/v + r/v (1 - 1/u)) + r / (v u)
    """
    u = maximum(floats(units_per_chunk), 1.0)
    n_chunks = pp * vpp
    per_chunk_r, per_chunk_c = reduce_s / vpp, copy_s / vpp
    return n_chunks * (per_chunk_c + per_chunk_r * (1.0 - 1.0 / u)) + per_chunk_r / u
