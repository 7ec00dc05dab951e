"""A band with a random offset added: the quantiles of r + c, c drawn from a few equal-weight
offsets (``shifted``) or from a normal (``spread``), as ``perfmodel.engine.band`` widens the band of
a job new in a category (a stack, a model family, a GPU generation)."""

from __future__ import annotations

import math

import numpy as np


def shifted(levels, log_ratio, offsets) -> tuple[float, ...]:
    """Quantiles at ``levels`` of r + c, c each of ``offsets`` with equal weight: the mixture's
    distribution function G(x) = mean_c F(x - c), inverted at ``levels``. F is read between the
    band's levels, 0 below its first quantile and 1 above its last: the mass beyond the end levels
    sits at the end quantiles, as ``ErrorBand.quantile`` holds them. One offset moves the band by it;
    no offsets: the band as it is."""
    if not len(offsets):
        return tuple(float(x) for x in log_ratio)
    lv, q, c = (np.asarray(a, dtype=float) for a in (levels, log_ratio, offsets))
    points = np.unique((q[:, None] + c[None, :]).ravel())
    g = np.mean([_atoms_cdf(points - ci, q, lv) for ci in c], axis=0)
    return tuple(float(x) for x in np.interp(lv, g, points))


def _atoms_cdf(x, q, lv) -> np.ndarray:
    """F(x) of a band: read between its levels, 0 below its first quantile and 1 above its last (a
    rounding error's width, 1e-12, off the ends still reads the end level)."""
    f = np.interp(x, q, lv)
    tol = 1e-12 * (1.0 + float(np.max(np.abs(q))))
    return np.where(x < q[0] - tol, 0.0, np.where(x > q[-1] + tol, 1.0, f))


NORMAL_POINTS = 40
"""Equal-weight points that stand for N(0, 1) in ``spread``: its quantiles at (i + 1/2) / 40, scaled
to unit variance (the midpoint points alone have variance 0.97)."""


def _unit_normal_points() -> np.ndarray:
    from statistics import NormalDist
    z = np.array([NormalDist().inv_cdf((i + 0.5) / NORMAL_POINTS) for i in range(NORMAL_POINTS)])
    return z / math.sqrt(float(np.mean(z ** 2)))


def spread(levels, log_ratio, tau: float) -> tuple[float, ...]:
    """Quantiles at ``levels`` of r + c, c ~ N(0, tau^2) independent of r (``shifted`` over
    ``NORMAL_POINTS`` points of the normal); tau = 0: the band as it is."""
    if tau <= 0:
        return tuple(float(x) for x in log_ratio)
    return shifted(levels, log_ratio, tau * _unit_normal_points())
