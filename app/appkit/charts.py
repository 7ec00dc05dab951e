"""Altair charts from long-form rows. Every encoding states its type; every axis its unit.

Values arrive in SI units; this module converts them to display units (GiB, TFLOP/s, days)
with the named prefixes of ``perfmodel.spec.units``, at the edge.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from perfmodel.api import BREAKDOWN_COMPONENTS as COMPONENTS
from perfmodel.api import LENS
from perfmodel.api import TIMELINE_PHASES as PHASES
from perfmodel.spec.units import GIBI, SECONDS_PER_DAY, TERA

PHASE_COLOURS = ("#4c78a8", "#f58518", "#e45756", "#9d9d9d", "#f2cf5b", "#72b7b2")
"""One per ``perfmodel.api.TIMELINE_PHASES``: forward, backward, exposed comm, optimizer + DP
sync, weight gradient (zero-bubble and DualPipe schedules), paired forward + backward (DualPipe)."""
WIDTH = "container"
PALETTE = "tableau20"
"""Twenty distinct colours: enough for every hardware type or component on one chart."""
USD_FORMAT = "$~s"
"""Money on an axis as $2.5M, not 2,500,000 (d3-format's SI type with the currency symbol)."""


def money_axis(**kw) -> alt.Axis:
    return alt.Axis(format=USD_FORMAT, **kw)


def breakdown(rows: list[dict]) -> alt.LayerChart:
    """Step time as one stacked bar: where the seconds go, by component, each part labelled with its
    seconds where it is wide enough (5% of the step or more) and the total at the bar's end."""
    df = pd.DataFrame(rows)
    df["step"] = "one optimizer step"
    df["lens"] = df["component"].map(LENS)
    df["order"] = df["component"].map({c: i for i, c in enumerate(COMPONENTS)})
    df = df.sort_values("order")
    df["end"] = df["seconds"].cumsum()
    df["mid"] = df["end"] - df["seconds"] / 2
    df["label"] = [f"{x:.3g} s" if share >= 0.05 else "" for x, share in zip(df["seconds"], df["share"])]
    total = float(df["seconds"].sum())
    bars = alt.Chart(df).mark_bar().encode(
        x=alt.X("seconds:Q", stack="zero", title="time per optimizer step (s)",
                scale=alt.Scale(domainMax=total * 1.12)),
        y=alt.Y("step:N", title=None),
        color=alt.Color("component:N", sort=list(COMPONENTS), title="component", scale=alt.Scale(scheme=PALETTE)),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("component:N"), alt.Tooltip("seconds:Q", format=".4g", title="seconds"),
                 alt.Tooltip("share:Q", format=".1%"), alt.Tooltip("lens:N")],
    )
    parts = alt.Chart(df).mark_text(color="white", fontSize=11).encode(
        x=alt.X("mid:Q", title="time per optimizer step (s)"), y=alt.Y("step:N", title=None), text="label:N")
    end = alt.Chart(pd.DataFrame({"x": [total], "step": ["one optimizer step"], "label": [f"{total:.3g} s"]})) \
        .mark_text(align="left", dx=4, fontWeight="bold").encode(
            x=alt.X("x:Q", title="time per optimizer step (s)"), y=alt.Y("step:N", title=None), text="label:N")
    return alt.layer(bars, parts, end).properties(height=140, width=WIDTH)


def memory(rows: dict, usable_bytes: float, capacity_bytes: float) -> alt.LayerChart:
    """Memory per GPU by component, against the usable HBM (red rule) and the capacity."""
    df = pd.DataFrame([{"component": k, "GiB": v / GIBI} for k, v in rows.items() if v > 0])
    df["gpu"] = "most loaded GPU"
    bars = alt.Chart(df).mark_bar().encode(
        x=alt.X("GiB:Q", stack="zero", title="memory per GPU (GiB)",
                scale=alt.Scale(domainMax=max(df["GiB"].sum(), capacity_bytes / GIBI) * 1.05)),
        y=alt.Y("gpu:N", title=None),
        color=alt.Color("component:N", title="component"),
        tooltip=[alt.Tooltip("component:N"), alt.Tooltip("GiB:Q", format=".2f", title="GiB")],
    )
    lines = pd.DataFrame([{"limit": "usable HBM", "GiB": usable_bytes / GIBI},
                          {"limit": "HBM capacity", "GiB": capacity_bytes / GIBI}])
    rule = alt.Chart(lines).mark_rule(strokeWidth=2).encode(
        x=alt.X("GiB:Q"),
        color=alt.value("#d62728"),
        strokeDash=alt.StrokeDash("limit:N", title="limit"),
        tooltip=[alt.Tooltip("limit:N"), alt.Tooltip("GiB:Q", format=".1f", title="GiB")],
    )
    return alt.layer(bars, rule).properties(height=140, width=WIDTH)


def stage_memory(rows: list[dict], usable_bytes: float) -> alt.LayerChart:
    """Memory per GPU of each pipeline stage, by component, against the usable HBM (red rule)."""
    df = pd.DataFrame(rows)
    df["GiB"] = df["bytes"] / GIBI
    df = df[df["GiB"] > 0]
    totals = df.groupby("stage")["GiB"].sum()
    top = max(float(totals.max()), usable_bytes / GIBI) * 1.08
    bars = alt.Chart(df).mark_bar().encode(
        x=alt.X("stage:O", title="pipeline stage (rank)"),
        y=alt.Y("GiB:Q", stack="zero", title="memory per GPU (GiB)", scale=alt.Scale(domainMax=top)),
        color=alt.Color("component:N", title="component", scale=alt.Scale(scheme=PALETTE)),
        tooltip=[alt.Tooltip("stage:O"), alt.Tooltip("component:N"), alt.Tooltip("GiB:Q", format=".2f")],
    )
    t = pd.DataFrame({"stage": totals.index, "GiB": totals.values,
                      "label": [f"{x:.3g}" for x in totals.values]})
    text = alt.Chart(t).mark_text(dy=-6, fontSize=11).encode(
        x=alt.X("stage:O", title="pipeline stage (rank)"), y=alt.Y("GiB:Q", title="memory per GPU (GiB)"),
        text="label:N")
    rule = alt.Chart(pd.DataFrame({"GiB": [usable_bytes / GIBI], "limit": ["usable HBM"]})).mark_rule(
        color="#d62728", strokeDash=[6, 3], strokeWidth=2).encode(
        y=alt.Y("GiB:Q", title="memory per GPU (GiB)"), tooltip=[alt.Tooltip("limit:N"),
                                                               alt.Tooltip("GiB:Q", format=".1f")])
    return alt.layer(bars, text, rule).properties(height=280, width=WIDTH)


def roofline(points: list[dict], roofs: list[dict]) -> alt.LayerChart:
    """Log-log roofline: achieved TFLOP/s against arithmetic intensity, per op."""
    p = pd.DataFrame([x for x in points if x["arithmetic_intensity_flop_per_byte"] > 0])
    p["TFLOP/s"] = p["achieved_flop_per_s"] / TERA
    p["ms"] = p["time_s"] * 1e3
    r = pd.DataFrame(roofs)
    r["TFLOP/s"] = r["flop_per_s"] / TERA
    bandwidth = float((r["flop_per_s"] / r["arithmetic_intensity_flop_per_byte"]).max())   # the slope
    ridge = float(r["flop_per_s"].max()) / bandwidth
    lo = min(ridge, float(p["arithmetic_intensity_flop_per_byte"].min())) / 30
    hi = max(ridge, float(p["arithmetic_intensity_flop_per_byte"].max())) * 10
    r = r[(r["arithmetic_intensity_flop_per_byte"] >= lo) & (r["arithmetic_intensity_flop_per_byte"] <= hi)]
    x = alt.X("arithmetic_intensity_flop_per_byte:Q", scale=alt.Scale(type="log", domain=[lo, hi]),
              title="arithmetic intensity (FLOP/byte)")
    y = alt.Y("TFLOP/s:Q", scale=alt.Scale(type="log"), title="achieved (TFLOP/s)")
    lines = alt.Chart(r).mark_line(color="#555", clip=True).encode(
        x=x, y=y, detail="roof:N",
        strokeDash=alt.StrokeDash("level:N", title="roof", sort=["peak", "achievable"]),
        tooltip=[alt.Tooltip("roof:N")],
    )
    dots = alt.Chart(p).mark_point(filled=True, opacity=0.85, size=140).encode(
        x=x, y=y,
        color=alt.Color("op:N", title="operation"),
        shape=alt.Shape("group:N", title="where"),
        tooltip=[alt.Tooltip("op:N"), alt.Tooltip("group:N"), alt.Tooltip("bound:N"),
                 alt.Tooltip("arithmetic_intensity_flop_per_byte:Q", format=".4g", title="FLOP/byte"),
                 alt.Tooltip("TFLOP/s:Q", format=".4g"), alt.Tooltip("ms:Q", format=".3g", title="ms (fwd+bwd)")],
    )
    return alt.layer(dots, lines).resolve_scale(color="independent").properties(height=380, width=WIDTH)


def timeline(rows: list[dict]) -> alt.Chart:
    """Gantt chart of the pipeline schedule: one row per stage, gaps are the bubble."""
    df = pd.DataFrame(rows)
    df["label"] = [f"mb {m}, chunk {c}" if m >= 0 else "" for m, c in zip(df["microbatch"], df["chunk"])]
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("start_s:Q", title="time within the step (s)"),
        x2="end_s:Q",
        y=alt.Y("stage:O", title="pipeline stage (rank)"),
        color=alt.Color("phase:N", scale=alt.Scale(domain=list(PHASES), range=list(PHASE_COLOURS)),
                        title="phase"),
        tooltip=[alt.Tooltip("stage:O"), alt.Tooltip("phase:N"), alt.Tooltip("label:N", title="work"),
                 alt.Tooltip("start_s:Q", format=".4f", title="start (s)"),
                 alt.Tooltip("end_s:Q", format=".4f", title="end (s)")],
    ).properties(height=max(140, 36 * (int(df["stage"].max()) + 1)), width=WIDTH)


def _band_columns(df: pd.DataFrame, rows: list[dict], band_key: str | None, scale: float) -> bool:
    """Add ``lo``/``hi`` (p10, p90 of the error band, in display units) where the rows carry a
    band for ``band_key``; True when every row does."""
    bands = [((r.get("band") or {}).get(band_key) if band_key else None) for r in rows]
    if not bands or any(b is None for b in bands):
        return False
    df["lo"] = [b["p10"] / scale for b in bands]
    df["hi"] = [b["p90"] / scale for b in bands]
    return True


def hardware_bars(rows: list[dict], field: str, title: str, scale: float = 1.0, band_key: str | None = None,
                  category: str = "hardware", money: bool = False, percent: bool = False) -> alt.LayerChart:
    """One bar per hardware (or per ``category``: the software stack) and layout, for one metric,
    its value written at the bar's end; with ``band_key``, the error band's p10-p90 as an error
    bar on each; ``money``: the axis and labels in $ with SI prefixes; ``percent``: a fraction
    shown as a percentage (MFU 0.436 is "43.6%", never SI's "436m")."""
    rows = [r for r in rows if r.get(field) is not None and not r.get("reason")]
    df = pd.DataFrame(rows)
    if df.empty:
        df = pd.DataFrame({category: [], "layout": [], field: []})
    df["value"] = df[field] / scale
    banded = _band_columns(df, rows, band_key, scale)
    tip = [alt.Tooltip(f"{category}:N"), alt.Tooltip("layout:N"), alt.Tooltip("value:Q", format=".4g", title=title)]
    if banded:
        tip += [alt.Tooltip("lo:Q", format=".4g", title="p10"), alt.Tooltip("hi:Q", format=".4g", title="p90")]
    fmt_ = USD_FORMAT if money else ".0%" if percent else "~s"
    top = float(max(df["hi"].max() if banded else 0.0, df["value"].max() if len(df) else 0.0) or 1.0)
    x = alt.X("value:Q", title=title, axis=alt.Axis(format=fmt_, tickCount=4), scale=alt.Scale(domainMax=top * 1.25))
    y = alt.Y(f"{category}:N", title=None, sort="x", axis=alt.Axis(labelLimit=160))
    bars = alt.Chart(df).mark_bar().encode(
        x=x, y=y, color=alt.Color("layout:N", title="layout"), yOffset=alt.YOffset("layout:N"), tooltip=tip)
    labels = alt.Chart(df).mark_text(align="left", dx=4, fontSize=11).encode(
        x=alt.X("hi:Q" if banded else "value:Q", title=title), y=y, yOffset=alt.YOffset("layout:N"),
        text=alt.Text("value:Q", format="$.3~s" if money else ".1%" if percent else ".3~s"))
    height = max(100, 22 * df[category].nunique() * max(1, df["layout"].nunique() if "layout" in df else 1))
    layers = [bars, labels]
    if banded:
        layers.insert(1, alt.Chart(df).mark_rule(color="black").encode(
            x=alt.X("lo:Q", title=title), x2="hi:Q", y=y, yOffset=alt.YOffset("layout:N"), tooltip=tip))
    return alt.layer(*layers).properties(height=height, width=WIDTH)


def time_unit(time_basis: str) -> tuple[float, str]:
    return (SECONDS_PER_DAY, "time to train (days)") if time_basis == "time_to_train_s" else (1.0, "step time (s)")


def pareto(cloud: list[dict], front: list[dict], time_basis: str) -> alt.LayerChart:
    """Every fitting layout (time against cost), the Pareto front drawn over it."""
    scale, title = time_unit(time_basis)
    c = pd.DataFrame(cloud)
    c["time"] = c["time_s"] / scale
    f = pd.DataFrame(front)
    f["time"] = f[time_basis] / scale
    base = alt.Chart(c).mark_circle(size=14, opacity=0.35).encode(
        x=alt.X("time:Q", title=title, scale=alt.Scale(type="log")),
        y=alt.Y("cost_usd:Q", title="cost (USD)", scale=alt.Scale(type="log"), axis=money_axis()),
        color=alt.Color("bottleneck:N", title="bottleneck", scale=alt.Scale(scheme=PALETTE)),
        tooltip=[alt.Tooltip("time:Q", format=".4g", title=title), alt.Tooltip("cost_usd:Q", format=",.0f"),
                 alt.Tooltip("mfu:Q", format=".1%"), alt.Tooltip("num_gpus:Q"), alt.Tooltip("bottleneck:N")],
    )
    line = alt.Chart(f).mark_line(point=alt.OverlayMarkDef(size=60, color="black"), color="black").encode(
        x="time:Q", y="cost_usd:Q",
        tooltip=[alt.Tooltip("time:Q", format=".4g", title=title), alt.Tooltip("cost_usd:Q", format=",.0f"),
                 alt.Tooltip("num_gpus:Q"), alt.Tooltip("tp:Q"), alt.Tooltip("pp:Q"), alt.Tooltip("dp:Q")],
    )
    return alt.layer(base, line).properties(height=380, width=WIDTH)


def rejected(reasons: dict, top: int = 10) -> alt.Chart:
    items = list(reasons.items())[:top]
    df = pd.DataFrame([{"reason": k if len(k) <= 70 else k[:67] + "...", "full": k, "layouts": v} for k, v in items])
    if df.empty:
        df = pd.DataFrame({"reason": [], "full": [], "layouts": []})
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("layouts:Q", title="layouts rejected (count)"),
        y=alt.Y("reason:N", sort="-x", title=None, axis=alt.Axis(labelLimit=420)),
        tooltip=[alt.Tooltip("full:N", title="reason"), alt.Tooltip("layouts:Q")],
    ).properties(height=max(60, 26 * len(df)), width=WIDTH)


def scaling(rows: list[dict], y: str, title: str, scale: float = 1.0, y_format: str | None = None,
            band_key: str | None = None, rule: float | None = None, rule_label: str = "",
            y_scale: str = "linear") -> alt.Chart | alt.LayerChart:
    """One figure across GPU counts; with ``band_key``, the error band's p10-p90 as error bars;
    with ``rule``, a dashed horizontal line (a threshold or the value of time) labelled ``rule_label``;
    ``y_scale``: linear, log (times and costs that fall by orders of magnitude across counts) or
    symlog (a log-like axis that also holds zero and negative values)."""
    rows = [r for r in rows if r.get(y) is not None]
    df = pd.DataFrame(rows)
    if df.empty:
        df = pd.DataFrame({"num_gpus": [], y: []})
    df["value"] = df[y] / scale
    banded = _band_columns(df, rows, band_key, scale)
    axis = alt.Axis(format=y_format) if y_format else alt.Axis()
    x = alt.X("num_gpus:Q", scale=alt.Scale(type="log", base=2), title="GPUs (count, log scale)")
    tip = [alt.Tooltip("num_gpus:Q", title="GPUs"), alt.Tooltip("value:Q", format=".4g", title=title)]
    if banded:
        tip += [alt.Tooltip("lo:Q", format=".4g", title="p10"), alt.Tooltip("hi:Q", format=".4g", title="p90")]
    ys = alt.Scale(type=y_scale) if y_scale != "linear" else alt.Scale()
    if y_scale == "log":         # "cost (USD)" -> "cost (USD, log scale)"
        title = f"{title[:-1]}, log scale)" if title.endswith(")") else f"{title} (log scale)"
    layers = [alt.Chart(df).mark_line(point=True).encode(
        x=x, y=alt.Y("value:Q", title=title, axis=axis, scale=ys), tooltip=tip)]
    if banded:
        layers.append(alt.Chart(df).mark_errorbar(ticks=True).encode(
            x=x, y=alt.Y("lo:Q", title=title, axis=axis, scale=ys), y2="hi:Q", tooltip=tip))
    if rule is not None:
        layers.append(alt.Chart(pd.DataFrame({"value": [rule / scale], "label": [rule_label]})).mark_rule(
            color="#d62728", strokeDash=[6, 3]).encode(y=alt.Y("value:Q", title=title, scale=ys),
                                                         tooltip=[alt.Tooltip("label:N", title="")]))
    chart = layers[0] if len(layers) == 1 else alt.layer(*layers)
    return chart.properties(height=260, width=WIDTH)


WATERFALL_COLOURS = ("#4c78a8", "#d62728")


def goodput_waterfall(rows: list[dict]) -> alt.Chart:
    """The goodput waterfall (``perfmodel.present.goodput.waterfall_rows``): each stage's cluster
    FLOP/s (kept) and what the step to it lost, from the peak down to the useful rate."""
    order = [r["label"] for r in rows]
    data = []
    for r in rows:
        data.append({"stage": r["label"], "part": "kept", "PFLOP/s": r["flop_per_s"] / 1e15, "share": r["of_peak"],
                     "what": "FLOP/s at this stage", "order": 0})
        if r["lost_flop_per_s"] > 0:
            data.append({"stage": r["label"], "part": "lost", "PFLOP/s": r["lost_flop_per_s"] / 1e15,
                         "share": r["lost_flop_per_s"] / rows[0]["flop_per_s"], "what": r["lost_to"], "order": 1})
    df = pd.DataFrame(data)
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("PFLOP/s:Q", stack="zero", title="cluster model FLOP/s (PFLOP/s)"),
        y=alt.Y("stage:N", sort=order, title=None, axis=alt.Axis(labelLimit=360)),
        color=alt.Color("part:N", scale=alt.Scale(domain=["kept", "lost"], range=list(WATERFALL_COLOURS)),
                        title="FLOP/s"),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip("stage:N"), alt.Tooltip("part:N"), alt.Tooltip("what:N"),
                 alt.Tooltip("PFLOP/s:Q", format=".4g"), alt.Tooltip("share:Q", format=".1%", title="of peak")],
    ).properties(height=34 * len(rows), width=WIDTH)


def breakdown_by(rows: list[dict], by: str, title: str) -> alt.Chart:
    """Stacked step-time breakdown, one bar per value of ``by`` (e.g. GPU count)."""
    df = pd.DataFrame(rows)
    df["order"] = df["component"].map({c: i for i, c in enumerate(COMPONENTS)})
    return alt.Chart(df).mark_bar().encode(
        x=alt.X(f"{by}:O", title=title, axis=alt.Axis(labelLimit=240, labelAngle=-30)),   # whole scenario names
        y=alt.Y("seconds:Q", stack="zero", title="time per optimizer step (s)"),
        color=alt.Color("component:N", sort=list(COMPONENTS), title="component", scale=alt.Scale(scheme=PALETTE)),
        order=alt.Order("order:Q"),
        tooltip=[alt.Tooltip(f"{by}:O", title=title), alt.Tooltip("component:N"),
                 alt.Tooltip("seconds:Q", format=".4g", title="seconds")],
    ).properties(height=280, width=WIDTH)


def breakdown_lines(rows: list[dict], by: str, title: str) -> alt.LayerChart:
    """The step time and each of its components (seconds) against ``by`` (the GPU count), on log
    axes: what falls with more GPUs, and what does not, across orders of magnitude."""
    df = pd.DataFrame(rows)
    total = df.groupby(by, as_index=False)["seconds"].sum().assign(component="step (total)")
    df = df[df["seconds"] >= 1e-3 * total["seconds"].max()]    # parts under 0.1% of the longest step: not drawn
    x = alt.X(f"{by}:Q", scale=alt.Scale(type="log", base=2), title=f"{title[:-1]}, log scale)")
    y = alt.Y("seconds:Q", scale=alt.Scale(type="log"), title="step time (s, log scale)")
    tip = [alt.Tooltip(f"{by}:Q", title=title), alt.Tooltip("component:N"),
           alt.Tooltip("seconds:Q", format=".4g", title="seconds")]
    parts = alt.Chart(df).mark_line(point=True).encode(
        x=x, y=y, color=alt.Color("component:N", sort=list(COMPONENTS), title="component (black: the step)",
                                  scale=alt.Scale(scheme=PALETTE), legend=alt.Legend(orient="bottom", columns=5)),
        tooltip=tip)
    step = alt.Chart(total).mark_line(point=True, color="black", strokeWidth=3).encode(x=x, y=y, tooltip=tip)
    return alt.layer(parts, step).properties(height=300, width=WIDTH)


def sizing(options: list[dict], deadline_s: float | None, budget_usd: float | None) -> alt.LayerChart:
    """Each (hardware, GPU count, batch) that runs: time to train against cost, the choices ringed,
    the deadline and budget as rules; one of twenty distinct colours per hardware type."""
    df = pd.DataFrame(options)
    if df.empty:
        df = pd.DataFrame({"hardware": [], "num_gpus": [], "time_to_train_s": [], "cost_usd": [], "chosen": [],
                           "batch_tokens": []})
    df["days"] = df["time_to_train_s"] / SECONDS_PER_DAY
    df["series"] = [f"{h}, {b / 1e6:.3g}M-token batch" for h, b in zip(df["hardware"], df["batch_tokens"])]
    x = alt.X("days:Q", scale=alt.Scale(type="log"), title="time to train (days)")
    y = alt.Y("cost_usd:Q", scale=alt.Scale(type="log"), title="cost (USD)", axis=money_axis())
    tip = [alt.Tooltip("hardware:N"), alt.Tooltip("num_gpus:Q", title="GPUs"),
           alt.Tooltip("batch_tokens:Q", format=".3~s", title="batch (tokens)"),
           alt.Tooltip("days:Q", format=".3g", title="days"), alt.Tooltip("cost_usd:Q", format="$.3~s", title="USD")]
    lines = alt.Chart(df).mark_line(point=True, opacity=0.75).encode(
        x=x, y=y, color=alt.Color("hardware:N", title="hardware", scale=alt.Scale(scheme=PALETTE),
                                  legend=alt.Legend(orient="bottom", columns=4)),
        detail="series:N", order="num_gpus:Q", tooltip=tip)
    chosen = df[df["chosen"]].assign(label=lambda d: [f"{h}: {n:,} GPUs" for h, n in zip(d["hardware"], d["num_gpus"])])
    picks = alt.Chart(chosen).mark_point(size=260, shape="circle", color="black", strokeWidth=2).encode(
        x=x, y=y, tooltip=tip)
    names = alt.Chart(chosen).mark_text(align="left", dx=11, dy=-9, fontSize=11, color="black").encode(
        x=x, y=y, text="label:N")       # each ring says whose choice it is
    layers = [lines, picks, names]
    if deadline_s:
        layers.append(alt.Chart(pd.DataFrame({"days": [deadline_s / SECONDS_PER_DAY]})).mark_rule(
            color="#d62728", strokeDash=[6, 3]).encode(x="days:Q"))
    if budget_usd:
        layers.append(alt.Chart(pd.DataFrame({"cost_usd": [budget_usd]})).mark_rule(
            color="#d62728", strokeDash=[2, 2]).encode(y="cost_usd:Q"))
    return alt.layer(*layers).properties(height=420, width=WIDTH)


def sensitivity_bars(effects: list[dict]) -> alt.Chart:
    """What 2x of each resource buys: the share of the step it removes, by resource."""
    df = pd.DataFrame(effects)
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("gain_frac:Q", title="step removed by 2x of the resource (share of the step)",
                axis=alt.Axis(format="%")),
        y=alt.Y("resource:N", sort="-x", title=None, axis=alt.Axis(labelLimit=240)),
        color=alt.Color("lens:N", title="lens"),
        tooltip=[alt.Tooltip("resource:N"), alt.Tooltip("gain_frac:Q", format=".1%", title="2x buys"),
                 alt.Tooltip("elasticity:Q", format=".3f"), alt.Tooltip("lens:N")],
    ).properties(height=30 * len(df), width=WIDTH)


def cause_weights(causes: list[dict]) -> alt.Chart:
    """The gap's likely causes: the relative likelihood of each, by term."""
    df = pd.DataFrame([{"cause": f"{c['term']} ({c['lever']})", "weight": c["weight"], "lens": c["lens"]}
                       for c in causes])
    return alt.Chart(df).mark_bar().encode(
        x=alt.X("weight:Q", title="relative likelihood (share)", axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1])),
        y=alt.Y("cause:N", sort="-x", title=None, axis=alt.Axis(labelLimit=240)),
        color=alt.Color("lens:N", title="lens"),
        tooltip=[alt.Tooltip("cause:N"), alt.Tooltip("weight:Q", format=".1%"), alt.Tooltip("lens:N")],
    ).properties(height=30 * len(df), width=WIDTH)


def efficiency_series(points: list[dict]) -> alt.Chart:
    """Measured against predicted parallel efficiency per GPU count."""
    df = pd.DataFrame([{"num_gpus": p["num_gpus"], "efficiency": p[k], "series": name}
                       for p in points for k, name in (("measured_efficiency", "measured"),
                                                       ("predicted_efficiency", "predicted"))])
    return alt.Chart(df).mark_line(point=True).encode(
        x=alt.X("num_gpus:Q", scale=alt.Scale(type="log", base=2), title="GPUs (count)"),
        y=alt.Y("efficiency:Q", title="parallel efficiency (tokens/s per GPU over the smallest count's)",
                axis=alt.Axis(format="%")),
        color=alt.Color("series:N", title=None),
        tooltip=[alt.Tooltip("num_gpus:Q"), alt.Tooltip("series:N"), alt.Tooltip("efficiency:Q", format=".1%")],
    ).properties(height=260, width=WIDTH)
