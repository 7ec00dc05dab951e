"""Collective time versus message size: alpha-beta lines, one per NCCL regime.

=========  ===============================================================================
S          message size (nccl-tests convention), bytes
t_i(S)     alpha_i + factor * S / B_i: one alpha-beta line (Hockney 1994)
t(S)       min_i t_i(S): NCCL runs the algorithm/protocol its tuning model predicts to be
           fastest, and that model is itself latency + size / bandwidth per (algorithm,
           protocol) (NCCL src/graph/tuning.cc); so the measured curve is the lower
           envelope of a few lines (LL, LL128, Simple; ring, tree, NVLS)
k          number of lines, 1 to ``max_regimes`` (3 = NCCL's three protocols)
=========  ===============================================================================

Fit: least squares in relative time error, sum_j (t(S_j) / t_j - 1)^2. For each k the points
(sorted by S) are cut into k contiguous runs, each run gets its own line by bounded linear
least squares (alpha >= 0, slope > 0), and the cut whose envelope has the least error wins;
a final nonlinear polish adjusts all lines together. The smallest k whose worst point is
within ``tolerance`` is kept.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares, lsq_linear

MIN_SLOPE_S_PER_BYTE = 1e-18
"""Keeps every line's bandwidth finite (1e18 B/s, far above any fabric)."""
MAX_CURVE_SIZES = 64
"""Distinct message sizes of one curve: a full nccl-tests sweep doubling from 8 B to 16 GiB has
32. The search over cuts grows as sizes**(k-1) (k = 3: 64 sizes fit in about half a second), so
a longer curve, which an uploaded log can hold, is refused rather than fitted for minutes."""


@dataclass(frozen=True)
class Line:
    latency_s: float
    slope_s_per_byte: float
    """factor / busbw."""

    def time_s(self, size):
        return self.latency_s + self.slope_s_per_byte * np.asarray(size, dtype=float)


def envelope_s(lines, size) -> np.ndarray:
    return np.min([line.time_s(size) for line in lines], axis=0)


def _line_fit(S: np.ndarray, t: np.ndarray) -> Line:
    """Bounded least squares of (alpha + c*S)/t = 1."""
    A = np.column_stack([1.0 / t, S / t])
    sol = lsq_linear(A, np.ones_like(t), bounds=([0.0, MIN_SLOPE_S_PER_BYTE], [np.inf, np.inf]))
    return Line(float(sol.x[0]), float(sol.x[1]))


def _sse(lines, S, t) -> float:
    return float(np.sum((envelope_s(lines, S) / t - 1.0) ** 2))


def _best_cut(S, t, k: int):
    """Best envelope of k lines over contiguous runs of distinct sizes (each run >= 2 sizes)."""
    sizes = np.unique(S)
    if len(sizes) < 2 * k:
        return None
    cache: dict[tuple[int, int], Line] = {}

    def run_line(i, j):   # sizes[i:j]
        if (i, j) not in cache:
            mask = (S >= sizes[i]) & (S <= sizes[j - 1])
            cache[(i, j)] = _line_fit(S[mask], t[mask])
        return cache[(i, j)]

    best = None
    for cuts in itertools.combinations(range(2, len(sizes) - 1), k - 1):
        bounds = (0, *cuts, len(sizes))
        if any(b - a < 2 for a, b in zip(bounds, bounds[1:])):
            continue
        lines = [run_line(a, b) for a, b in zip(bounds, bounds[1:])]
        err = _sse(lines, S, t)
        if best is None or err < best[0]:
            best = (err, lines)
    return best


def _polish(lines, S, t):
    """Adjust all lines together on the envelope (a piecewise-smooth problem)."""
    x0 = np.array([v for line in lines for v in (line.latency_s, line.slope_s_per_byte)])
    scale = np.where(np.arange(len(x0)) % 2 == 0, max(float(np.median(t)), 1e-12),
                     max(float(np.median(t / S)), MIN_SLOPE_S_PER_BYTE))
    lo = np.tile([0.0, MIN_SLOPE_S_PER_BYTE], len(lines)) / scale

    def resid(z):
        x = z * scale
        ls = [Line(x[2 * i], x[2 * i + 1]) for i in range(len(lines))]
        return envelope_s(ls, S) / t - 1.0

    sol = least_squares(resid, np.maximum(x0 / scale, lo), bounds=(lo, np.inf), method="trf")
    x = sol.x * scale
    return [Line(float(x[2 * i]), float(x[2 * i + 1])) for i in range(len(lines))]


def fit_regimes(size_bytes, time_s, max_regimes: int = 3, tolerance: float = 0.10) -> list[Line]:
    """Lines of the lower envelope, fewest first that reach ``tolerance`` (see module doc)."""
    S, t = np.asarray(size_bytes, dtype=float), np.asarray(time_s, dtype=float)
    if len(np.unique(S)) < 2:
        raise ValueError("a collective fit needs at least two message sizes")
    if len(np.unique(S)) > MAX_CURVE_SIZES:
        raise ValueError(f"more than {MAX_CURVE_SIZES} distinct message sizes (a doubling sweep from 8 B to 16 GiB "
                         f"has 32)")
    chosen = None
    for k in range(1, max_regimes + 1):
        found = _best_cut(S, t, k)
        if found is None:
            break
        lines = _polish(found[1], S, t)
        if _sse(lines, S, t) > found[0]:
            lines = found[1]
        lines = [ln for ln in lines if np.any(np.isclose(ln.time_s(S), envelope_s(lines, S)))]
        chosen = lines
        if np.max(np.abs(envelope_s(lines, S) / t - 1.0)) <= tolerance:
            break
    return sorted(chosen, key=lambda ln: -ln.slope_s_per_byte)
