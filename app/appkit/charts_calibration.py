"""The Calibration page's charts: fitted efficiency curves against measured points, predicted
against measured throughput, software histories (types stated, units on every axis)."""

from __future__ import annotations

import altair as alt
import pandas as pd

from perfmodel.spec.units import TERA

from .charts import WIDTH

FIT_AXES = {
    "gemm": ("GEMM work (FLOP per call)", "achieved (TFLOP/s)"),
    "attention": ("sequence length (tokens)", "achieved (TFLOP/s)"),
    "memory": ("STREAM kernel", "achieved bandwidth (GB/s)"),
    "collective": ("message size (bytes)", "time per call (us)"),
    "launch": ("item", "time (us)"),
    "host_op": ("item", "time (us)"),
    "grouped_gemm": ("work of one call, all experts (FLOP)", "achieved (TFLOP/s)"),
}
"""Group family -> (x title, y title) of its chart."""
FIT_AXES["gemm_fast_accum"] = FIT_AXES["gemm"]   # the same GEMM sweep, timed with fast accumulation


def _fit_frame(points: list[dict]) -> pd.DataFrame:
    """Measured and fitted values of one group family in display units, long form."""
    rows = []
    for p in points:
        q, x = p["quantity"], p["x"]
        if q == "time_s" and "gemm" in p["group"]:     # time of x FLOPs -> rate
            m, f, unit = x / p["measured"], x / p["fitted"], TERA
        elif q == "time_s":
            m, f, unit = p["measured"], p["fitted"], 1e-6
        elif q == "flop_per_s":
            m, f, unit = p["measured"], p["fitted"], TERA
        else:
            m, f, unit = p["measured"], p["fitted"], 1e9
        for kind, val in (("measured", m), ("fitted", f)):
            rows.append({"group": p["group"], "label": p["label"], "x": x, "kind": kind, "value": val / unit,
                         "rel_error": p["rel_error"], "source": p["source"],
                         "used": "used in the fit" if p["in_fit"] else "left out"})
    return pd.DataFrame(rows)


def fit_curve(points: list[dict], family: str) -> alt.Chart:
    """Measured points (filled) against the fitted model at the same abscissa (open, joined)."""
    x_title, y_title = FIT_AXES.get(family, ("x", "value"))
    df = _fit_frame(points)
    tip = [alt.Tooltip("group:N"), alt.Tooltip("label:N"), alt.Tooltip("kind:N"),
           alt.Tooltip("value:Q", format=".4g", title=y_title), alt.Tooltip("rel_error:Q", format="+.1%", title="error"),
           alt.Tooltip("used:N"), alt.Tooltip("source:N")]
    y = alt.Y("value:Q", title=y_title, scale=alt.Scale(zero=False))
    if family == "memory" or (df["x"] <= 0).all():   # STREAM kernels, or no abscissa: a bar pair per label
        return alt.Chart(df).mark_bar().encode(
            x=alt.X("label:N", title=x_title), xOffset=alt.XOffset("kind:N"), y=y.scale(zero=True),
            color=alt.Color("kind:N", title="value"), tooltip=tip,
        ).properties(height=260, width=WIDTH)
    x = alt.X("x:Q", scale=alt.Scale(type="log"), title=x_title, axis=alt.Axis(format="~s"))   # 10M, 1G, 10T
    ylog = y.scale(type="log")
    meas = alt.Chart(df[df["kind"] == "measured"]).mark_point(filled=True, size=70).encode(
        x=x, y=ylog, color=alt.Color("group:N", title="group"), shape=alt.Shape("used:N", title="point"), tooltip=tip)
    fit = alt.Chart(df[df["kind"] == "fitted"].sort_values("x")).mark_line(
        strokeDash=[5, 3], point=alt.OverlayMarkDef(filled=False, size=50)).encode(
        x=x, y=ylog, color=alt.Color("group:N"), detail="group:N", tooltip=tip)
    return alt.layer(meas, fit).properties(height=300, width=WIDTH)


BANDS = (0.10, 0.20)


def predicted_vs_measured(rows: list[dict]) -> alt.LayerChart:
    """Predicted against measured tokens/s per GPU on log axes, y = x with +-10% and +-20% bands."""
    df = pd.DataFrame(rows)
    df["measured"] = df["measured_tokens_per_s_per_gpu"]
    df["predicted"] = df["predicted_tokens_per_s_per_gpu"]
    lo, hi = float(min(df["measured"].min(), df["predicted"].min())) * 0.7, \
        float(max(df["measured"].max(), df["predicted"].max())) * 1.4
    xs = [lo * (hi / lo) ** (i / 40) for i in range(41)]
    band_rows = [{"measured": x, "lo": x * (1 - b), "hi": x * (1 + b), "band": f"±{b:.0%}"}
                 for b in BANDS for x in xs]
    bands = pd.DataFrame(band_rows)
    x = alt.X("measured:Q", scale=alt.Scale(type="log", domain=[lo, hi]),
              title="measured (tokens/s per GPU)")
    y_scale = alt.Scale(type="log", domain=[lo, hi])
    area = alt.Chart(bands).mark_area(opacity=0.45).encode(
        x=x, y=alt.Y("lo:Q", scale=y_scale, title="predicted (tokens/s per GPU)"), y2="hi:Q",
        color=alt.Color("band:N", title="error band", scale=alt.Scale(domain=["±10%", "±20%"],
                                                                     range=["#74c476", "#c7e9c0"])),
    )
    diag = alt.Chart(pd.DataFrame({"measured": [lo, hi], "predicted": [lo, hi]})).mark_line(color="black").encode(
        x=x, y=alt.Y("predicted:Q", scale=y_scale))
    pts = alt.Chart(df).mark_point(filled=True, size=45).encode(
        x=x, y=alt.Y("predicted:Q", scale=y_scale),
        shape=alt.Shape("hardware:N", title="hardware"),
        color=alt.Color("hardware:N", title="hardware", scale=alt.Scale(scheme="tableau10")),
        tooltip=[alt.Tooltip("id:N", title="case"), alt.Tooltip("hardware:N"), alt.Tooltip("basis:N"),
                 alt.Tooltip("measured:Q", format=",.0f"), alt.Tooltip("predicted:Q", format=",.0f"),
                 alt.Tooltip("error:Q", format="+.1%"), alt.Tooltip("bottleneck:N")],
    )
    return alt.layer(area, diag, pts).resolve_scale(color="independent").properties(height=440, width=WIDTH)


def software_history(rows: list[dict], predicted_tflop_per_s: float) -> alt.LayerChart:
    """Measured TFLOP/s per GPU after each software change, with perfmodel's prediction as a rule."""
    df = pd.DataFrame(rows)
    y = alt.Y("measured_tflop_per_s:Q", title="model FLOP/s per GPU (TFLOP/s)")
    bars = alt.Chart(df).mark_bar().encode(
        x=alt.X("step:O", title="software change, in order"), y=y,
        color=alt.Color("dispatcher:N", title="EP dispatcher", scale=alt.Scale(scheme="tableau10")),
        tooltip=[alt.Tooltip("step:O"), alt.Tooltip("change:N"), alt.Tooltip("dispatcher:N"),
                 alt.Tooltip("measured_tflop_per_s:Q", title="measured TFLOP/s", format=",.0f"),
                 alt.Tooltip("fraction_of_model:Q", title="of perfmodel", format=".0%")],
    )
    rule = alt.Chart(pd.DataFrame({"predicted": [predicted_tflop_per_s], "label": ["perfmodel"]})).mark_rule(
        color="black", strokeDash=[6, 3]).encode(
        y=alt.Y("predicted:Q", title="model FLOP/s per GPU (TFLOP/s)"),
        tooltip=[alt.Tooltip("label:N", title=""), alt.Tooltip("predicted:Q", title="TFLOP/s", format=",.0f")])
    return alt.layer(bars, rule).properties(height=320, width=WIDTH)
