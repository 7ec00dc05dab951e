"""A batch of parallel layouts as numpy arrays, so one code path serves ``predict`` (a batch
of one) and ``search`` (thousands of candidates at once).

Every field is an integer (or boolean) array of the same shape. Physical models take a
``Layouts`` and broadcast; they never loop over candidates.

``perfmodel.formulas.distinct`` works a function of a batch out once per distinct shape.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from perfmodel.formulas.pipeline import default_schedule_code


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
    num_mb: np.ndarray
    """micro-batches per pipeline per step"""
    schedule: np.ndarray
    """The pipeline schedule, as its code (``perfmodel.formulas.pipeline.schedule_code``)."""

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    def take(self, index) -> "Layouts":
        return Layouts(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def row(self, i: int) -> dict:
        return {f.name: getattr(self, f.name)[i].item() for f in fields(self)}


def layouts_from_arrays(**arrays) -> Layouts:
    """Every field as an array of one length; ``schedule`` left out is the default of each
    layout's vpp (``perfmodel.formulas.pipeline.default_schedule_code``)."""
    n = max(np.size(v) for v in arrays.values())
    if "schedule" not in arrays:
        arrays = {**arrays, "schedule": default_schedule_code(arrays["vpp"])}
    out = {}
    for f in fields(Layouts):
        v = np.asarray(arrays[f.name])
        out[f.name] = np.broadcast_to(v, (n,)).astype(bool if f.name == "sp" else np.int64)
    return Layouts(**out)

