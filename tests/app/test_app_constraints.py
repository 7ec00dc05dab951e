"""The Size page's power envelope and fabric (issue 52), through AppTest: they round-trip through
the widgets, the link and the YAML; a link opens Size with them filled in; sizing under them names
the constraint that binds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

APP = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"
sys.path.insert(0, str(APP.parent))
from appkit import state  # noqa: E402
from perfmodel.spec.scenario import parse_scenario, scenario_to_dict  # noqa: E402

TIMEOUT_S = 180
SITE = {"facility": {"power_mw": 1.7, "pue": 1.3},
        "fabric": {"oversubscription": 2.0, "tiers": 2, "hop_latency_us": 0.5},
        "studies": {"size_hardware": ["h100-sxm"], "size_gpu_counts": [512, 1024, 2048]},
        "training_tokens": 1.0e12}


def _scenario():
    return parse_scenario({**scenario_to_dict(state.default_scenario()), **SITE})


def test_site_and_fabric_round_trip_through_widgets_link_and_yaml():
    sc = _scenario()
    assert sc.facility.power_mw == 1.7 and sc.fabric.oversubscription == 2.0
    values = state.widget_values(sc)
    assert values["site_power_mw"] == 1.7 and values["fabric_oversubscription"] == 2.0
    assert values["_fabric_other"] == {"hop_latency_us": 0.5}
    assert state.scenario_from_values(values) == sc
    assert state.decode_query(state.encode_query(json.loads(json.dumps(scenario_to_dict(sc))))) == sc
    assert parse_scenario(yaml.safe_load(state.scenario_yaml(sc))) == sc
    # none given: no facility or fabric in the file or the link
    default = state.scenario_from_values(state.widget_values(state.default_scenario()))
    assert default.fabric is None and default.facility.power_mw is None
    assert not {"facility", "fabric"} & set(scenario_to_dict(default))


def test_a_link_opens_size_with_the_envelope_and_fabric_and_names_what_binds():
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    at.query_params[state.QUERY_KEY] = state.encode_query(json.loads(json.dumps(scenario_to_dict(_scenario()))))
    at.run()
    at.switch_page("pages_/size.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.number_input(key="size_power_mw").value == 1.7
    assert at.number_input(key="size_oversubscription").value == 2.0
    assert at.number_input(key="size_tiers").value == 2
    next(b for b in at.button if b.label == "Size the cluster").click().run()
    assert not at.exception, [e.value for e in at.exception]
    text = " ".join(m.value for m in at.markdown)
    # 1.7 MW / ((1,275 W + 23 W of the 2:1 fabric's optics) x 1.3 = 1,687 W) = 1,007 GPUs: 125 nodes
    assert "Power and what binds" in text and "holds 1,000 GPUs" in text.replace("\\", "")
    encoded = at.query_params[state.QUERY_KEY]
    back = state.decode_query(encoded[0] if isinstance(encoded, list) else encoded)
    assert back.facility.power_mw == 1.7 and back.fabric.oversubscription == 2.0


def test_capacity_class_prices_and_preemption_round_trip_and_show_in_the_sidebar():
    data = {**scenario_to_dict(state.default_scenario()),
            "cost": {"capacity": "spot", "spot_usd_per_gpu_hour": 2.5, "reserved_1y_usd_per_gpu_hour": 4.0,
                     "preemption": {"preemptions_per_node_hour": 1e-3, "notice_s": 30.0}}}
    sc = parse_scenario(data)
    values = state.widget_values(sc)
    assert values["cost_capacity"] == "spot" and values["cost_spot"] == 2.5
    assert state.scenario_from_values(values) == sc
    assert state.decode_query(state.encode_query(json.loads(json.dumps(scenario_to_dict(sc))))) == sc
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    at.query_params[state.QUERY_KEY] = state.encode_query(json.loads(json.dumps(scenario_to_dict(sc))))
    at.run()
    at = at.selectbox(key="_sidebar_group").set_value("Failures, start-up, input and cost").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key="cost_capacity").value == "spot"
    assert at.number_input(key="cost_spot").value == 2.5
    encoded = at.query_params[state.QUERY_KEY]
    assert state.decode_query(encoded[0] if isinstance(encoded, list) else encoded) == sc
