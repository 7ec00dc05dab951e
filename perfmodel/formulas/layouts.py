"""A batch of parallel layouts as numpy arrays, so one code path serves ``predict`` (a batch
of one) and ``search`` (thousands of candidates at once).

Every field is an integer (or boolean) array of the same shape. Physical models take a
``Layouts`` and broadcast; they never loop over candidates.

``once_per_shape`` works a function of a batch out once per distinct shape (see its section).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, is_dataclass

import numpy as np


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

    def __len__(self) -> int:
        return int(self.tp.shape[0])

    def take(self, index) -> "Layouts":
        return Layouts(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def row(self, i: int) -> dict:
        return {f.name: getattr(self, f.name)[i].item() for f in fields(self)}


def layouts_from_arrays(**arrays) -> Layouts:
    n = max(np.size(v) for v in arrays.values())
    out = {}
    for f in fields(Layouts):
        v = np.asarray(arrays[f.name])
        out[f.name] = np.broadcast_to(v, (n,)).astype(bool if f.name == "sp" else np.int64)
    return Layouts(**out)


# ------------------------------------------------------------- work once per distinct shape
# Evaluate a function of a batch of layouts on one row of
# each distinct combination of the columns it reads, and give every layout its group's row.
#
# A search batch holds tens of thousands of layouts but few distinct values of what one layer's
# time depends on (tensor, context and expert degrees, sequence parallelism, micro-batch size):
# the pipeline degrees, the zero stages and the data-parallel degrees share them. Every function
# of the engine is element-wise over layouts, so a row computed once and copied is the same, to
# the last bit, as the row computed in place; the work then scales with the distinct shapes, not
# with the layouts.
#
# Which columns a function reads is observed, not declared: it runs on the distinct rows of a
# first guess (``SHAPE_COLUMNS``) through a ``Layouts`` that records every column read, and runs
# again with the columns it read as the key until it reads nothing outside the key. A column read
# anywhere (also to branch on it) is in the key, so no grouping can merge layouts the function
# tells apart; a change to a formula that reads a new column needs no change here.
SHAPE_COLUMNS = ("tp", "cp", "sp", "mbs", "ep", "etp")
"""The columns that set one layer's sharded shape and its TP, CP and EP groups: the first guess
of what a layer's time reads."""
MIN_ROWS = 512
"""Below this many layouts the function runs on the batch as it is (grouping costs about as
much as a few hundred element-wise operations on the rows; ``predict`` has one)."""
MAX_TRIES = 4
"""Runs on distinct rows before giving up and running on every row (each run adds the columns
the last one read; the engine's functions settle in one or two)."""
_COLUMNS = tuple(f.name for f in fields(Layouts))
_TABLE_LIMIT = 1 << 22
"""Integer values below this are coded through a lookup table (linear time), others sorted."""


class _Recording(Layouts):
    """A ``Layouts`` that notes the name of every column read from it."""

    def __getattribute__(self, name):
        if name in _COLUMNS:
            object.__getattribute__(self, "read").add(name)
        return object.__getattribute__(self, name)

    def __len__(self) -> int:
        return int(object.__getattribute__(self, "tp").shape[0])


def _column(L: Layouts, name: str) -> np.ndarray:
    """A column, not noted as read (``once_per_shape`` notes what its function read instead)."""
    return object.__getattribute__(L, name)


def _recording(L: Layouts, rows: np.ndarray) -> _Recording:
    out = _Recording(**{c: _column(L, c)[rows] for c in _COLUMNS})
    object.__setattr__(out, "read", set())
    return out


_learned: dict = {}
"""(function, its other arguments) -> the columns it read last time: the next first guess."""
MAX_LEARNED = 4096


def _signature(fn, args) -> tuple:
    """The function and the identities of its other arguments (a guess needs no more: a stale
    one costs a run, never a wrong row)."""
    return (fn, *(None if isinstance(a, (Layouts, np.ndarray)) else id(a) for a in args))


_recent: dict = {}
"""id -> (array, its codes) for the last few arrays coded (kept alive, so an id is not reused
while it is here): the calls of one ``evaluate`` group the same columns again and again."""
RECENT = 64


def _codes(values: np.ndarray) -> tuple[int, np.ndarray]:
    """(number of distinct values, the rank of each value among them)."""
    hit = _recent.get(id(values))
    if hit is not None and hit[0] is values:
        return hit[1]
    out = _coded(values)
    if len(_recent) >= RECENT:
        _recent.pop(next(iter(_recent)))
    _recent[id(values)] = (values, out)
    return out


def _coded(values: np.ndarray) -> tuple[int, np.ndarray]:
    v = np.asarray(values)
    if v.dtype.kind in "biu":
        v = v.astype(np.int64, copy=False)
        lo, hi = (int(v.min()), int(v.max())) if v.size else (0, 0)
        if hi - lo < _TABLE_LIMIT:
            present = np.zeros(hi - lo + 1, dtype=bool)
            present[v - lo] = True
            rank = np.cumsum(present) - 1
            return int(rank[-1]) + 1, rank[v - lo]
    # Others (seconds of traffic, say) are sorted; zeros, the common value, are set aside first.
    nonzero = v != 0
    distinct, inverse = np.unique(v[nonzero], return_inverse=True)
    rank = np.zeros(v.shape, dtype=np.int64)
    rank[nonzero] = inverse.reshape(-1) + 1
    return len(distinct) + 1, rank


_recent_groups: dict = {}
"""ids of the columns grouped -> (the columns, the grouping), for the last few groupings (the
operations of one layer group the same columns of the same batch)."""


def row_groups(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(one row of each distinct combination of ``columns``, the group of every row)."""
    ids = tuple(map(id, columns))
    hit = _recent_groups.get(ids)
    if hit is not None and all(a is b for a, b in zip(hit[0], columns)):
        return hit[1]
    out = _row_groups(columns)
    if len(_recent_groups) >= RECENT:
        _recent_groups.pop(next(iter(_recent_groups)))
    _recent_groups[ids] = (tuple(columns), out)
    return out


def _row_groups(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    n = len(columns[0]) if columns else 0
    code, radix = np.zeros(n, dtype=np.int64), 1
    for col in columns:
        k, rank = _codes(col)
        if radix * k >= _TABLE_LIMIT:          # keep the combined code small: renumber it
            radix, code = _coded(code)
        code, radix = code * k + rank, radix * k
    num, group = _coded(code)
    first = np.empty(num, dtype=np.int64)
    first[group] = np.arange(n)                # any row of a group stands for it: they are equal
    return first, group


def scatter(value, group: np.ndarray, num: int):
    """``value`` computed on ``num`` distinct rows, given back to every row by ``group``: arrays
    over the rows are indexed, dataclasses, tuples and dicts are rebuilt around their parts,
    anything else (a count, a name) is the same for every row and stays."""
    if isinstance(value, np.ndarray):
        return value[group] if value.ndim == 1 and value.shape[0] == num else value
    if is_dataclass(value) and not isinstance(value, type):
        return type(value)(**{f.name: scatter(getattr(value, f.name), group, num) for f in fields(value) if f.init})
    if isinstance(value, tuple):
        return tuple(scatter(v, group, num) for v in value)
    if isinstance(value, dict):
        return {k: scatter(v, group, num) for k, v in value.items()}
    return value


def once_per_shape(fn, *args, guess: tuple[str, ...] = SHAPE_COLUMNS):
    """``fn(*args)``, where one argument is the batch (a ``Layouts``) and any array argument as
    long as the batch holds one value per layout: computed once per distinct combination of the
    columns ``fn`` reads and of those arrays, and scattered back to every layout. ``guess``: the
    columns to try first, unless ``fn`` read others last time with the same other arguments (a
    wrong guess costs a run on the distinct rows, never a wrong row)."""
    at = next(i for i, a in enumerate(args) if isinstance(a, Layouts))
    L = args[at]
    n = len(L)
    if n < MIN_ROWS:
        return fn(*args)
    per_row = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.shape == (n,)]
    signature = _signature(fn, args)
    key = set(_learned.get(signature, guess))
    for _ in range(MAX_TRIES):
        first, group = row_groups([_column(L, c) for c in _COLUMNS if c in key] + [args[i] for i in per_row])
        if 2 * len(first) > n:
            break                              # little to share: run on every row
        part = list(args)
        part[at] = _recording(L, first)
        for i in per_row:
            part[i] = args[i][first]
        out = fn(*part)
        read = object.__getattribute__(part[at], "read")
        if read <= key:
            if len(_learned) >= MAX_LEARNED:
                _learned.clear()
            _learned[signature] = frozenset(read)
            if isinstance(L, _Recording):      # the caller's result depends on what fn read
                object.__getattribute__(L, "read").update(read)
            return scatter(out, group, len(first))
        key |= read
    return fn(*args)
