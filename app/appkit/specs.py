"""Vega-Lite specs of the Plan page's charts, cached on the job key like the model call.

Building an Altair chart and serialising its data costs more than the model itself
(~80 ms for the four Plan charts against ~20 ms for ``plan_view``); caching the finished
specs makes a rerun with unchanged inputs nearly free.
"""

from __future__ import annotations

import streamlit as st

from perfmodel.present.goodput import waterfall_rows

from . import cached, charts

AXES_PX = 70
"""Room for the x axis and its title below the plot area."""


def to_spec(c) -> dict:
    """An Altair chart as a Vega-Lite dict plus the pixel height Streamlit should give it
    (Streamlit's theme otherwise shrinks charts with a discrete y axis to a sliver). Not
    validated here: ``tests/test_app.py`` validates every chart the pages draw."""
    h = getattr(c, "height", None)
    return {"spec": c.to_dict(validate=False), "height": h + AXES_PX if isinstance(h, int) else "content"}


PLAN_CHARTS = ("breakdown", "memory", "waterfall", "roofline", "timeline", "stages")


@st.cache_data(**cached.CACHE)
def plan_spec(key: str, name: str) -> dict | None:
    """One of the Plan page's charts (``PLAN_CHARTS``) for the job ``key``, built only when drawn."""
    v = cached.plan_view(key)
    p = v["prediction"]
    if name == "breakdown":
        return to_spec(charts.breakdown(cached.breakdown_rows(p["breakdown_s"])))
    if name == "memory":
        return to_spec(charts.memory(p["memory_breakdown_bytes"], v["usable_hbm_bytes"], v["hbm_capacity_bytes"]))
    if name == "waterfall":
        return to_spec(charts.goodput_waterfall(waterfall_rows(p["goodput_waterfall"])))
    if name == "roofline":
        return to_spec(charts.roofline(v["roofline"]["points"], v["roofline"]["roofs"]))
    if name == "timeline":
        return to_spec(charts.timeline(v["timeline"]["rows"])) if v["timeline"] else None
    if name == "stages":
        return to_spec(charts.stage_memory(v["stage_memory"]["rows"], v["usable_hbm_bytes"]))
    raise ValueError(f"no Plan chart {name!r}")


def plan_specs(key: str) -> dict:
    """Every Plan chart (for the report and the tests)."""
    return {name: plan_spec(key, name) for name in PLAN_CHARTS}
