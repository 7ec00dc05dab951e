"""Each efficiency form fitted to its records (``calibration.fit`` combines them into a profile):
GEMM per precision, FP8 fast accumulation, the grouped-GEMM check, attention, memory, launch
and the collectives' regimes. Least squares in relative time error, as ``calibration.fit``
describes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import least_squares

from perfmodel.formulas.compute import gemm_time_s
from perfmodel.spec.efficiency import (
    AttentionEfficiency,
    CollectiveFit,
    Efficiencies,
    GemmEfficiency,
    saturating_attention_efficiency,
    saturating_gemm_efficiency,
)
from perfmodel.spec.hardware import HardwareSpec

from .regimes import envelope_s, fit_regimes
from .results import Record, bus_factor

STREAM_OPS = ("copy", "mul", "scale", "add", "triad")
"""STREAM kernels that read and write (Dot only reads, so it is left out)."""
ONE_GFLOP = 1e9


@dataclass(frozen=True)
class PointFit:
    """One measured point against its fitted value (time in seconds, or a rate)."""

    group: str
    label: str
    x: float
    """Abscissa for charts: FLOPs, bytes, or sequence length."""
    measured: float
    fitted: float
    quantity: str
    """'time_s', 'flop_per_s' or 'bytes_per_s'."""
    source: str
    in_fit: bool = True

    @property
    def rel_error(self) -> float:
        """Relative error of the predicted time."""
        r = self.fitted / self.measured
        return r - 1.0 if self.quantity == "time_s" else 1.0 / r - 1.0


@dataclass(frozen=True)
class GroupFit:
    group: str
    params: dict[str, float]
    points: tuple[PointFit, ...]
    sources: tuple[str, ...]

    @property
    def fitted_points(self) -> tuple[PointFit, ...]:
        return tuple(p for p in self.points if p.in_fit)

    def worst(self, n: int = 3) -> tuple[PointFit, ...]:
        return tuple(sorted(self.fitted_points, key=lambda p: -abs(p.rel_error))[:n])

    @property
    def median_abs_error(self) -> float:
        return float(np.median([abs(p.rel_error) for p in self.fitted_points]))

    @property
    def max_abs_error(self) -> float:
        return max(abs(p.rel_error) for p in self.fitted_points)



ROBUST_SCALE = 0.05
"""GEMM fits use a soft-L1 loss at this relative error: shapes the smooth form cannot
represent (wave-quantised small GEMMs) pull on the fit with bounded force."""


def _relative_lsq(resid, x0, lo, hi, robust: bool = False):
    loss = {"loss": "soft_l1", "f_scale": ROBUST_SCALE} if robust else {}
    return least_squares(resid, x0, bounds=(lo, hi), method="trf", x_scale="jac", **loss).x


def _sources(records) -> tuple[str, ...]:
    return tuple(dict.fromkeys(r.source or "measured" for r in records))


def _label_shape(r: Record) -> str:
    return "x".join(str(v) for v in r.shape) if r.shape else f"s={r.attention_seq}"


# ------------------------------------------------------------------------------------ GEMM
MIN_SHAPES_FOR_KERNEL_OVERHEAD = 4
"""The per-kernel intercept is fitted only from sweeps with at least this many shapes (with
three parameters, fewer points would be interpolated, not fitted)."""


def fit_gemm(records, peak_flop_per_s: float, default: GemmEfficiency, group: str, default_t0_s: float):
    """eff_max, half_dim and the per-kernel overhead t0 of t = t0 + F / (P * eff(m, n, k)),
    from records of one precision (half_dim fixed with one shape, t0 with fewer than four)."""
    recs = [r for r in records if r.shape and r.median_s and r.flop]
    m, n, k = (np.array([r.shape[i] for r in recs], dtype=float) for i in range(3))
    flop = np.array([r.flop for r in recs], dtype=float)
    t_meas = np.array([r.median_s for r in recs], dtype=float)
    shapes = len({r.shape for r in recs})
    free_d, free_t0 = shapes >= 2, shapes >= MIN_SHAPES_FOR_KERNEL_OVERHEAD

    def unpack(x):
        it = iter(x)
        e = next(it)
        d = next(it) if free_d else default.half_dim
        t0 = next(it) if free_t0 else default_t0_s
        return e, d, t0

    def model(x):
        e, d, t0 = unpack(x)
        return t0 + flop / (peak_flop_per_s * saturating_gemm_efficiency(m, n, k, e, d))

    eff_meas = flop / t_meas / peak_flop_per_s
    x0 = [min(1.0, 1.05 * eff_meas.max())] + [default.half_dim] * free_d + [default_t0_s] * free_t0
    lo = [1e-6] + [0.0] * free_d + [0.0] * free_t0
    hi = [1.0] + [1e5] * free_d + [1e-3] * free_t0
    x = _relative_lsq(lambda x: model(x) / t_meas - 1.0, x0, lo, hi, robust=True)
    e, d, t0 = unpack(x)
    t_model = model(x)
    fitted = GemmEfficiency(efficiency_max=float(e), half_dim=float(d))
    points = tuple(PointFit(group, _label_shape(r), r.flop, r.median_s, float(tm), "time_s", r.source or "measured")
                   for r, tm in zip(recs, t_model))
    params = {"efficiency_max": fitted.efficiency_max, "half_dim": fitted.half_dim}
    if free_t0:
        params["kernel_overhead_s"] = float(t0)
    return fitted, (float(t0) if free_t0 else None), GroupFit(group, params, points, _sources(recs))


def check_grouped_gemm(records, spec: HardwareSpec, eff: Efficiencies):
    """Expert-GEMM records against the step model's time with nothing fitted to them
    (``perfmodel.formulas.compute.gemm_time_s``: a kernel overhead per expert plus the dense bf16
    curve of the per-expert shape). A check, not a fit: the step model gives expert GEMMs the
    dense curve, and these records say how well that holds (``grouped_gemm`` group, no params)."""
    recs = [r for r in records if r.shape and r.median_s and r.groups]
    m, n, k = (np.array([r.shape[i] for r in recs], dtype=float) for i in range(3))
    count = np.array([r.groups for r in recs], dtype=float)
    t_model = np.asarray(gemm_time_s(m, n, k, count, "bf16", spec, eff), dtype=float)
    points = tuple(PointFit("grouped_gemm", f"{r.groups}x{_label_shape(r)}", r.flop, r.median_s, float(tm), "time_s",
                            r.source or "measured") for r, tm in zip(recs, t_model))
    return GroupFit("grouped_gemm", {}, points, _sources(recs))


def fit_fast_accum(fast, precise):
    """``fp8_fast_accum_speedup``: the median, over shapes timed both ways and of at least one
    GFLOP (all shared shapes where none is), of precise time / fast-accumulation time, each
    pair from one source (one run of the suite). None (and no group) where no shape was timed
    both ways."""
    by_shape = {(r.source, r.shape): r for r in precise if r.shape and r.median_s}
    pairs = [(r, by_shape[(r.source, r.shape)]) for r in fast if (r.source, r.shape) in by_shape and r.median_s]
    if not pairs:
        return None, None
    large = [(f, p) for f, p in pairs if (f.flop or 0) >= ONE_GFLOP] or pairs
    speedup = float(np.median([p.median_s / f.median_s for f, p in large]))
    points = tuple(PointFit("gemm_fast_accum.fp8", _label_shape(f), f.flop, f.median_s, p.median_s / speedup,
                            "time_s", f.source or "measured", in_fit=(f, p) in large) for f, p in pairs)
    return speedup, GroupFit("gemm_fast_accum.fp8", {"fp8_fast_accum_speedup": speedup}, points,
                             _sources([f for f, _ in pairs]))


# ------------------------------------------------------------------------------- attention
def _attention_eff(r: Record, peak: float) -> float:
    rate = r.flop / r.median_s if r.median_s and r.flop else r.rate_per_s
    return rate / peak


def fit_attention(records, peak_flop_per_s: float, default: AttentionEfficiency):
    """Forward and backward eff_max, each with its own half_seq where both passes were timed
    at two or more lengths, else one half_seq shared by what was timed (two or more lengths)
    or the spec's (one length)."""
    recs = [r for r in records if r.attention_seq and (r.rate_per_s or (r.median_s and r.flop))]
    bwd = np.array([r.op.endswith("bwd") for r in recs])
    s = np.array([r.attention_seq for r in recs], dtype=float)
    eff_meas = np.array([_attention_eff(r, peak_flop_per_s) for r in recs])
    has = {"fwd": bool((~bwd).any()), "bwd": bool(bwd.any())}
    apart = all(len(set(s[mask])) >= 2 for mask in (~bwd, bwd))
    n_knees = 2 if apart else int(len(set(s)) >= 2)

    def unpack(x):
        i = iter(x)
        e_f = next(i) if has["fwd"] else default.fwd_efficiency_max
        e_b = next(i) if has["bwd"] else default.bwd_efficiency_max
        sh = next(i) if n_knees else default.half_seq
        sh_b = next(i) if n_knees == 2 else sh
        return e_f, e_b, sh, sh_b

    def model(x):
        e_f, e_b, sh, sh_b = unpack(x)
        return saturating_attention_efficiency(s, np.where(bwd, e_b, e_f), np.where(bwd, sh_b, sh))

    masks = [mask for mask, present in ((~bwd, has["fwd"]), (bwd, has["bwd"])) if present]
    x0 = [min(1.0, eff_meas[mask].max()) for mask in masks] + [default.half_seq] * n_knees
    lo = [1e-6] * len(masks) + [0.0] * n_knees
    hi = [1.0] * len(masks) + [1e6] * n_knees
    x = _relative_lsq(lambda x: eff_meas / model(x) - 1.0, x0, lo, hi)
    e_f, e_b, sh, sh_b = unpack(x)
    # The head dim the records ran at (shape (batch, heads, seq, head_dim)) where they agree on one,
    # else the spec's; the generation that picks the head-dim rates stays the spec's.
    dims = {r.shape[3] for r in recs if r.shape}
    fitted = AttentionEfficiency(fwd_efficiency_max=float(e_f), bwd_efficiency_max=float(e_b), half_seq=float(sh),
                                 bwd_half_seq=float(sh_b) if n_knees == 2 else None,
                                 measured_head_dim=dims.pop() if len(dims) == 1 else default.measured_head_dim,
                                 measured_generation=default.measured_generation)
    # One series per pass, so a chart draws the forward and backward curves apart.
    points = tuple(PointFit(f"attention.{'bwd' if b else 'fwd'}", f"{r.op} {_label_shape(r)}", s_,
                            em * peak_flop_per_s, eo * peak_flop_per_s, "flop_per_s", r.source or "measured")
                   for r, b, s_, em, eo in zip(recs, bwd, s, eff_meas, model(x)))
    params = {"fwd_efficiency_max": e_f, "bwd_efficiency_max": e_b, "half_seq": sh}
    if n_knees == 2:
        params["bwd_half_seq"] = sh_b
    return fitted, GroupFit("attention", params, points, _sources(recs))


# ---------------------------------------------------------------------------------- memory
def fit_memory(records, hbm_bytes_per_s: float):
    """memory_efficiency from STREAM-like records (timed and/or published rates)."""
    recs = [r for r in records if r.op in STREAM_OPS and ((r.median_s and r.size_bytes) or r.rate_per_s)]
    rate = np.array([r.size_bytes / r.median_s if r.median_s and r.size_bytes else r.rate_per_s for r in recs])
    eff_meas = rate / hbm_bytes_per_s
    eff = float(_relative_lsq(lambda x: eff_meas / x[0] - 1.0, [min(1.0, eff_meas.max())], [1e-6], [1.0])[0])
    bw = eff * hbm_bytes_per_s
    points = tuple(PointFit("memory", f"{r.op} {r.size_bytes} B" if r.size_bytes else r.op, r.size_bytes or 0.0,
                            m, bw, "bytes_per_s", r.source or "measured") for r, m in zip(recs, rate))
    return eff, GroupFit("memory", {"memory_efficiency": eff}, points, _sources(recs))


# ---------------------------------------------------------------------------------- launch
EAGER_OP = "tiny_op"
"""The suite's launch record: one eager framework op on one element, back to back. It times
dispatch and launch together, which is ``host_op_overhead_s``; other launch records (published
raw CUDA launches) give ``launch_overhead_s``."""


def fit_launch(records, param: str = "launch_overhead_s"):
    """The constant c minimising sum((c / t - 1)^2): c = sum(1/t) / sum(1/t^2)."""
    recs = [r for r in records if r.median_s]
    t = np.array([r.median_s for r in recs])
    c = float(np.sum(1 / t) / np.sum(1 / t**2))
    group = "launch" if param == "launch_overhead_s" else "host_op"
    points = tuple(PointFit(group, f"{r.op} {r.impl or ''}".strip(), 0.0, r.median_s, c, "time_s",
                            r.source or "measured") for r in recs)
    return c, GroupFit(group, {param: c}, points, _sources(recs))


# ----------------------------------------------------------------------------- collectives
def fit_collective_group(records, op: str, fabric: str, n: int, min_bytes: float, max_regimes: int,
                         tolerance: float, num_domains: int | None = None):
    """Regime lines for one group, (op, n GPUs over num_domains domains), from records with
    S >= min_bytes; ``num_domains`` None with scale_out: more than one, count unknown."""
    recs = sorted((r for r in records if r.median_s), key=lambda r: r.size_bytes)
    use = [r for r in recs if r.size_bytes >= min_bytes]
    if len({r.size_bytes for r in use}) < 2:
        raise ValueError(f"fewer than two sizes >= {min_bytes:.0f} B")
    lines = fit_regimes([r.size_bytes for r in use], [r.median_s for r in use], max_regimes, tolerance)
    f = bus_factor(op, n)
    domains = num_domains if fabric == "scale_out" else None
    fits = tuple(CollectiveFit(op=op, fabric=fabric, num_gpus=n, num_domains=domains, latency_s=ln.latency_s,
                               busbw_bytes_per_s=f / ln.slope_s_per_byte) for ln in lines)
    group = collective_group_name(op, fabric, n, domains)
    fitted = envelope_s(lines, [r.size_bytes for r in recs])
    points = tuple(PointFit(group, f"S={r.size_bytes}", r.size_bytes, r.median_s, float(tf), "time_s",
                            r.source or "measured", in_fit=r.size_bytes >= min_bytes)
                   for r, tf in zip(recs, fitted))
    params = {f"regime{i}.{k}": v for i, c in enumerate(fits)
              for k, v in (("latency_s", c.latency_s), ("busbw_bytes_per_s", c.busbw_bytes_per_s))}
    return fits, GroupFit(group, params, points, _sources(use))


def collective_group_name(op: str, fabric: str, n: int, num_domains: int | None) -> str:
    """``collective.all_reduce.scale_up.8``; across domains ``...scale_out.16.2domains``."""
    return f"collective.{op}.{fabric}.{n}" + (f".{num_domains}domains" if num_domains else "")
