"""How a job runs beyond its parallel layout, searched as jobs of their own: the communication
overlap settings.

Each variant is the scenario's job with another software stack (``perfmodel.engine.job.Job``),
over the same layouts. A searched overlap kind takes the scenario's own value first, then the
framework's switch off (phi = 0: the collective in the critical path) and on:

====  ==========  =============================================================================
kind  on          the framework setting it stands for
====  ==========  =============================================================================
tp    None        Megatron-Core ``tp_comm_overlap`` (Transformer Engine userbuffers): chunked
                  pipelining, phi = (tp - 1) / tp (``perfmodel.spec.software.Overlap.tp``)
cp    1           ring attention sends the next K/V chunk during the current one
ep    1           Megatron-Core ``overlap_moe_expert_parallel_comm`` (batch-level overlap)
pp    1           batched isend/irecv behind the steady-state compute (``overlap_p2p_comm``)
dp    1           ``overlap_grad_reduce`` and ``overlap_param_gather``
fsdp  1           FSDP forward and backward prefetch of the next unit's all-gather
====  ==========  =============================================================================

A layout with no traffic of a kind (tp = 1 and etp = 1 for tp, cp = 1, a dense model or ep = 1
for ep, pp = 1, a data-parallel group of one for dp, ZeRO below 3 for fsdp) keeps the scenario's
value for it: another value would give it the same numbers under another name. So does a layout
whose pipeline schedule overlaps a kind itself (DualPipe and DualPipeV: pp and ep,
their records' ``paired``, ``perfmodel.spec.schedules``).

The pipeline schedule is a column of the layout (``perfmodel.engine.enumerate``), not a variant:
it changes the memory of a layout, which a search works out once for every variant.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from perfmodel.formulas import pipeline
from perfmodel.formulas.layouts import data_parallel_size, expert_data_parallel_size
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.software import Overlap

OverlapKind = Literal["tp", "cp", "ep", "pp", "dp", "fsdp"]
OVERLAP_KINDS: tuple[str, ...] = get_args(OverlapKind)
OVERLAP_OFF = 0.0
"""phi = 0: the collective runs alone, in the critical path."""
OVERLAP_ON: dict = {"tp": None, "cp": 1.0, "ep": 1.0, "pp": 1.0, "dp": 1.0, "fsdp": 1.0}
"""The value of each kind with its framework's overlap switched on (the table above)."""


@dataclass(frozen=True)
class Variant:
    """One setting of the searched dimensions beyond the layout."""

    overlap: Overlap
    changed: tuple[str, ...]
    """The overlap kinds whose value is not the scenario's own."""


def variants(own: Overlap, kinds) -> tuple[Variant, ...]:
    """Every combination of the searched ``kinds`` (the scenario's own settings first)."""
    kinds = tuple(dict.fromkeys(kinds))
    choices = [tuple(dict.fromkeys((getattr(own, k), OVERLAP_OFF, OVERLAP_ON[k]))) for k in kinds]
    out = []
    for values in itertools.product(*choices):
        update = dict(zip(kinds, values))
        changed = tuple(k for k in kinds if update[k] != getattr(own, k))
        out.append(Variant(own.model_copy(update=update) if changed else own, changed))
    return tuple(out)


def has_traffic(kind: str, cols: dict, model: ModelSpec, num_gpus: int) -> np.ndarray:
    """Where layouts (columns ``tp``, ``pp``, ``cp``, ``ep``, ``etp``, ``zero_stage`` and, where
    given, ``schedule``) send traffic of ``kind`` that its overlap setting can change."""
    tp, pp, cp, ep, etp = (np.asarray(cols[k]) for k in ("tp", "pp", "cp", "ep", "etp"))
    moe = model.moe is not None
    dp = data_parallel_size(num_gpus, tp, pp, cp)
    edp = expert_data_parallel_size(dp, cp, tp, ep, etp)
    data_parallel = (dp * cp > 1) | (moe & (edp > 1))
    paired = pipeline.schedule_property(cols["schedule"], "paired") if "schedule" in cols else np.zeros(tp.shape, bool)
    if kind == "tp":
        return (tp > 1) | (moe & (etp > 1))
    if kind == "cp":
        return cp > 1
    if kind == "ep":
        return moe & (ep > 1) & ~paired
    if kind == "pp":
        return (pp > 1) & ~paired
    if kind == "dp":
        return data_parallel
    return data_parallel & (np.asarray(cols["zero_stage"]) >= 3)


def applies(variants_: tuple[Variant, ...], cols: dict, model: ModelSpec, num_gpus: int) -> np.ndarray:
    """(variants x layouts) booleans: whether each variant is a search candidate for each layout
    (every kind it changes has traffic there)."""
    n = len(cols["tp"])
    traffic = {k: has_traffic(k, cols, model, num_gpus) for k in {k for v in variants_ for k in v.changed}}
    out = np.ones((len(variants_), n), dtype=bool)
    for i, v in enumerate(variants_):
        for k in v.changed:
            out[i] &= traffic[k]
    return out
