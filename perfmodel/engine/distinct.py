"""Work once per distinct shape: evaluate a function of a batch of layouts on one row of each
distinct combination of the columns it reads, and give every layout its group's row.

A search batch holds tens of thousands of layouts but few distinct values of what one layer's
time depends on (tensor, context and expert degrees, sequence parallelism, micro-batch size):
the pipeline degrees, the zero stages and the data-parallel degrees share them, and the next
batch of the same search holds mostly the same ones again. Every function of the engine is
element-wise over layouts, so a row computed once and copied is the same, to the last bit, as
the row computed in place; the work then scales with the distinct shapes, not the layouts.

Which columns a function reads is observed, not declared: it runs on the distinct rows of a
first guess (``SHAPE_COLUMNS``) through a ``Layouts`` that records every column read, and runs
again with the columns it read as the key until it reads nothing outside the key. A column read
anywhere (also to branch on it) is in the key, so no grouping can merge layouts the function
tells apart; a change to a formula that reads a new column needs no change here.

With ``memo=True`` the rows computed are also kept, per function and other arguments (held, so
that their identity stays theirs), and the next call computes only the shapes not seen yet: a
search computes each layer shape of a job once, whatever the number of its batches.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass, fields, is_dataclass

import numpy as np

from perfmodel.formulas.layouts import Layouts

SHAPE_COLUMNS = ("tp", "cp", "sp", "mbs", "ep", "etp")
"""The columns that set one layer's sharded shape and its TP, CP and EP groups: the first guess
of what a layer's time reads."""
MIN_ROWS = 512
"""Below this many layouts the function runs on the batch as it is (grouping costs about as
much as a few hundred element-wise operations on the rows; ``predict`` has one)."""
MAX_TRIES = 4
"""Runs on distinct rows before giving up and running on every row (each run adds the columns
the last one read; the engine's functions settle in one or two)."""
MEMOS = 32
"""Functions-with-arguments whose rows are kept (the least recently used go first): a search
uses a few per job (layer kinds, output layer, MTP)."""
MEMO_ROWS = 16_384
"""Rows kept per memo at most (2.5 MB: a layer's totals are about 20 numbers a row); a function
with more distinct shapes is worked out batch by batch."""
RECENT = 16
"""Arrays whose codes, and column sets whose groupings, are kept for the next call (by weak
reference: an array that is gone is forgotten)."""
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


def _signature(fn, args) -> tuple:
    """The function and the identities of its other arguments."""
    return (fn, *(None if isinstance(a, (Layouts, np.ndarray)) else id(a) for a in args))


# ------------------------------------------------------------------------------ grouping
_recent_codes: dict = {}
"""id -> (weak reference to the array, its codes)."""
_recent_groups: dict = {}
"""ids of the columns grouped -> (weak references to them, the grouping)."""


def _remember(cache: dict, key, value) -> None:
    if len(cache) >= RECENT:
        cache.pop(next(iter(cache)))
    cache[key] = value


def _codes(values: np.ndarray) -> tuple[int, np.ndarray]:
    """(number of distinct values, the rank of each value among them)."""
    hit = _recent_codes.get(id(values))
    if hit is not None and hit[0]() is values:
        return hit[1]
    out = _coded(values)
    _remember(_recent_codes, id(values), (weakref.ref(values), out))
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


def row_groups(columns: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(one row of each distinct combination of ``columns``, the group of every row)."""
    ids = tuple(map(id, columns))
    hit = _recent_groups.get(ids)
    if hit is not None and all(ref() is b for ref, b in zip(hit[0], columns)):
        return hit[1]
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
    _remember(_recent_groups, ids, (tuple(map(weakref.ref, columns)), (first, group)))
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


def joined(values, lengths):
    """The rows of each of ``values`` (``lengths[i]`` of them) one after another, part by part (as
    ``scatter``): arrays over the rows are concatenated (a value the same for every row of one
    part, where another part has an array, given to each of its rows), dataclasses, tuples and
    dicts are rebuilt around their parts, anything else (a count, a name) is the first's."""
    a = values[0]
    if any(isinstance(v, np.ndarray) and v.ndim == 1 and v.shape[0] == n for v, n in zip(values, lengths)):
        return np.concatenate([np.broadcast_to(v, (n,)) for v, n in zip(values, lengths)])
    if is_dataclass(a) and not isinstance(a, type):
        return type(a)(**{f.name: joined([getattr(v, f.name) for v in values], lengths)
                          for f in fields(a) if f.init})
    if isinstance(a, tuple):
        return tuple(joined(parts, lengths) for parts in zip(*values))
    if isinstance(a, dict):
        return {k: joined([v[k] for v in values], lengths) for k in a}
    return a


# ---------------------------------------------------------------------------------- memo
@dataclass
class _Memo:
    """The rows one function gave, with one set of other arguments, for each key seen."""

    args: tuple
    """The other arguments, held so that their ids stay theirs while the memo lives."""
    columns: tuple[str, ...]
    """The key: the columns the function read."""
    keys: np.ndarray
    """(rows, columns) values of the key of each row kept."""
    hashes: np.ndarray
    """Hash of each key, sorted, and ``order``: the row of each."""
    order: np.ndarray
    rows: object
    """The function's value over the rows kept."""
    limit: int = MEMO_ROWS
    """Rows kept at most."""

    @property
    def num(self) -> int:
        return len(self.keys)


_memos: OrderedDict = OrderedDict()
_MIX = np.uint64(0x9E3779B97F4A7C15)


def _key_values(L: Layouts, columns, rows: np.ndarray) -> np.ndarray:
    return np.stack([_column(L, c)[rows].astype(np.int64) for c in columns], axis=1)


def _hashes(keys: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each key (equal keys, equal hashes; a collision is caught by comparing
    the keys themselves)."""
    h = np.zeros(len(keys), dtype=np.uint64)
    for j in range(keys.shape[1]):
        h = h * _MIX + keys[:, j].astype(np.uint64)
    return h


def _from_memo(memo: _Memo, fn, args, at: int, L: Layouts):
    """``fn(*args)`` from the rows kept, computing the keys not seen yet; None when ``fn`` read a
    column outside the memo's key, the memo is full, or two keys share a hash (the memo is then
    dropped)."""
    first, group = row_groups([_column(L, c) for c in memo.columns])
    keys = _key_values(L, memo.columns, first)
    h = _hashes(keys)
    at_sorted = np.minimum(np.searchsorted(memo.hashes, h), max(memo.num - 1, 0))
    where = np.where(memo.hashes[at_sorted] == h, memo.order[at_sorted], -1) if memo.num else np.full(len(h), -1)
    known = where >= 0
    if not np.array_equal(memo.keys[where[known]], keys[known]):
        return None
    missing = np.flatnonzero(~known)
    if missing.size:
        if memo.num + missing.size > memo.limit:
            return None
        part = list(args)
        part[at] = _recording(L, first[missing])
        out = fn(*part)
        if not object.__getattribute__(part[at], "read") <= set(memo.columns):
            return None
        where[missing] = memo.num + np.arange(missing.size)
        rows = joined((memo.rows, out), (memo.num, missing.size))
        _store(memo, np.concatenate([memo.keys, keys[missing]]), rows)
    return scatter(memo.rows, where[group], memo.num)


def _store(memo: _Memo, keys: np.ndarray, rows) -> None:
    h = _hashes(keys)
    order = np.argsort(h, kind="stable")
    memo.keys, memo.hashes, memo.order, memo.rows = keys, h[order], order, rows


def _new_memo(signature, args, L: Layouts, first: np.ndarray, read, out, limit: int) -> None:
    columns = tuple(c for c in _COLUMNS if c in read)
    keys = _key_values(L, columns, first) if columns else None
    if keys is None or len(np.unique(_hashes(keys))) < len(first):
        return                                 # rows equal on the columns read, or a collision
    if len(_memos) >= MEMOS:
        _memos.popitem(last=False)
    held = tuple(a for a in args if not isinstance(a, (Layouts, np.ndarray)))
    memo = _Memo(held, columns, keys, np.zeros(0, np.uint64), np.zeros(0, np.int64), out, limit)
    _store(memo, keys, out)
    _memos[signature] = memo


# ------------------------------------------------------------------------------- the call
_learned: dict = {}
"""(function, identities of its other arguments) -> the columns it read last time: the next
first guess (a stale one costs a run, never a wrong row)."""
MAX_LEARNED = 4096


def once_per_shape(fn, *args, guess: tuple[str, ...] = SHAPE_COLUMNS, memo: bool = False,
                   memo_rows: int = MEMO_ROWS, min_rows: int = MIN_ROWS):
    """``fn(*args)``, where one argument is the batch (a ``Layouts``) and any array argument as
    long as the batch holds one value per layout: computed once per distinct combination of the
    columns ``fn`` reads and of those arrays, and scattered back to every layout. ``guess``: the
    columns to try first, unless ``fn`` read others last time with the same other arguments (a
    wrong guess costs a run on the distinct rows, never a wrong row). ``memo``: keep the rows
    for the next call with the same function and other arguments (for functions of the batch
    alone, no other per-layout array); ``memo_rows``: the most rows it keeps (a function of few
    numbers a row may keep more); ``min_rows``: below this many layouts ``fn`` runs on the batch
    as it is (a memo shared by many small batches pays below ``MIN_ROWS``, and a batch that
    small adds its rows to it even where it has few repeats)."""
    at = next(i for i, a in enumerate(args) if isinstance(a, Layouts))
    L = args[at]
    n = len(L)
    if n < min_rows:
        return fn(*args)
    per_row = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.shape == (n,)]
    signature = _signature(fn, args)
    memo = memo and not per_row
    if memo and signature in _memos:
        _memos.move_to_end(signature)
        kept = _memos[signature]
        out = _from_memo(kept, fn, args, at, L)
        if out is not None:
            if isinstance(L, _Recording):
                object.__getattribute__(L, "read").update(kept.columns)
            return out
        del _memos[signature]
    key = set(_learned.get(signature, guess))
    for _ in range(MAX_TRIES):
        first, group = row_groups([_column(L, c) for c in _COLUMNS if c in key] + [args[i] for i in per_row])
        if 2 * len(first) > n and not (memo and n < MIN_ROWS and len(first) <= memo_rows):
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
            if memo and len(first) <= memo_rows:
                _new_memo(signature, args, L, first, read, out, memo_rows)
            return scatter(out, group, len(first))
        key |= read
    return fn(*args)


def forget() -> None:
    """Drop the rows every memo keeps (a benchmark's cold start: ``perfmodel.studies.bench``)."""
    _memos.clear()
