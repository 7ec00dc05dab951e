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

from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import HardwareSpec

from .fit_forms import (
    EAGER_OP,
    ONE_GFLOP,
    STREAM_OPS,
    GroupFit,
    PointFit,
    check_grouped_gemm,
    collective_group_name,
    fit_attention,
    fit_collective_group,
    fit_fast_accum,
    fit_gemm,
    fit_launch,
    fit_memory,
)
from .profile import Profile, apply_profile, load_profile, write_profile  # noqa: F401  (re-export)
from .results import FAST_ACCUM_IMPL, Results
from .span import nic_efficiency, record_domains

MIB = 2**20


@dataclass(frozen=True)
class Calibration:
    efficiencies: Efficiencies
    groups: tuple[GroupFit, ...]


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
