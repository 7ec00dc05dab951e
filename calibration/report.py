"""Fit quality for people: text tables, a CSV of measured versus fitted, an HTML chart.

The only module of ``calibration`` that formats numbers.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from perfmodel.spec.errors import InputError, check_output_path, write_text_file

from .fit import Calibration, accuracy_checks

UNITS = {"time_s": (1e-6, "us"), "flop_per_s": (1e12, "TFLOP/s"), "bytes_per_s": (1e9, "GB/s")}


def _value(v: float, quantity: str) -> str:
    scale, unit = UNITS[quantity]
    return f"{v / scale:.4g} {unit}"


def _param(name: str, v: float) -> str:
    if name.endswith("_bytes_per_s"):
        return f"{name}={v / 1e9:.4g} GB/s"
    if name.endswith("_s"):
        return f"{name}={v * 1e6:.3g} us"
    return f"{name}={v:.4g}"


def quality_text(cal: Calibration, hardware_id: str, worst: int = 3) -> str:
    lines = [f"fit quality for {hardware_id} (relative error of the predicted time; + = model slower)"]
    for g in cal.groups:
        n = len(g.fitted_points)
        lines.append(f"  {g.group:<34} {n:3d} points  median |err| {g.median_abs_error:6.1%}  "
                     f"worst {g.max_abs_error:6.1%}")
        lines.append("      " + (", ".join(_param(k, v) for k, v in g.params.items())
                                 or "a check: nothing fitted to these points"))
        for p in g.worst(worst):
            lines.append(f"      {p.rel_error:+7.1%}  {p.label}  measured {_value(p.measured, p.quantity)}, "
                         f"fitted {_value(p.fitted, p.quantity)}  [{p.source[:60]}]")
    lines.append("  accuracy checks:")
    for c in accuracy_checks(cal):
        if not c.num_points:
            lines.append(f"    {c.name:<26} no points")
            continue
        w = c.worst
        lines.append(f"    {c.name:<26} {c.num_within}/{c.num_points} within {c.tolerance:.0%}; "
                     f"worst {w.rel_error:+.1%} ({w.group} {w.label})")
    for key, text in cal.efficiencies.sources.items():
        if text.startswith("spec default"):
            lines.append(f"  kept default: {key}: {text[:140]}")
    return "\n".join(lines)


def write_points_csv(cal: Calibration, path, field: str = "--plot", inputs=()) -> Path:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(["group", "label", "x", "measured", "fitted", "quantity", "rel_error", "in_fit", "source"])
    for g in cal.groups:
        for p in g.points:
            w.writerow([g.group, p.label, p.x, p.measured, p.fitted, p.quantity, f"{p.rel_error:.6f}",
                        p.in_fit, p.source])
    return write_text_file(Path(path), buf.getvalue(), field, inputs)


def write_plot(cal: Calibration, path, field: str = "--plot", inputs=()) -> list[Path]:
    """A CSV always; for an ``.html`` path also an altair chart when altair is installed."""
    path = Path(path)
    if path.suffix != ".html":
        return [write_points_csv(cal, path, field, inputs)]
    check_output_path(path, field, inputs)
    written = [write_points_csv(cal, path.with_suffix(".csv"), field, inputs)]
    try:
        import altair as alt
    except ImportError:
        return written
    rows = [{"group": g.group, "label": p.label, "x": p.x or 1.0, "series": series, "value": value,
             "rel_error": p.rel_error, "quantity": p.quantity}
            for g in cal.groups for p in g.points
            for series, value in (("measured", p.measured), ("fitted", p.fitted))]
    chart = alt.Chart(alt.Data(values=rows)).mark_point().encode(
        x=alt.X("x:Q", scale=alt.Scale(type="log"), title="FLOPs / bytes / sequence length"),
        y=alt.Y("value:Q", scale=alt.Scale(type="log"), title="time (s) or rate"),
        color=alt.Color("series:N"), shape=alt.Shape("series:N"),
        tooltip=["group:N", "label:N", "series:N", "value:Q", "rel_error:Q"],
    ).properties(width=320, height=220).facet(facet=alt.Facet("group:N"), columns=3).resolve_scale(y="independent")
    try:
        chart.save(str(path))
    except OSError as exc:
        raise InputError(field, f"cannot write {path} ({exc.strerror or type(exc).__name__})") from None
    return written + [path]
