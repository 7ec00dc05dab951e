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


@st.cache_data(**cached.CACHE)
def plan_specs(key: str) -> dict:
    v = cached.plan_view(key)
    p = v["prediction"]
    return {
        "breakdown": to_spec(charts.breakdown(cached.breakdown_rows(p["breakdown_s"]))),
        "memory": to_spec(charts.memory(p["memory_breakdown_bytes"], v["usable_hbm_bytes"], v["hbm_capacity_bytes"])),
        "roofline": to_spec(charts.roofline(v["roofline"]["points"], v["roofline"]["roofs"])),
        "timeline": to_spec(charts.timeline(v["timeline"]["rows"])) if v["timeline"] else None,
        "waterfall": to_spec(charts.goodput_waterfall(waterfall_rows(p["goodput_waterfall"]))),
    }
