"""Pipeline schedules: one frozen record per schedule, looked up by name.

A scenario names its schedule (``parallelism.pipeline_schedule``); everything the code asks of
a schedule is a field of its ``Schedule`` here: how many model chunks a rank runs, whether its
steady state pairs a forward with a backward, the parameter copies a rank keeps, the
micro-batches it needs, and its two closed forms (the bubble and the activations in flight,
``perfmodel.formulas.pipeline``, whose docstring tabulates them with their sources). The
engine's layout arrays hold a schedule as its index in ``SCHEDULES``
(``perfmodel.formulas.pipeline.schedule_code``); the per-code arrays are derived from these
records there and nowhere else. Adding a schedule is one record here (and its operation order
in ``perfmodel.formulas.schedule_orders``, for the timeline to draw it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from perfmodel.spec.errors import InputError

V_CHUNKS_PER_RANK = 2
"""Two chunks per rank in a V: chunk 0 is stage r, chunk 1 stage 2p - 1 - r (Qi et al. 2024)."""
DUALPIPE_PARAMETER_COPIES = 2
"""DualPipe keeps two stages on every rank, stage r of one direction and stage p - 1 - r of
the other (DeepSeek-V3 report table 2: parameters per device 2x)."""


@dataclass(frozen=True)
class Schedule:
    """One pipeline schedule: every property the code asks of it.

    The closed forms take numpy arrays: ``p`` pipeline ranks, ``v`` chunks per rank, ``r`` a
    rank, ``F``, ``B``, ``W`` one rank's forward, input-gradient and weight-gradient backward
    times of one micro-batch (``perfmodel.formulas.pipeline``'s notation).
    """

    name: str
    source: str
    bubble: Callable
    """``bubble(p, v, F, B, W)``: the bubble of one step with p equal ranks (p > 1)."""
    in_flight: Callable
    """``in_flight(r, p, v)``: micro-batch x chunk activations rank r holds at its peak."""
    fill_drain_hops: Callable
    """``fill_drain_hops(p, v)``: activation sends on the critical path of the fill, one way."""
    chunks_per_rank: int | None = 1
    """Model chunks a rank runs (vpp); None = several (vpp > 1), as interleaved 1F1B."""
    v_shaped: bool = False
    """Two chunks per rank in a V (stage r and 2p - 1 - r): places its stages in its own order."""
    bidirectional: bool = False
    """Micro-batches enter from both ends (DualPipe): rank r runs stage r and stage p - 1 - r;
    it needs an even pp and an even number of micro-batches (half each way)."""
    paired: bool = False
    """Overlaps a forward chunk with another micro-batch's backward chunk, hiding the pipeline
    sends and expert all-to-alls whatever the overlap settings (DeepSeek-V3 report 3.2.1)."""
    parameter_copies: int = 1
    """Stages of parameters a rank holds per stage it computes."""
    megatron_order: bool = False
    """Megatron-Core's 1F1B family: what a layout naming no schedule runs; its bubble is the
    stages' fill and drain, (sum - max) / v, and it runs without a pipeline too."""
    min_micro_batches_per_pp: int = 0
    min_micro_batches_offset: int = 1
    """The schedule needs at least per_pp * pp + offset micro-batches (pp > 1)."""
    micro_batches_multiple_of_pp: bool = False
    """Micro-batches must be a multiple of pp (Megatron-Core's interleaved schedule)."""

    def min_micro_batches(self, pp):
        """The micro-batches this schedule's order needs at ``pp`` ranks."""
        return self.min_micro_batches_per_pp * pp + self.min_micro_batches_offset

    @property
    def first_and_last_on_one_rank(self) -> bool:
        """Rank 0 holds the first and the last stage (a V, or DualPipe's mirrored stages)."""
        return self.v_shaped or self.bidirectional


def _maximum(a, b):
    """Element-wise maximum (numpy, imported when a closed form is first evaluated: the CLI
    reads the names without it)."""
    import numpy as np
    return np.maximum(a, b)


def _linear_hops(p, v):
    return p * v - 1


SCHEDULES: dict[str, Schedule] = {s.name: s for s in (
    Schedule("1f1b", "Narayanan et al. 2021 sec. 2.2",
             bubble=lambda p, v, F, B, W: (p - 1) * (F + B + W),
             in_flight=lambda r, p, v: p - r, fill_drain_hops=_linear_hops, megatron_order=True),
    Schedule("interleaved", "Narayanan et al. 2021; Korthikanti et al. 2022 sec. 4.2.3",
             bubble=lambda p, v, F, B, W: (p - 1) * (F + B + W) / v,
             in_flight=lambda r, p, v: 2 * (p - r - 1) + (v - 1) * p + 1, fill_drain_hops=_linear_hops,
             chunks_per_rank=None, megatron_order=True, micro_batches_multiple_of_pp=True),
    Schedule("zb-h1", "Qi et al. 2023 (arXiv 2401.10241) table 2",
             bubble=lambda p, v, F, B, W: (p - 1) * (F + B - W),
             in_flight=lambda r, p, v: p - r, fill_drain_hops=_linear_hops,
             min_micro_batches_per_pp=1, min_micro_batches_offset=0),
    Schedule("zb-h2", "Qi et al. 2023 (arXiv 2401.10241) table 2",
             bubble=lambda p, v, F, B, W: (p - 1) * _maximum(F + B - 2 * W, 0.0),
             in_flight=lambda r, p, v: 2 * (p - r) - 1, fill_drain_hops=_linear_hops,
             min_micro_batches_per_pp=2, min_micro_batches_offset=-1),
    Schedule("zb-v", "Qi et al. 2024 (arXiv 2405.15362); bubble derived (perfmodel.formulas.pipeline)",
             bubble=lambda p, v, F, B, W: (p - 1) * _maximum(_maximum(F, B) - W, 0.0),
             in_flight=lambda r, p, v: V_CHUNKS_PER_RANK * p, fill_drain_hops=lambda p, v: 2 * p - 2,
             chunks_per_rank=V_CHUNKS_PER_RANK, v_shaped=True,
             min_micro_batches_per_pp=2, min_micro_batches_offset=-1),
    Schedule("dualpipe", "DeepSeek-V3 report (arXiv 2412.19437) table 2; github deepseek-ai/DualPipe",
             bubble=lambda p, v, F, B, W: (p / 2 - 1) * (F + 2 * B - W),
             in_flight=lambda r, p, v: p + 1, fill_drain_hops=lambda p, v: p - 1,
             bidirectional=True, paired=True, parameter_copies=DUALPIPE_PARAMETER_COPIES,
             min_micro_batches_per_pp=2, min_micro_batches_offset=0),
    Schedule("dualpipe-v", "DualPipe README table (PP = 2p stages)",
             bubble=lambda p, v, F, B, W: (p - 1) * (F + 2 * B - W) / V_CHUNKS_PER_RANK,
             in_flight=lambda r, p, v: V_CHUNKS_PER_RANK * p + 1, fill_drain_hops=lambda p, v: 2 * p - 2,
             chunks_per_rank=V_CHUNKS_PER_RANK, v_shaped=True, paired=True,
             min_micro_batches_per_pp=2, min_micro_batches_offset=0),
)}
"""Every schedule, by name, in the order of their codes (``schedule_names``)."""


def schedule_names() -> tuple[str, ...]:
    """The schedules' names, in code order: the choices a scenario, the CLI and the app offer."""
    return tuple(SCHEDULES)


def schedule(name: str) -> Schedule:
    """The record of schedule ``name``; a one-line InputError for an unknown name."""
    try:
        return SCHEDULES[name]
    except (KeyError, TypeError):
        raise InputError("parallelism.pipeline_schedule",
                         f"{name!r} is not one of {', '.join(SCHEDULES)}") from None


def check_schedule_name(name: str) -> str:
    """Pydantic validator of a schedule's name (ValueError for pydantic to report)."""
    if name not in SCHEDULES:
        raise ValueError(f"{name!r} is not one of {', '.join(SCHEDULES)}")
    return name


def default_schedule(vpp: int) -> str:
    """The schedule of a scenario that names none: 1f1b, or interleaved when vpp > 1
    (Megatron-Core picks the interleaved schedule whenever a rank holds several chunks)."""
    return "interleaved" if vpp > 1 else "1f1b"
