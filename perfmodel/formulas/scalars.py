"""Numbers or arrays: helpers that give a formula the numpy function it names on arrays over
layouts and the same number on the Python numbers of one layout
(``perfmodel.formulas.layouts.one_row``), where IEEE arithmetic gives the bits it gives on a
one-element array without numpy's cost of about 1 us an operation."""

from __future__ import annotations

from dataclasses import replace
from math import isnan

import numpy as np

_NUMBERS = (int, float)
_ARRAY = np.ndarray
"""Bound once: ``np.ndarray`` looked up through the module costs about 25 ns a time, and these helpers
run about 500 times a predict."""


def as_rows(*values) -> tuple:
    """Numbers worked out on a ``one_row``, each as the one-element array a batch of one gives (one
    that is such an array already stays)."""
    return tuple(v if isinstance(v, _ARRAY) and v.ndim == 1 else np.array([v]) for v in values)


def batch_of_one(obj, names: tuple):
    """``obj``, a frozen dataclass worked out on a ``one_row``, with its fields ``names`` as the
    one-element arrays the same formulas give a batch of one."""
    return replace(obj, **{n: np.array(getattr(obj, n)).reshape(1) for n in names})


def where(cond, a, b):
    """``np.where(cond, a, b)``; on a ``one_row``'s scalars, the one of ``a`` and ``b`` that ``cond``
    picks (the same number)."""
    if isinstance(cond, _ARRAY) or isinstance(a, _ARRAY) or isinstance(b, _ARRAY):
        return np.where(cond, a, b)
    return a if cond else b


def maximum(a, b):
    """``np.maximum(a, b)``; on two Python numbers (a ``one_row``'s), the one numpy picks: ``a`` where
    it is larger or NaN, else ``b`` (so NaN where either is, and ``b`` on ties: -0.0 of 0.0 and -0.0), as a
    float where either is one."""
    if type(a) in _NUMBERS and type(b) in _NUMBERS:
        m = a if a > b or isnan(a) else b
        return float(m) if float in (type(a), type(b)) else m
    return np.maximum(a, b)


def minimum(a, b):
    """``np.minimum(a, b)``; on two Python numbers, the one numpy picks (``maximum``'s rule, reversed)."""
    if type(a) in _NUMBERS and type(b) in _NUMBERS:
        m = a if a < b or isnan(a) else b
        return float(m) if float in (type(a), type(b)) else m
    return np.minimum(a, b)


def largest(values: list):
    """``np.max(values, axis=0)``; on a list of Python numbers (a ``one_row``'s), ``maximum`` of them
    in turn (the number numpy's reduction gives)."""
    if all(type(v) in _NUMBERS for v in values):
        out = values[0]
        for v in values[1:]:
            out = maximum(out, v)
        return out
    return np.max(values, axis=0)


def floats(x):
    """``np.asarray(x, dtype=float)``; a number (a ``one_row``'s) as a Python float."""
    if type(x) is float:   # a one_row's usual case, first
        return x
    return float(x) if isinstance(x, (int, float, np.generic)) else np.asarray(x, dtype=float)


def ints(x):
    """``np.asarray(x, dtype=np.int64)``; an integer (a ``one_row``'s) stays a Python int."""
    return int(x) if isinstance(x, (int, np.integer)) else np.asarray(x, dtype=np.int64)


def any_of(x) -> bool:
    """``x.any()`` of an array; the truth of a ``one_row``'s number."""
    return bool(x.any()) if isinstance(x, _ARRAY) else bool(x)


def negated(x):
    """``~x`` of a boolean array; ``not x`` of a number (``~`` of a Python bool is an int)."""
    return ~x if isinstance(x, _ARRAY) else not x


def all_of(x) -> bool:
    """``x.all()`` of an array; the truth of a ``one_row``'s number."""
    return bool(x.all()) if isinstance(x, _ARRAY) else bool(x)


def filled(like, value: float):
    """``np.full_like(like, value, dtype=float)``; on a ``one_row``'s number, ``value`` as a float."""
    return np.full_like(like, value, dtype=float) if isinstance(like, _ARRAY) else float(value)


def zeros_of(*values):
    """``np.zeros`` of the shape ``values`` broadcast to; 0.0 where they are all numbers."""
    shape = np.broadcast_shapes(*(np.shape(x) for x in values))
    return np.zeros(shape) if shape else 0.0


def flags(like, value: bool):
    """``np.full_like(like, value, dtype=bool)``; on a ``one_row``'s number, ``value`` as a bool."""
    return np.full_like(like, value, dtype=bool) if isinstance(like, _ARRAY) else bool(value)
