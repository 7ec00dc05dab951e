"""The app as a decision tool (issue 35), through AppTest: the price basis and the pages' options in
the link and the YAML, headline hardware inline, fixes for a layout that does not fit, peers side by
side, the report, and charts that read at a glance (values on bars, $ axes, twenty colours)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("streamlit")
from support.apptest import assert_clean as _clean  # noqa: E402
from support.apptest import open_app as _app  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

APP = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"
sys.path.insert(0, str(APP.parent))
from appkit import report, state  # noqa: E402



def _open(at: AppTest, group: str) -> AppTest:
    return at.selectbox(key="_sidebar_group").set_value(group).run()


def _submit(at: AppTest, label: str) -> AppTest:
    return next(b for b in at.button if b.label == label).click().run()


def _link(at: AppTest):
    encoded = at.query_params[state.QUERY_KEY]
    return state.decode_query(encoded[0] if isinstance(encoded, list) else encoded)


def _shown(text: str) -> str:
    return text.replace("\\", "")


def test_price_basis_goes_into_the_link_and_the_yaml_and_back():
    at = _open(_app(), "Failures, start-up, input and cost")
    at.radio(key="cost_basis").set_value("neocloud").run()
    _clean(at)
    sc = _link(at)
    assert sc.cost.cloud_class == "neocloud"
    assert yaml.safe_load(state.scenario_yaml(sc))["cost"] == {"cloud_class": "neocloud"}
    # the H100's neocloud price, $3.00 (mercatus-ai.com), on the Plan page with its cost per million tokens
    captions = " ".join(_shown(c.value) for c in at.caption)
    assert "at $3.00/GPU-h (neocloud)" in captions and "/M tokens" in captions
    back = _open(_app({"cost": {"cloud_class": "neocloud"}}), "Failures, start-up, input and cost")
    assert back.radio(key="cost_basis").value == "neocloud"
    at.radio(key="cost_basis").set_value("own").run()          # own price with none given: one line
    assert [_shown(e.value) for e in at.error] == [
        "cost.usd_per_gpu_hour: the price basis 'own' needs your price per GPU-hour (> 0)"]


def test_compare_warns_when_listed_prices_mix_provider_classes_and_not_on_one_class():
    at = _app()
    at.switch_page("pages_/compare.py").run()
    _submit(at, "Compare")
    _clean(at)
    warned = [_shown(w.value) for w in at.warning if "listed prices are of different kinds" in _shown(w.value)]
    assert warned and "a neocloud's for b300, gb200-nvl72" in warned[0] and "a hyperscaler's for" in warned[0]
    _open(at, "Failures, start-up, input and cost").radio(key="cost_basis").set_value("hyperscaler").run()
    _submit(at, "Compare")
    _clean(at)
    assert not [w for w in at.warning if "different kinds" in _shown(w.value)]


def test_size_options_travel_in_the_link_and_come_back():
    at = _app()
    at.switch_page("pages_/size.py").run()
    at.multiselect(key="size_hardware").set_value(["b200", "gb200-nvl72"])
    at.multiselect(key="size_counts").set_value([1024, 4096])
    at.checkbox(key="size_grow").set_value(False)
    at.number_input(key="size_deadline").set_value(30.0)
    _submit(at, "Size the cluster")
    _clean(at)
    # the deadline is the page's until the user makes it the job's (issue 50), then it travels too
    assert _link(at).purpose.deadline_days is None
    at.button(key="size_targets_apply").click().run()
    _clean(at)
    sc = _link(at)
    assert sc.studies.size_hardware == ("b200", "gb200-nvl72") and sc.studies.size_gpu_counts == (1024, 4096)
    assert sc.studies.grow_batch is False and sc.purpose.deadline_days == 30.0
    shared = _app(json.loads(json.dumps(state.scenario_to_dict(sc))))
    shared.switch_page("pages_/size.py").run()
    assert shared.multiselect(key="size_hardware").value == ["b200", "gb200-nvl72"]
    assert shared.multiselect(key="size_counts").value == [1024, 4096]
    assert shared.checkbox(key="size_grow").value is False and shared.number_input(key="size_deadline").value == 30.0


def test_headline_hardware_travels_inline():
    at = _open(_app(), "Hardware")
    at.radio(key="hw_source").set_value("Headline numbers").run()
    assert at.number_input(key="hl_peak_bf16_tflop_per_s").value == pytest.approx(989.4)   # from h100-sxm
    at.number_input(key="hl_peak_bf16_tflop_per_s").set_value(1978.8).run()
    _clean(at)
    sc = _link(at)
    assert sc.hardware.id == "custom-h100-sxm" and sc.hardware.gpu.peak_dense_tflop_per_s.bf16 == 1978.8
    assert "64 x custom-h100-sxm" in _shown(at.title[0].value)


def test_a_plan_that_does_not_fit_offers_fixes_and_applies_one():
    at = _app({"model": "llama3-405b"})
    assert any("Does not fit: 320 GiB" in w.value for w in at.warning)
    fixes = at.dataframe[0].value
    assert list(fixes.columns[:2]) == ["change", "step time"] and len(fixes) >= 1
    at.button(key="plan_fix_apply").click().run()
    _clean(at)
    assert "405B on 512 x h100-sxm" in _shown(at.title[0].value)


def test_peers_side_by_side():
    at = _app()
    at.switch_page("pages_/peers.py").run()
    at.button(key="peer_add").click().run()
    at.number_input(key="tp").set_value(8).run()
    _open(at, "Scenario file and link").text_input(key="scenario_name").input("tp8").run()
    at.button(key="peer_add").click().run()
    _clean(at)
    table = at.dataframe[0].value
    assert list(table["scenario"]) == ["llama3-70b-64xh100", "tp8"] and set(table["fits"]) == {"yes"}
    assert table["step time"][0] != table["step time"][1]
    assert len(at.get("vega_lite_chart")) == 6    # three figures, time and cost, the breakdowns


def test_the_report_holds_the_figures_charts_and_scenario():
    sc = state.default_scenario()
    j = state.JobInputs(sc, None, sc.cost, True)
    html = report.report_html(j.key(), state.scenario_yaml(sc))
    assert html.count("<figure class='chart'><svg") == 6 and "$6.88/GPU-h" in html and "num_gpus: 64" in html
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org/", "") and "https://" not in html
    assert "<script>alert" not in report.report_html(
        state.JobInputs(sc.model_copy(update={"name": "<script>alert(1)</script>"}), None, sc.cost, True).key(),
        "name: <script>alert(1)</script>")


def test_charts_read_at_a_glance():
    import altair as alt

    from appkit import charts
    bd = charts.breakdown([{"component": "compute", "seconds": 9.0, "share": 0.9},
                           {"component": "pipeline_bubble", "seconds": 1.0, "share": 0.1}]).to_dict()
    texts = [layer for layer in bd["layer"] if layer["mark"]["type"] == "text"]
    assert len(texts) == 2                                   # each part's seconds, and the total
    values = next(iter(bd["datasets"].values()))
    assert [r["label"] for r in values] == ["9 s", "1 s"]
    sizing = charts.sizing([{"hardware": h, "num_gpus": 64, "time_to_train_s": 1e6, "cost_usd": 2.5e6,
                             "batch_tokens": 1e6, "chosen": False} for h in map(str, range(11))], None, None)
    spec = sizing.to_dict()
    line = spec["layer"][0]["encoding"]
    assert line["color"]["scale"]["scheme"] == "tableau20"    # 20 colours: 11 lines, none repeated
    assert line["y"]["axis"]["format"] == "$~s"               # $2.5M, not 2,500,000
    alt.vegalite.v6.schema.core.TopLevelSpec.validate(spec)
