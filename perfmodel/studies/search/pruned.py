"""A best-only search by time that prunes before it expands (``scale`` and ``size``); the timing
half, and the entry point ``best_per_count``, are in ``perfmodel.studies.search.pruned_timing``.

``search`` with ``best_only`` and the time objective wants the k fastest layouts of a job and the
counts of the layouts the rules reject; it times only the layouts whose step floor
(``perfmodel.engine.floor.step_time_floor_s``) can beat the k-th best so far. Streaming every
layout through the rules and the floors, as ``perfmodel.studies.search.stream`` does, costs far
more than the few layouts it times. Here the work is done at the level where it varies:

- **The zero stages are crossed last.** The rules and the step floor do not read a layout's ZeRO
  stage, and every zero stage of a layout takes the same micro-batch sizes (``_expand``), so the
  rules run on the layouts of one zero stage and count each rejection once per zero stage, and
  the floors are worked out once for all of them; a layout's place in the enumeration follows
  from its prefix row, its micro-batch size and its zero stage's rank (``_Count``).
- **The floor's per-shape parts are worked out once per study,** for every layer shape (the
  prefix's tensor, context and expert degrees, sequence parallelism and schedule, and the
  micro-batch size) of every GPU count searched together (``best_per_count``), one call per
  precision and recompute mode (``floor_parts``), instead of once per chunk and count; a
  layout's floor is then a few array operations on them (``floor_from_parts``). Each call checks
  that the parts read only those columns (else the search streams, as before).
- **Expanded only where it can win:** the (layout, recompute mode) pairs are taken lowest floor
  first, in batches growing 4x, while their floor can beat the k-th best; only then are they
  crossed with the zero stages, checked for memory (rank 0's model states first) and timed.

The top k and the counts of broken rules are those of ``stream``'s search (the ranking does not
depend on the order of the rows: ties go by the step, the memory, the search group and the place
in the enumeration, ``layout_table``); ``num_fit``, ``num_evaluated`` and the count of layouts that
do not fit cover the layouts checked, which differ.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace

import numpy as np

from perfmodel.engine import distinct
from perfmodel.engine.block import blocks_shared
from perfmodel.engine.enumerate import _expand, _prefix
from perfmodel.engine.floor import floor_parts
from perfmodel.engine.job import shared_job
from perfmodel.engine.rules import layout_violations
from perfmodel.formulas.layouts import Layouts
from perfmodel.studies.search.stream import Plan, Tally, _jobs

SHAPE_KEY = ("tp", "cp", "sp", "ep", "etp", "schedule", "mbs")
"""The columns of a layout that set the floor's per-shape parts (checked at each call)."""
PREFIX_COLUMNS = ("tp", "pp", "vpp", "cp", "ep", "etp", "sp", "schedule")
FIRST_PAIRS = 2048
"""(layout, recompute mode) pairs expanded, checked and timed first, lowest floor first (each
crossed with the zero stages that hold its model states); each next batch 4x. ``size`` for
DeepSeek-V3 over the 15 shipped types: 9.2 CPU-s and 173 MB at 2,048 and at 1,024 (9.9 s at
256, 9.0 s and 185 MB at 4,096), the same rows."""
MAX_PAIRS = 16_384
"""Pairs in one batch at most, so that a batch's arrays stay near ``PRUNED_CHUNK`` layouts."""
SHAPES_PER_CALL = 16384
"""Layer shapes whose floor parts one call works out (each operation's times of every shape are
held while the recompute modes share them: about 1.5 KB a shape)."""
RULES_KEPT = 64
"""Outcomes of the rules kept (``_rules``): a ``size`` enumerates the same layouts at each GPU
count for every hardware type of one scale-up domain size."""


class Unprunable(Exception):
    """The floor's per-shape parts, or rank 0's model states, read a column this module does not
    key them by: stream instead."""


@dataclass
class _Count:
    """One GPU count's valid layouts, each of them without its zero stage (the rules and the
    floors do not read it): the prefix rows, and per valid layout its prefix row and micro-batch
    size, from which its place in the enumeration follows."""

    plan: Plan
    tally: Tally
    prefix: dict
    """Columns ``PREFIX_COLUMNS`` of the enumeration's prefix rows (``perfmodel.engine.enumerate``),
    with ``start``: the place of each row's first layout in the enumeration, and ``per``: its
    micro-batch sizes (its layouts are its zero stages x its micro-batch sizes, in that order)."""
    row: np.ndarray
    """Prefix row of each valid layout."""
    mbs: np.ndarray
    nth: np.ndarray
    """Rank of the layout's micro-batch size among its prefix row's."""
    valid: list
    """Per precision, which of the layouts the rules let run (None: all)."""
    zero_stages: tuple
    elapsed_s: float = 0.0
    parts: dict = field(default_factory=dict)
    """(precision, recompute) -> (per-layer part, last rank's part, of each shape of a table;
    the shape of each valid layout): ``floor_parts`` of the layouts, by shape."""

    def column(self, name: str, rows=slice(None)) -> np.ndarray:
        return self.mbs[rows].astype(np.int64) if name == "mbs" else self.prefix[name][self.row[rows]]

    def valid_rows(self, pi: int) -> np.ndarray:
        v = self.valid[pi]
        return np.arange(len(self.row)) if v is None else np.flatnonzero(v)

    def positions(self, rows: np.ndarray, zi: np.ndarray) -> np.ndarray:
        """Places in the enumeration of layouts ``rows`` under the ``zi``-th zero stages."""
        p = self.row[rows]
        return self.prefix["start"][p] + zi * self.prefix["per"][p] + self.nth[rows]


def _zero_stages(plan: Plan) -> list:
    b = plan.bounds
    return [b.pinned["zero_stage"]] if "zero_stage" in b.pinned else sorted(set(b.zero_stages))


def _count(plan: Plan, tally: Tally) -> _Count:
    """The valid layouts of ``plan``'s one GPU count, and the rules' counts in ``tally``."""
    t0 = time.perf_counter()
    s, m, N, b = plan.scenario, plan.model, plan.counts[0], plan.bounds
    zs = _zero_stages(plan)
    one = replace(b, zero_stages=(zs[0],), pinned={k: v for k, v in b.pinned.items() if k != "zero_stage"})
    prefix = _prefix(m, plan.hardware, N, s.seq_length, b)
    num_prefix = len(prefix["tp"])
    rows = _expand({**prefix, "_row": np.arange(num_prefix)}, N, s.global_batch_size, one)
    nz, nrc, n = len(zs), len(plan.recompute), len(rows["tp"])
    per = np.bincount(rows["_row"], minlength=num_prefix)
    first = np.cumsum(per) - per
    valid, any_valid = [], np.zeros(n, dtype=bool)
    for precision in plan.precisions:
        ok, rejected = _rules(plan, precision, rows)
        for text, w in rejected:   # each rejected layout stands for one per zero stage and recompute mode
            tally.rejected[text] += w * nz * nrc
        num_valid = int(ok.sum()) * nz
        for _, (fld, why) in plan.ruled_out:
            tally.rejected[f"{fld}: {why}"] += num_valid
        tally.num_enumerated += n * nz * (nrc + len(plan.ruled_out))
        tally.num_valid += num_valid * nrc
        valid.append(ok)
        any_valid |= ok
    keep = np.flatnonzero(any_valid)
    sp = np.zeros(num_prefix, dtype=bool)
    sp[rows["_row"]] = rows["sp"]          # set per prefix row, by the prefix or by ``_expand``
    table = {**{k: prefix[k].astype(np.int32) for k in PREFIX_COLUMNS if k != "sp"}, "sp": sp,
             "start": nz * first, "per": per.astype(np.int32)}
    row = rows["_row"][keep]
    return _Count(plan, tally, table, row.astype(np.int32), rows["mbs"][keep].astype(np.int32),
                  (keep - first[row]).astype(np.int32), [None if ok.all() else ok[keep] for ok in valid], tuple(zs),
                  elapsed_s=time.perf_counter() - t0)


_rules_kept: OrderedDict = OrderedDict()


def _rules(plan: Plan, precision: str, rows: dict) -> tuple[np.ndarray, list]:
    """(which of the layouts ``rows`` of the plan's GPU count the rules let run at ``precision``,
    (reason, layouts) of the others): ``layout_violations``, kept for the next plan that
    enumerates the same layouts and to which the same rules apply, by what they read (the model,
    the GPU count, sequence, batch and bounds, the scale-up domain that bounds tp, the scenario's
    rule fields, and whether the GPU has a peak for the precision, by name where it has none)."""
    s, hw, n = plan.scenario, plan.hardware, len(rows["tp"])
    key = (id(plan.model), plan.counts[0], s.seq_length, s.global_batch_size, repr(plan.bounds),
           hw.scale_up.domain_size, tuple(sorted(plan.rule_fields.items())), n, precision,
           hw.gpu.supports(precision) or hw.gpu.name)
    hit = _rules_kept.get(key)
    if hit is not None and hit[0] is plan.model:
        _rules_kept.move_to_end(key)
        return np.unpackbits(hit[1], count=n).astype(bool), hit[2]
    broken = layout_violations(
        plan.model, hw, s.seq_length, s.global_batch_size, plan.counts[0], precision, tp=rows["tp"], pp=rows["pp"],
        vpp=rows["vpp"], cp=rows["cp"], ep=rows["ep"], etp=rows["etp"], sp=rows["sp"],
        micro_batch_size=rows["mbs"], schedule=rows["schedule"], **plan.rule_fields)
    ok = broken.ok
    rejected = [] if ok.all() else [
        (text, int(w)) for text, w in zip(broken.reasons, np.bincount(broken.code[~ok], minlength=len(broken.reasons)))]
    if len(_rules_kept) >= RULES_KEPT:
        _rules_kept.popitem(last=False)
    _rules_kept[key] = (plan.model, np.packbits(ok), rejected)
    return ok, rejected


def _groups(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``distinct.row_groups`` without keeping the codes of these one-off columns."""
    code, radix = np.zeros(len(columns[0]), dtype=np.int64), 1
    for col in columns:
        k, rank = distinct._coded(col)
        if radix * k >= 1 << 40:
            radix, code = distinct._coded(code)
        code, radix = code * k + rank, radix * k
    num, group = distinct._coded(code)
    first = np.empty(num, dtype=np.int64)
    first[group] = np.arange(len(group))
    return first, group


def _shape_table(counts: list[_Count]) -> tuple[Layouts, list[np.ndarray]]:
    """(the distinct layer shapes of every count's valid layouts, as layouts whose other columns
    are placeholders: the floor's parts do not read them, ``_parts`` checks; the shape of each
    valid layout of each count)."""
    pkeys = [np.concatenate([c.prefix[k] for c in counts]) for k in SHAPE_KEY[:-1]]
    pfirst, pgroup = _groups(pkeys)                      # the prefix rows' part of the shape
    offsets = np.cumsum([0] + [len(c.prefix["tp"]) for c in counts])
    ps = np.concatenate([pgroup[o + c.row] for c, o in zip(counts, offsets)])
    mbs = np.concatenate([c.mbs for c in counts]).astype(np.int64)
    first, group = _groups([ps, mbs])
    ends = np.cumsum([len(c.row) for c in counts])
    cols = {k: v[pfirst[ps[first]]].astype(np.int64) for k, v in zip(SHAPE_KEY[:-1], pkeys)}
    one = np.ones(len(first), dtype=np.int64)
    shapes = Layouts(tp=cols["tp"], pp=one, vpp=one, cp=cols["cp"], ep=cols["ep"], etp=cols["etp"],
                     sp=cols["sp"].astype(bool), zero_stage=0 * one, mbs=mbs[first], dp=one, num_mb=one,
                     schedule=cols["schedule"])
    return shapes, [group[e - len(c.row):e].astype(np.int32) for c, e in zip(counts, ends)]


def _parts(job, seen: Layouts):
    """``floor_parts`` of every shape of ``seen`` (a table of shapes, as a ``distinct._recording``),
    checked to read no column outside ``SHAPE_KEY``."""
    per_layer, last = floor_parts(job, seen, memo=False)
    if not object.__getattribute__(seen, "read") <= set(SHAPE_KEY):
        raise Unprunable
    n = len(seen)
    return (np.broadcast_to(np.asarray(per_layer, dtype=float), (n,)),
            np.broadcast_to(np.asarray(last, dtype=float), (n,)))


def _all_parts(counts: list[_Count]) -> None:
    """Each count's floor parts (its ``parts``), worked out once per table of the layer shapes of
    the counts that share them, every precision and recompute mode of a table in turn (sharing
    its blocks: ``blocks_shared``)."""
    plan = counts[0].plan
    tables: dict = {}       # counts sharing parts -> [(precision, recompute, a job)]
    for pi in range(len(plan.precisions)):
        for ri in range(len(plan.recompute)):
            groups: dict = {}       # id of the shared job -> (it, a job of it, the counts that share it)
            for k, c in enumerate(counts):
                if len(c.row) and (c.valid[pi] is None or c.valid[pi].any()):
                    job, _ = _jobs(c.plan, c.tally, 0, pi, ri)
                    shared = shared_job(job, recompute=True)
                    groups.setdefault(id(shared), (shared, job, []))[2].append(k)
            for _, job, members in groups.values():
                tables.setdefault(tuple(members), []).append((pi, ri, job))
    for members, jobs in tables.items():
        shapes, index = _shape_table([counts[k] for k in members])
        n = len(shapes)
        parts = {(pi, ri): (np.empty(n), np.empty(n)) for pi, ri, _ in jobs}
        for start in range(0, n, SHAPES_PER_CALL):
            seen = distinct._recording(shapes, slice(start, start + SHAPES_PER_CALL))
            with blocks_shared():
                for pi, ri, job in jobs:
                    per_layer, last = _parts(job, seen)
                    parts[pi, ri][0][start:start + len(seen)] = per_layer
                    parts[pi, ri][1][start:start + len(seen)] = last
        for pi, ri, _ in jobs:
            for k, shape in zip(members, index):
                counts[k].parts[pi, ri] = (*parts[pi, ri], shape)
