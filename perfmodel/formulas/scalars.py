"""Numbers or arrays: helpers that give a formula the numpy function it names on arrays over
layouts and the same number on the Python numbers of one layout
(``perfmodel.formulas.layouts.one_row``), where IEEE arithmetic gives the bits it gives on a
one-element array without numpy's cost of about 1 us an operation."""

from __future__ import annotations

from dataclasses import replace

import numpy as np


def as_rows(*values) -> tuple:
    """Numbers worked out on a ``one_row``, each as the one-element array a batch of one gives (one
    that is such an array already stays)."""
    return tuple(v if isinstance(v, np.ndarray) and v.ndim == 1 else np.array([v]) for v in values)


def batch_of_one(obj, names: tuple):
    """``obj``, a frozen dataclass worked out on a ``one_row``, with its fields ``names`` as the
    one-element arrays the same formulas give a batch of one."""
    return replace(obj, **{n: np.array(getattr(obj, n)).reshape(1) for n in names})


def where(cond, a, b):
    """``np.where(cond, a, b)``; on a ``one_row``'s scalars, the one of ``a`` and ``b`` that ``cond``
    picks (the same number)."""
    if isinstance(cond, np.ndarray) or isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.where(cond, a, b)
    return a if cond else b


def floats(x):
    """``np.asarray(x, dtype=float)``; a number (a ``one_row``'s) as a Python float."""
    return float(x) if isinstance(x, (int, float, np.generic)) else np.asarray(x, dtype=float)


def ints(x):
    """``np.asarray(x, dtype=np.int64)``; an integer (a ``one_row``'s) stays a Python int."""
    return int(x) if isinstance(x, (int, np.integer)) else np.asarray(x, dtype=np.int64)


def any_of(x) -> bool:
    """``x.any()`` of an array; the truth of a ``one_row``'s number."""
    return bool(x.any()) if isinstance(x, np.ndarray) else bool(x)


def filled(like, value: float):
    """``np.full_like(like, value, dtype=float)``; on a ``one_row``'s number, ``value`` as a float."""
    return np.full_like(like, value, dtype=float) if isinstance(like, np.ndarray) else float(value)


def zeros_of(*values):
    """``np.zeros`` of the shape ``values`` broadcast to; 0.0 where they are all numbers."""
    shape = np.broadcast_shapes(*(np.shape(x) for x in values))
    return np.zeros(shape) if shape else 0.0


def flags(like, value: bool):
    """``np.full_like(like, value, dtype=bool)``; on a ``one_row``'s number, ``value`` as a bool."""
    return np.full_like(like, value, dtype=bool) if isinstance(like, np.ndarray) else bool(value)
