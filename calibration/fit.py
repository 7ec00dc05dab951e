"""Fit perfmodel's efficiency forms (``perfmodel/efficiency.py``) to measured records.

Every fit is least squares in relative *time* error, r = t_model / t_measured - 1 (for a
published rate with unknown time, the same r = rate_measured / rate_model - 1); the GEMM
fit uses a soft-L1 loss (``ROBUST_SCALE``) so that a few shapes outside the form's reach do
not drag the large shapes off:

=================  =====================================================================
GEMM, precision p  t = 2mnk / (P_p * eff_max * m/(m+d) * n/(n+d) * k/(k+d));  eff_max, d
grouped GEMM       not fitted: a check of t = E * t_kernel + 2mnkE / (P_bf16 * eff(m, n, k)), the
                   dense bf16 fit applied to each of the E problems of a call (``check_grouped_gemm``)
attention          t = F / (P_bf16 * eff_dir * s/(s+s_half));  eff_fwd, eff_bwd, s_half
                   (F in ``perfmodel.formulas.compute``'s convention: backward executes 2.5x forward)
memory             t = bytes / (B_hbm * memory_efficiency)
launch             t = launch_overhead_s (raw launches), host_op_overhead_s (the suite's
                   eager op, ``EAGER_OP``)
collective         t = min_i(latency_i + factor(op, n) * S / busbw_i)  per (op, fabric, n)
                   (``regimes``)
=================  =====================================================================

A group with no usable records keeps the hardware spec's default and says so in
``sources``. P_p is the spec's dense peak unless ``peaks_flop_per_s`` overrides it (a CPU
has no entry in the hardware YAMLs).
"""

from __future__ import annotations

from collections import defaultdict
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
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import HardwareSpec

from .profile import Profile, apply_profile, load_profile, write_profile  # noqa: F401  (re-export)
from .regimes import envelope_s, fit_regimes
from .results import FAST_ACCUM_IMPL, Record, Results, bus_factor
from .span import nic_efficiency, record_domains

STREAM_OPS = ("copy", "mul", "scale", "add", "triad")
"""STREAM kernels that read and write (Dot only reads, so it is left out)."""
ONE_GFLOP = 1e9
MIB = 2**20


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


@dataclass(frozen=True)
class Calibration:
    efficiencies: Efficiencies
    groups: tuple[GroupFit, ...]


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
    fitted = AttentionEfficiency(fwd_efficiency_max=float(e_f), bwd_efficiency_max=float(e_b), half_seq=float(sh),
                                 bwd_half_seq=float(sh_b) if n_knees == 2 else None)
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


# --------------------------------------------------------------------------------- combine
def _summary(g: GroupFit) -> str:
    worst = g.worst(1)[0]
    verb = "fitted to" if g.params else "checked (nothing fitted) against"
    return (f"{verb} {len(g.fitted_points)} point(s); median |error| {g.median_abs_error:.1%}, "
            f"worst {worst.rel_error:+.1%} ({worst.label})")


def _data(g: GroupFit) -> str:
    return f"{_summary(g)}; data: {'; '.join(g.sources)}"


def _fit_kernels(by_kind, spec: HardwareSpec, peak, sources, notes, groups):
    """GEMM per precision, attention, memory and launch: fitted values, or the spec's."""
    d = spec.efficiency
    gemm, by_prec = dict(d.gemm), defaultdict(list)
    kernel_overhead, t0_points = d.kernel_overhead_s, 0
    fast = [r for r in by_kind["gemm"] if r.impl == FAST_ACCUM_IMPL]
    for r in by_kind["gemm"]:
        if r.impl != FAST_ACCUM_IMPL:
            by_prec[r.precision].append(r)
    for p, recs in sorted(by_prec.items()):
        if peak(p) is None:
            notes[f"gemm.{p}"] = f"not fitted: {spec.id} has no dense {p} peak (give --peak-tflops {p}=...)"
        elif any(r.shape and r.median_s for r in recs):
            gemm[p], t0, g = fit_gemm(recs, peak(p), d.gemm.get(p) or d.gemm["bf16"], f"gemm.{p}",
                                      d.kernel_overhead_s)
            groups.append(g)
            sources[f"gemm.{p}"] = _data(g)
            if t0 is not None and len(g.fitted_points) > t0_points:   # the largest sweep sets t0
                kernel_overhead, t0_points = t0, len(g.fitted_points)
                sources["kernel_overhead_s"] = f"intercept of the {p} GEMM sweep: " + _data(g)
    fast_accum = d.fp8_fast_accum_speedup
    if fast:
        speedup, g = fit_fast_accum(fast, by_prec.get("fp8", []))
        if g is None:
            notes["fp8_fast_accum_speedup"] = "not fitted: no fp8 shape timed with both accumulations"
        else:
            fast_accum = speedup
            groups.append(g)
            sources["fp8_fast_accum_speedup"] = ("median over shapes >= 1 GFLOP of the precise fp8 time over the "
                                                 "fast-accumulation time, same shapes; " + _data(g))
    attention, memory_eff, launch = d.attention, d.memory_efficiency, d.launch_overhead_s
    att = by_kind["attention"]
    causal_only = any(r.causal for r in att) and any(r.causal is False for r in att)
    if causal_only:     # the step model times causal attention; the rest stays in the file
        att = [r for r in att if r.causal]
    if att and peak("bf16"):
        attention, g = fit_attention(att, peak("bf16"), d.attention)
        groups.append(g)
        kept = [k for k in ("fwd", "bwd") if not any(r.op.endswith(k) for r in att)]
        kept += ["half_seq"] * (len({r.attention_seq for r in att}) < 2)
        sources["attention"] = (_data(g) + (f"; spec default kept for {', '.join(kept)}" if kept else "")
                                + ("; causal records only (the step model times causal attention)" * causal_only))
    if any(r.op in STREAM_OPS for r in by_kind["hbm"]):
        memory_eff, g = fit_memory(by_kind["hbm"], spec.gpu.hbm_bandwidth_bytes_per_s)
        groups.append(g)
        sources["memory_efficiency"] = _data(g)
    host_op = d.host_op_overhead_s
    eager = [r for r in by_kind["launch"] if r.op == EAGER_OP and r.median_s]
    raw = [r for r in by_kind["launch"] if r.op != EAGER_OP and r.median_s]
    if raw:
        launch, g = fit_launch(raw, "launch_overhead_s")
        groups.append(g)
        sources["launch_overhead_s"] = _data(g)
    if eager:
        host_op, g = fit_launch(eager, "host_op_overhead_s")
        groups.append(g)
        sources["host_op_overhead_s"] = _data(g) + " (one eager framework op on one element: a lower bound)"
    out = {"gemm": gemm, "attention": attention, "memory_efficiency": memory_eff, "launch_overhead_s": launch,
           "host_op_overhead_s": host_op, "kernel_overhead_s": kernel_overhead, "fp8_fast_accum_speedup": fast_accum}
    if by_kind["grouped"] and spec.gpu.supports("bf16"):
        groups.append(check_grouped_gemm(by_kind["grouped"], spec, d.model_copy(update=out)))
    return out


def _fit_collectives(records, spec: HardwareSpec, min_bytes, max_regimes, tolerance, sources, notes, groups):
    """Regime fits per group (op, fabric, n, domains spanned: ``span.record_domains``);
    scale_up_bus_efficiency where a ring curve gives it, scale_out_bus_efficiency where a curve
    over known domains measures the NICs (``span.nic_efficiency``)."""
    keyed, collectives, ring_busbw, spanning = defaultdict(list), [], {}, []
    for r in records:
        keyed[(r.op, r.fabric, r.num_gpus, record_domains(r.fabric, r.num_hosts, spec))].append(r)
    for (op, fabric, n, domains), recs in sorted(keyed.items(), key=lambda kv: (*kv[0][:3], kv[0][3] or 0)):
        try:
            fits, g = fit_collective_group(recs, op, fabric, n, min_bytes, max_regimes, tolerance, domains)
        except ValueError as exc:
            name = collective_group_name(op, fabric, n, domains if fabric == "scale_out" else None)
            notes[name] = f"not fitted: {exc}"
            continue
        groups.append(g)
        collectives += fits
        sources[g.group] = f"{len(fits)} regime(s) over S >= {min_bytes:.0f} B; {_data(g)}"
        if fabric == "scale_up" and n == spec.scale_up.domain_size and op != "all_to_all":
            ring_busbw[op] = max(c.busbw_bytes_per_s for c in fits)
        if fabric == "scale_out":
            spanning.append(fits)
    out = {"collectives": tuple(collectives)}
    if collectives:
        sources["collectives"] = ("measured fits per (op, group size, domains spanned), each replacing the time of "
                                  "that group only; several entries for one group are regimes: t = min_i(latency_i + "
                                  "factor*S/busbw_i)")
    if ring_busbw and spec.scale_up.in_network_reduction:
        notes["scale_up_bus_efficiency"] = ("NVLink SHARP (in-switch reduction) lifts all-reduce busbw above the "
                                            "link rate, so it does not measure a ring's bus efficiency")
    elif ring_busbw:
        op, bw = max(ring_busbw.items(), key=lambda kv: kv[1])
        out["scale_up_bus_efficiency"] = min(1.0, bw / spec.scale_up.bandwidth_bytes_per_s)
        sources["scale_up_bus_efficiency"] = (
            f"largest-message busbw of the fitted {op} over {spec.scale_up.domain_size} GPUs, "
            f"{bw / 1e9:.1f} GB/s / {spec.scale_up.bandwidth_per_direction_gb_per_s:g} GB/s per direction")
    up_eff = out.get("scale_up_bus_efficiency", spec.efficiency.scale_up_bus_efficiency)
    nic = [(e, why) for e, why in (nic_efficiency(f, spec, up_eff) for f in spanning) if e is not None]
    if nic:
        e, why = max(nic)
        out["scale_out_bus_efficiency"] = e
        sources["scale_out_bus_efficiency"] = (
            f"the NIC bus efficiency at which the model's cross-domain collective (perfmodel.formulas.comm."
            f"across_domains_s) matches the fitted {why}; {spec.scale_out.nics_per_gpu:g} x "
            f"{spec.scale_out.nic_bandwidth_gbit_per_s:g} Gb/s per GPU")
    elif spanning:
        why = dict.fromkeys(nic_efficiency(f, spec, up_eff)[1] for f in spanning)
        notes["scale_out_bus_efficiency"] = "; ".join(why)
    return out


SKIP_KEYS = {"gemm": ("gemm", "kernel_overhead_s", "fp8_fast_accum_speedup"), "grouped": (),
             "attention": ("attention",), "hbm": ("memory_efficiency",), "launch": ("launch_overhead_s",),
             "collective": ("scale_up_bus_efficiency", "scale_out_bus_efficiency")}
SKIPPABLE = tuple(SKIP_KEYS)
"""Record groups ``fit_efficiencies`` can be told to leave unfitted (``grouped``: expert GEMMs, which are
only checked against the dense curve, never fitted: skipping them leaves the check out)."""


def select_impl(records, impl: str | None, option: str, what: str) -> list:
    """The records of kernel ``impl``; all of them when they come from one kernel. Kernels
    reach different rates, so records of two are never fitted together."""
    impls = sorted({r.impl or "unnamed" for r in records})
    if impl is None:
        if len(impls) > 1:
            raise InputError(option, f"the results time several {what} kernels ({', '.join(impls)}); "
                             "name the one the training stack uses")
        return list(records)
    chosen = [r for r in records if (r.impl or "unnamed") == impl]
    if not chosen:
        raise InputError(option, f"no {what} records of {impl!r}; the results have {', '.join(impls) or 'none'}")
    return chosen


def fit_efficiencies(results: list[Results], spec: HardwareSpec, peaks_flop_per_s: dict[str, float] | None = None,
                     min_collective_bytes: float = MIB, max_regimes: int = 3, tolerance: float = 0.10,
                     missing_reason: str = "no usable records", attention_impl: str | None = None,
                     grouped_impl: str | None = None, skip: tuple[str, ...] = ()) -> Calibration:
    """Fit every group the records cover; keep the spec's defaults (and say why) for the others.

    ``attention_impl`` and ``grouped_impl`` pick one kernel where the records time several
    (the suite times each SDPA backend, and grouped GEMMs two ways). ``skip`` names groups
    (``SKIPPABLE``) whose records are left unfitted, so the spec or profile value stays."""
    unknown = sorted(set(skip) - set(SKIPPABLE))
    if unknown:
        raise InputError("--skip", f"unknown group {unknown[0]!r}; use one of {', '.join(SKIPPABLE)}")
    by_kind = defaultdict(list)
    for r in (r for res in results for r in res.records):
        kind = "grouped" if r.kind == "gemm" and r.groups else r.kind
        if kind not in skip:
            by_kind[kind].append(r)
    by_kind["attention"] = select_impl(by_kind["attention"], attention_impl, "--attention-impl", "attention")
    if by_kind["grouped"]:
        by_kind["grouped"] = select_impl(by_kind["grouped"], grouped_impl, "--grouped-impl", "grouped GEMM")
    d = spec.efficiency
    sources, notes, groups = {}, {}, []

    def peak(p):
        if peaks_flop_per_s and p in peaks_flop_per_s:
            return peaks_flop_per_s[p]
        return spec.gpu.peak_flop_per_s(p) if spec.gpu.supports(p) else None

    for group in skip:
        for key in SKIP_KEYS[group]:
            notes[key] = f"measured records not fitted (--skip {group})"
    values = d.model_dump(exclude={"sources"})
    values.update(_fit_kernels(by_kind, spec, peak, sources, notes, groups))
    values.update(_fit_collectives(by_kind["collective"], spec, min_collective_bytes, max_regimes, tolerance,
                                   sources, notes, groups))
    for key in ("gemm", "attention", "memory_efficiency", "kernel_overhead_s", "launch_overhead_s", "scale_up_bus_efficiency",
                "scale_out_bus_efficiency", "scale_up_latency_s", "scale_out_latency_s", "fp8_fast_accum_speedup",
                "attention_clock_ratio", "stream_fractions", "overlap_compute_slowdown"):
        why = notes.pop(key, missing_reason)
        if key == "gemm" and any(k.startswith("gemm.") for k in sources):
            status = ", ".join(f"{p} {'fitted' if f'gemm.{p}' in sources else 'spec default'}"
                               for p in sorted(values["gemm"]))
            sources[key] = f"per precision: {status}; spec default source: {d.sources.get('gemm', '')}"
        elif key not in sources:
            sources[key] = f"spec default ({spec.id}): {d.sources.get(key, 'no source given')} [{why}]"
    sources.update(notes)
    return Calibration(Efficiencies(**{**values, "sources": sources}), tuple(groups))


def quality_lines(cal: Calibration) -> dict[str, str]:
    return {g.group: _summary(g) for g in cal.groups}


@dataclass(frozen=True)
class Check:
    """A must-show accuracy figure: points in a band within a tolerance."""

    name: str
    tolerance: float
    num_points: int
    num_within: int
    worst: PointFit | None


def accuracy_checks(cal: Calibration) -> tuple[Check, ...]:
    """GEMMs >= 1 GFLOP and HBM copies within 5%; collectives 1 MiB .. 8 GiB within 10%."""
    pts = [p for g in cal.groups for p in g.points]
    bands = (
        ("GEMMs >= 1 GFLOP", 0.05, [p for p in pts if p.group.startswith("gemm.") and p.x >= ONE_GFLOP]),
        ("HBM copies", 0.05, [p for p in pts if p.group == "memory" and p.label.startswith("copy")]),
        ("collectives 1 MiB..8 GiB", 0.10,
         [p for p in pts if p.group.startswith("collective.") and MIB <= p.x <= 8 * 2**30]),
    )
    out = []
    for name, tol, band in bands:
        within = sum(abs(p.rel_error) <= tol for p in band)
        worst = max(band, key=lambda p: abs(p.rel_error)) if band else None
        out.append(Check(name, tol, len(band), within, worst))
    return tuple(out)


def require_records(results: list[Results]) -> None:
    if not any(res.records for res in results):
        raise InputError("results", "no records to fit")
