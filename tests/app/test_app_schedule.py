"""The pipeline schedule in the app: the sidebar's selectbox, the share link and the YAML
download round-trip ``parallelism.pipeline_schedule``, and the Plan page draws the schedule."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

APP = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"
sys.path.insert(0, str(APP.parent))
from appkit import state  # noqa: E402


@pytest.mark.parametrize("schedule,vpp", [(None, 5), ("zb-h1", 1), ("zb-v", 2), ("dualpipe-v", 2)])
def test_schedule_survives_widgets_link_and_yaml(schedule, vpp):
    sc = state.default_scenario()
    par = sc.parallelism.model_copy(update={"vpp": vpp, "pipeline_schedule": schedule})
    sc = sc.model_copy(update={"parallelism": par})
    values = state.widget_values(sc)
    assert values["pipeline_schedule"] == (schedule or state.DEFAULT_SCHEDULE)
    assert state.scenario_from_values(values) == sc
    data = json.loads(json.dumps(state.scenario_to_dict(sc)))
    assert state.decode_query(state.encode_query(data)) == sc
    assert state.parse_scenario(yaml.safe_load(yaml.safe_dump(data))) == sc
    assert ("pipeline_schedule" in data["parallelism"]) is (schedule is not None)


def test_plan_page_draws_the_chosen_schedule():
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    at.number_input(key="vpp").set_value(1).run()
    at.selectbox(key="pipeline_schedule").set_value("zb-h1").run()
    at.radio(key="plan_detail").set_value("Pipeline schedule").run()   # one detail chart at a time
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    captions = [re.sub(r"\\(.)", r"\1", c.value) for c in at.caption]
    assert any("Drawn schedule (zb-h1)" in c for c in captions), captions
    # the Gantt's data (Arrow, in the chart's message) holds the zero-bubble schedule's own phase
    assert any(b"weight gradient" in e.proto.SerializeToString() for e in at.get("vega_lite_chart"))
