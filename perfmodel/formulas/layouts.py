"""A batch of parallel layouts as numpy arrays, so one code path serves ``predict`` (a batch
of one) and ``search`` (thousands of candidates at once).

Every field is an integer (or boolean) array of the same shape. Physical models take a
``Layouts`` and broadcast; they never loop over candidates.

``perfmodel.engine.distinct`` works a function of a batch out once per distinct shape.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np

from perfmodel.formulas.pipeline import default_schedule_code


def data_parallel_size(num_gpus, tp, pp, cp):
    """dp = N / (tp pp cp): the data-parallel replicas of a layout, at least 1 (the rules
    reject a model-parallel size that does not divide N)."""
    return np.maximum(np.asarray(num_gpus) // (np.asarray(tp) * pp * cp), 1)


def micro_batches(global_batch_size, mbs, dp):
    """m = B / (b dp): micro-batches per pipeline per step (Narayanan et al. 2021 sec. 2.2)."""
    return np.asarray(global_batch_size) // (np.asarray(mbs) * dp)


def expert_data_parallel_size(dp, cp, tp, ep, etp):
    """The expert data-parallel group: dp * cp * tp ranks re-split as ep * etp * edp
    (Megatron-Core's expert process groups), at least 1."""
    return np.maximum(np.asarray(dp) * cp * tp // (np.asarray(ep) * etp), 1)


@dataclass(frozen=True)
class Layouts:
    tp: np.ndarray
    pp: np.ndarray
    vpp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    sp: np.ndarray
    """bool: sequence parallelism on."""
    zero_stage: np.ndarray
    mbs: np.ndarray
    """micro_batch_size"""
    dp: np.ndarray
    """data-parallel replicas (``data_parallel_size``)"""
    num_mb: np.ndarray
    """micro-batches per pipeline per step (``micro_batches``)"""
    schedule: np.ndarray
    """The pipeline schedule, as its code (``perfmodel.formulas.pipeline.schedule_code``)."""

    def __len__(self) -> int:
        return int(self.tp.shape[0]) if isinstance(self.tp, np.ndarray) else 1

    @property
    def edp(self) -> np.ndarray:
        """Expert data-parallel group size (``expert_data_parallel_size``)."""
        return expert_data_parallel_size(self.dp, self.cp, self.tp, self.ep, self.etp)

    def take(self, index) -> "Layouts":
        return Layouts(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def row(self, i: int) -> dict:
        return {f.name: getattr(self, f.name)[i].item() for f in fields(self)}

    @cached_property
    def scalars(self) -> "Layouts":
        """``one_row`` of a batch of one, worked out once per batch (its parts each ask for it)."""
        return Layouts(**self.row(0))


def one_row(L: Layouts) -> Layouts:
    """A batch of one layout with its columns as Python scalars (int, bool). A formula written with
    arithmetic operators, numpy's maximum and minimum and ``where`` runs on it on floats, which gives
    the bits it gives on one-element arrays (IEEE arithmetic is the same on both) without numpy's
    cost of about 1 us an operation; ``batch_of_one`` and ``as_rows`` turn its results back into
    arrays."""
    return L if is_row(L) else L.scalars


def is_row(L: Layouts) -> bool:
    """``L`` is a ``one_row``."""
    return not isinstance(L.tp, np.ndarray)


def layouts_from_arrays(**arrays) -> Layouts:
    """Every field as an array of one length; ``schedule`` left out is the default of each
    layout's vpp (``perfmodel.formulas.pipeline.default_schedule_code``)."""
    if "schedule" not in arrays:
        arrays = {**arrays, "schedule": default_schedule_code(arrays["vpp"])}
    arrays = {k: np.asarray(v) for k, v in arrays.items()}  # each list made an array once, not twice
    n = max(v.size for v in arrays.values())
    out = {}
    for f in fields(Layouts):
        v = arrays[f.name]
        out[f.name] = (v if v.shape == (n,) else np.broadcast_to(v, (n,))).astype(bool if f.name == "sp" else np.int64)
    return Layouts(**out)



def layouts_for(num_gpus, global_batch_size, **arrays) -> Layouts:
    """``layouts_from_arrays`` with dp and the micro-batch count worked out here, the one home
    of both, from the GPU count and the global batch."""
    dp = data_parallel_size(num_gpus, arrays["tp"], arrays["pp"], arrays["cp"])
    return layouts_from_arrays(**arrays, dp=dp, num_mb=micro_batches(global_batch_size, arrays["mbs"], dp))
