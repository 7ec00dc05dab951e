"""Every structurally possible parallel layout of a job, as integer arrays built by successive
Cartesian products (no Python per candidate).

==============  ===========================================================================
tp              divisors of num_gpus up to the scale-up domain (TP stays inside NVLink)
pp              divisors of num_gpus up to num_layers
vpp             1, or v > 1 with pp > 1 and pp * v dividing num_layers (whole chunks)
schedule        each layout's default (1f1b, interleaved when vpp > 1), or every schedule the
                search names that runs the layout's vpp chunks per rank, with pp > 1 (1f1b
                alone where pp = 1: no pipeline, nothing to schedule); the rules reject those
                a layout cannot run for other reasons (pp, micro-batches)
cp              divisors of num_gpus (up to ``max_cp``)
ep, etp         MoE only: ep divides num_experts and num_gpus; etp divides num_gpus, <= max tp
zero_stage      the given stages (0-3)
mbs             1..``max_micro_batch_size`` where the per-rank batch splits
sp              on whenever tp > 1 (Korthikanti et al. 2022 recommend it with TP), or each
                value the search names where tp > 1 (off alone where tp = 1: nothing to split)
==============  ===========================================================================

A pinned dimension takes only the value given for it. Whether each layout can run is for the
rules to say (``perfmodel.engine.rules.layout_violation_fields``); this only keeps the product
bounded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.formulas import pipeline
from perfmodel.formulas.layouts import data_parallel_size
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.model import ModelSpec

COLUMNS = ("tp", "pp", "vpp", "cp", "ep", "etp", "zero_stage", "mbs", "sp", "schedule")


@dataclass(frozen=True)
class Bounds:
    """What the enumeration may try: the search options that shape the product."""

    zero_stages: tuple[int, ...]
    max_micro_batch_size: int
    max_tp: int | None
    max_cp: int | None
    max_vpp: int | None
    pinned: dict
    """column -> the one value it takes (tp, pp, vpp, cp, ep, etp, zero_stage, mbs, sp, schedule)."""
    schedules: tuple[int, ...] | None = None
    """Pipeline schedule codes to try (``perfmodel.formulas.pipeline.schedule_code``); None = each
    layout's default."""
    sequence_parallel: tuple[bool, ...] | None = None
    """Sequence parallelism settings to try where tp > 1; None = on wherever tp > 1."""


def _divisors(n: int, upto: int) -> np.ndarray:
    return np.array([d for d in range(1, min(n, upto) + 1) if n % d == 0], dtype=np.int64)


def _cross(cols: dict, name: str, values) -> dict:
    """Every row of ``cols`` combined with every value (a Cartesian product)."""
    values = np.asarray(values, dtype=np.int64)
    n = len(next(iter(cols.values()))) if cols else 1
    out = {k: np.repeat(v, len(values)) for k, v in cols.items()}
    out[name] = np.tile(values, n)
    return out


def _cross_where(cols: dict, name: str, values, where) -> dict:
    """Each row where ``where`` holds combined with every value (in order), the others with the
    first value only; ``where`` is a function of the columns."""
    values = np.asarray(values)
    per_row = np.where(where(cols), values.size, 1)
    out = {k: np.repeat(v, per_row) for k, v in cols.items()}
    nth = np.arange(int(per_row.sum())) - np.repeat(np.cumsum(per_row) - per_row, per_row)
    out[name] = values[np.minimum(nth, values.size - 1)]
    return out


def keep(cols: dict, mask) -> dict:
    return {k: v[mask] for k, v in cols.items()}


def _prefix(model: ModelSpec, hw: HardwareSpec, num_gpus: int, seq_length: int, bounds: Bounds) -> dict:
    """The parallel degrees (tp, pp, cp, vpp, ep, etp) of every layout, each row to be crossed
    with the zero stages and micro-batch sizes (``_expand``)."""
    N, layers, pin = num_gpus, model.num_layers, bounds.pinned

    def values(name, free):
        return [pin[name]] if name in pin else free

    def prune(cols, mask, *names):
        """Drop structurally impossible rows, unless every column involved is pinned: then the
        rules say what is wrong with the one layout asked for."""
        return cols if all(n in pin for n in names) else keep(cols, mask)

    max_tp = bounds.max_tp or hw.scale_up.domain_size
    c = {"tp": np.asarray(values("tp", _divisors(N, min(max_tp, model.num_attention_heads))), dtype=np.int64)}
    c = _cross(c, "pp", values("pp", _divisors(N, layers)))
    c = prune(c, N % (c["tp"] * c["pp"]) == 0, "tp", "pp")
    c = _cross(c, "cp", values("cp", _divisors(N, bounds.max_cp or seq_length)))
    c = prune(c, N % (c["tp"] * c["pp"] * c["cp"]) == 0, "tp", "pp", "cp")
    c = _cross(c, "vpp", values("vpp", _divisors(layers, bounds.max_vpp or layers)))
    c = prune(c, (c["vpp"] == 1) | ((c["pp"] > 1) & (layers % (c["pp"] * c["vpp"]) == 0)), "vpp")
    c = _with_schedules(c, bounds)
    c = _with_sequence_parallel(c, bounds)
    if model.moe is None:
        c["ep"] = np.full_like(c["tp"], pin.get("ep", 1))
        c["etp"] = np.full_like(c["tp"], pin.get("etp", 1))
    else:
        # ep * etp divides dp * cp * tp, which divides N: both must divide N
        experts = model.moe.num_experts
        c = _cross(c, "ep", values("ep", [d for d in _divisors(N, experts) if experts % d == 0]))
        c = _cross(c, "etp", values("etp", _divisors(N, max_tp)))
    return c


def _with_schedules(c: dict, bounds: Bounds) -> dict:
    """Each row with its pipeline schedules: its default, the pinned one, or every code of
    ``bounds.schedules`` that runs its vpp chunks per rank where pp > 1, and 1f1b where pp = 1
    (one schedule stands for all)."""
    if "schedule" in bounds.pinned:
        return {**c, "schedule": np.full_like(c["pp"], bounds.pinned["schedule"])}
    if bounds.schedules is None:
        return {**c, "schedule": pipeline.default_schedule_code(c["vpp"]).astype(np.int64)}
    out = _cross_where(c, "schedule", np.asarray(bounds.schedules, dtype=np.int64), lambda c: c["pp"] > 1)
    out["schedule"] = np.where(out["pp"] > 1, out["schedule"], pipeline.ONE_F_ONE_B)
    # a schedule that cannot run the row's model chunks per rank is no candidate (as a tp that
    # does not divide the GPU count is none), unless vpp is pinned: then the rules say why
    if "vpp" in bounds.pinned:
        return out
    return keep(out, (out["pp"] == 1) | pipeline.runs_on_chunks(out["schedule"], out["vpp"]))


def _with_sequence_parallel(c: dict, bounds: Bounds) -> dict:
    """Each row with every sequence-parallel setting of ``bounds.sequence_parallel`` where
    tp > 1, and off where tp = 1; unchanged (``_expand`` sets it) when none is named or it is
    pinned."""
    if "sp" in bounds.pinned or bounds.sequence_parallel is None:
        return c
    values = np.array(sorted(set(bounds.sequence_parallel), reverse=True), dtype=bool)   # on first
    out = _cross_where(c, "sp", values, lambda c: c["tp"] > 1)
    out["sp"] = (out["tp"] > 1) & out["sp"]
    return out


def _expand(c: dict, num_gpus: int, global_batch_size: int, bounds: Bounds) -> dict:
    """Prefix rows crossed with the zero stages and micro-batch sizes, and sequence parallelism."""
    N, pin = num_gpus, bounds.pinned
    c = _cross(c, "zero_stage", [pin["zero_stage"]] if "zero_stage" in pin else sorted(set(bounds.zero_stages)))
    dp = data_parallel_size(N, c["tp"], c["pp"], c["cp"])
    mbs = [pin["mbs"]] if "mbs" in pin else np.arange(1, bounds.max_micro_batch_size + 1)
    c = _cross(c, "mbs", mbs)
    dp = np.repeat(dp, len(mbs))
    # keep mbs = 1 where the batch does not split at all, so the rule reports why
    if "mbs" not in pin:
        c = keep(c, (c["mbs"] == 1) | (global_batch_size % (c["mbs"] * dp) == 0))
    if "sp" in pin:
        c["sp"] = np.full(len(c["tp"]), bool(pin["sp"]))
    elif "sp" not in c:   # else set per row by _with_sequence_parallel
        c["sp"] = c["tp"] > 1
    return c


def enumerate_layouts(model: ModelSpec, hw: HardwareSpec, num_gpus: int, global_batch_size: int,
                      seq_length: int, bounds: Bounds) -> dict:
    """Layouts whose degrees multiply into num_gpus, as columns ``COLUMNS`` of equal length."""
    return _expand(_prefix(model, hw, num_gpus, seq_length, bounds), num_gpus, global_batch_size, bounds)


@dataclass(frozen=True)
class Enumeration:
    """The layouts of one GPU count, to be generated block by block (``blocks``), so that the
    layouts a search goes through are never all in memory at once."""

    prefix: dict
    """The parallel degrees of every layout before the zero stages and micro-batch sizes: about
    1/32 of the layouts with the default bounds."""
    num_gpus: int
    global_batch_size: int
    bounds: Bounds

    def __len__(self) -> int:
        """Prefix rows (the unit of ``blocks``)."""
        return len(self.prefix["tp"])

    def blocks(self, rows: int):
        """(layout columns, first prefix row, prefix rows) of about ``rows`` layouts at a time,
        in the order of ``enumerate_layouts``."""
        per = len(set(self.bounds.zero_stages)) * self.bounds.max_micro_batch_size
        step = max(1, rows // per)
        for start in range(0, len(self), step):
            part = keep(self.prefix, slice(start, start + step))
            yield _expand(part, self.num_gpus, self.global_batch_size, self.bounds), start, len(part["tp"])


def enumeration(model: ModelSpec, hw: HardwareSpec, num_gpus: int, global_batch_size: int, seq_length: int,
                bounds: Bounds) -> Enumeration:
    """``enumerate_layouts``, as blocks."""
    return Enumeration(_prefix(model, hw, num_gpus, seq_length, bounds), num_gpus, global_batch_size, bounds)
