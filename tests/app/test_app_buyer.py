"""Decisions a buyer can act on (issue 50), through AppTest: Size and Compare leave announced hardware
and placeholder prices out unless added, Size's rings are labelled, Compare's hardware goes into the
link, Scale reads on log axes (linear on request), MFU bars are percentages, and Size's tokens change
the job only through a visible, undoable button."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from support.apptest import assert_clean as _clean  # noqa: E402
from support.apptest import open_app as _app  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

APP = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"
sys.path.insert(0, str(APP.parent))
from appkit import charts, state  # noqa: E402

ANNOUNCED = {"gb200-nvl576", "vera-rubin-nvl72", "rubin-ultra-nvl576"}


def _submit(at: AppTest, label: str) -> AppTest:
    return next(b for b in at.button if b.label == label).click().run()


def _link(at: AppTest):
    encoded = at.query_params[state.QUERY_KEY]
    return state.decode_query(encoded[0] if isinstance(encoded, list) else encoded)


def _specs(at: AppTest) -> list[dict]:
    return [json.loads(c.proto.spec) for c in at.get("vega_lite_chart")]


def _layers(spec: dict) -> list[dict]:
    return spec.get("layer", [spec])


def test_size_and_compare_default_to_hardware_a_buyer_can_get():
    at = _app()
    at.switch_page("pages_/size.py").run()
    sized = set(at.multiselect(key="size_hardware").value)
    assert sized and not sized & ANNOUNCED and "gb300-nvl72" not in sized       # gb300: placeholder price
    assert any("Left out unless you add them" in c.value and "rubin" in c.value for c in at.caption)
    at.switch_page("pages_/compare.py").run()
    compared = set(at.multiselect(key="cmp_hardware").value)
    assert compared == sized


def test_size_headline_badges_added_announced_hardware_and_rings_are_labelled():
    at = _app({"studies": {"size_hardware": ["vera-rubin-nvl72"], "size_gpu_counts": [64, 128]}})
    at.switch_page("pages_/size.py").run()
    _submit(at, "Size the cluster")
    _clean(at)
    headline = at.success[0].value
    assert "vera-rubin-nvl72 (announced) (placeholder price)" in headline.replace("\\", "")
    assert "(placeholder)" in headline
    table = at.dataframe[0].value
    assert table["hardware"][0] == "vera-rubin-nvl72 (announced) (placeholder price)"
    sizing = next(s for s in _specs(at) if any(layer.get("mark", {}).get("type") == "text"
                                                 for layer in _layers(s)))
    labels = next(layer for layer in _layers(sizing) if layer.get("mark", {}).get("type") == "text")
    assert labels["encoding"]["text"]["field"] == "label"


def test_size_tokens_change_the_job_only_through_the_button_and_undo_restores():
    at = _app({"training_tokens": 2.0e12, "studies": {"size_hardware": ["b200"], "size_gpu_counts": [64]}})
    at.switch_page("pages_/size.py").run()
    at.number_input(key="size_tokens").set_value(15000.0)
    _submit(at, "Size the cluster")
    _clean(at)
    assert _link(at).training_tokens == 2.0e12                       # the job keeps its tokens
    assert any("the job in the sidebar has 2,000 B tokens" in i.value for i in at.info)
    at.button(key="size_targets_apply").click().run()
    _clean(at)
    assert _link(at).training_tokens == 1.5e13
    at.button(key="size_targets_undo").click().run()
    _clean(at)
    assert _link(at).training_tokens == 2.0e12


def test_compare_hardware_goes_into_the_link_and_back():
    at = _app()
    at.switch_page("pages_/compare.py").run()
    at.multiselect(key="cmp_hardware").set_value(["h100-sxm", "b200"])
    at.checkbox(key="cmp_search").uncheck()
    _submit(at, "Compare")
    _clean(at)
    sc = _link(at)
    assert sc.studies.compare_hardware == ("h100-sxm", "b200")
    shared = _app(json.loads(json.dumps(state.scenario_to_dict(sc))))
    shared.switch_page("pages_/compare.py").run()
    assert shared.multiselect(key="cmp_hardware").value == ["h100-sxm", "b200"]


def test_scale_time_and_cost_on_log_axes_with_a_linear_option():
    at = _app({"studies": {"scale_gpu_counts": [16, 64, 256]}})
    at.switch_page("pages_/scale.py").run()
    _submit(at, "Run the sweep")
    _clean(at)

    def y_scales():
        return {layer["encoding"]["y"].get("title"): layer["encoding"]["y"].get("scale", {}).get("type", "linear")
                for s in _specs(at) for layer in _layers(s) if "y" in layer.get("encoding", {})}
    log = y_scales()
    assert log["time to solution (days, log scale)"] == "log" and log["cost (USD, log scale)"] == "log"
    assert log["step time (s, log scale)"] == "log"
    at.radio(key="scale_axes").set_value("linear").run()
    linear = y_scales()
    assert linear["time to solution (days)"] == "linear" and linear["cost (USD)"] == "linear"


def test_mfu_bars_are_percentages():
    chart = charts.hardware_bars([{"scenario": "a", "layout": "as given", "mfu": 0.436}], "mfu", "MFU (%)",
                                 category="scenario", percent=True).to_dict()
    text = next(layer for layer in chart["layer"] if layer["mark"]["type"] == "text")
    assert text["encoding"]["text"]["format"] == ".1%"
    bars = next(layer for layer in chart["layer"] if layer["mark"]["type"] == "bar")
    assert bars["encoding"]["x"]["axis"]["format"] == ".0%"
