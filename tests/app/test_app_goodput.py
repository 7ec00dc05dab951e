"""The app's goodput, error band, scale verdict and buy-or-rent (issue 33): the run sections of the
scenario round-trip through the sidebar, the link and the YAML download; the Plan page leads with
goodput and draws the waterfall; Compare and Scale draw error bars; Size says how likely its choice
meets the deadline and the budget, and whether to buy or rent."""

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
from perfmodel.spec.scenario import parse_scenario, scenario_to_dict  # noqa: E402

TIMEOUT_S = 120


def _app(page: str | None = None, query: str | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    if query:
        at.query_params[state.QUERY_KEY] = query
    at.run()
    if page:
        at.switch_page(page).run()
    return at


STUDY_BUTTONS = {"pages_/compare.py": "Compare", "pages_/scale.py": "Run the sweep", "pages_/size.py": "Size the cluster"}
COST_GROUP = "Failures, start-up, input and cost"


def _submit(at: AppTest, label: str) -> AppTest:
    return next(b for b in at.button if b.label == label).click().run()


def _open(at: AppTest, group: str) -> AppTest:
    return at.selectbox(key="_sidebar_group").set_value(group).run()


def _clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _metric(at: AppTest, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def _specs(at: AppTest) -> list[dict]:
    return [json.loads(e.proto.spec) for e in at.get("vega_lite_chart")]


def _marks(spec: dict) -> list[str]:
    layers = spec.get("layer", [spec])
    return [(m["type"] if isinstance(m, dict) else m) for m in (layer.get("mark") for layer in layers) if m]


SECTIONS = {
    "reliability": {"gpu_failures_per_gpu_hour": 3.5e-5, "node_failures_per_node_hour": 1e-4, "restart_s": 900.0,
                    "storage_write_bandwidth_bytes_per_s": 5.0e11, "checkpoint_interval_s": 1200.0,
                    "per_gpu_io_bandwidth_bytes_per_s": 2.0e9},
    "startup": {"launch_s": 600.0, "compile_s": 1800.0, "warmup_steps": 50},
    "input_pipeline": {"bytes_per_token": 2.0, "loader_tokens_per_s_per_gpu": 2.5e4},
    "cost": {"mode": "tco", "usd_per_gpu_hour": 2.5, "purchase_usd_per_gpu": 25000.0, "amortisation_years": 5.0,
             "utilisation_frac": 0.7, "pue": 1.1, "usd_per_kwh": 0.12},
    "purpose": {"value_of_time_usd_per_day": 24000.0, "deadline_days": 45.0, "budget_usd": 3.0e6},
}


def _scenario():
    return parse_scenario({**scenario_to_dict(state.default_scenario()), **SECTIONS})


def test_run_sections_round_trip_through_widgets_link_and_yaml():
    sc = _scenario()
    assert scenario_to_dict(sc)["startup"] == SECTIONS["startup"]
    assert state.scenario_from_values(state.widget_values(sc)) == sc
    assert state.decode_query(state.encode_query(json.loads(json.dumps(scenario_to_dict(sc))))) == sc
    assert parse_scenario(yaml.safe_load(state.scenario_yaml(sc))) == sc
    # the defaults stay out of the file and the link
    assert not {"reliability", "startup", "input_pipeline", "cost", "purpose"} & set(scenario_to_dict(state.default_scenario()))


def test_a_link_with_run_sections_fills_the_sidebar_and_the_link_it_writes():
    sc = _scenario()
    at = _open(_app(query=state.encode_query(json.loads(json.dumps(scenario_to_dict(sc))))), COST_GROUP)
    _clean(at)
    assert at.number_input(key="rel_restart_s").value == 900.0
    assert at.number_input(key="rel_write_gb_s").value == 500.0
    assert at.number_input(key="su_compile_s").value == 1800.0 and at.number_input(key="su_warmup_steps").value == 50
    assert at.number_input(key="in_loader_tok_s").value == 2.5e4
    assert at.radio(key="cost_basis").value == "tco" and at.number_input(key="cost_pue").value == 1.1
    at.switch_page("pages_/scale.py").run()
    assert at.number_input(key="scale_vot").value == 24000.0 and at.number_input(key="scale_deadline").value == 45.0
    at.switch_page("pages_/size.py").run()
    assert at.number_input(key="size_deadline").value == 45.0 and at.number_input(key="size_budget").value == 3.0e6
    encoded = at.query_params[state.QUERY_KEY]
    assert state.decode_query(encoded[0] if isinstance(encoded, list) else encoded) == sc


@pytest.mark.parametrize("key,value", [("rel_restart_s", 7200.0), ("rel_gpu_rate", 1e-3), ("su_compile_s", 86400.0),
                                       ("cost_years", 2.0)])
def test_run_widgets_change_the_plan(key, value):
    at = _open(_app(), COST_GROUP)
    if key == "cost_years":          # the amortisation life prices owned hardware
        at.radio(key="cost_basis").set_value("tco").run()
    before = (_metric(at, "Time to train"), _metric(at, "Cost"))
    at.number_input(key=key).set_value(value).run()
    _clean(at)
    assert (_metric(at, "Time to train"), _metric(at, "Cost")) != before, key


def test_a_loader_that_cannot_keep_up_binds_the_step():
    """100 tokens/s per GPU cannot feed 8,192 x 128 / 64 = 16,384 tokens per GPU per step in the
    ~15 s the GPUs take: the input pipeline becomes the bottleneck."""
    at = _open(_app(), COST_GROUP)
    at.number_input(key="in_loader_tok_s").set_value(100.0).run()
    _clean(at)
    assert any("data_wait" in i.value for i in at.info)


def test_a_target_set_on_a_page_travels_in_the_link():
    """The Scale page's deadline is the scenario's purpose: the link carries it, and the Size page
    shows it."""
    at = _app("pages_/scale.py")
    at.multiselect(key="scale_counts").set_value([32, 64])
    at.number_input(key="scale_deadline").set_value(30.0)
    _submit(at, "Run the sweep")
    _clean(at)
    encoded = at.query_params[state.QUERY_KEY]
    sc = state.decode_query(encoded[0] if isinstance(encoded, list) else encoded)
    assert sc.purpose.deadline_days == 30.0 and sc.purpose.value_of_time_usd_per_day is None
    assert sc.studies.scale_gpu_counts == (32, 64)          # the page's option travels too
    at.switch_page("pages_/size.py").run()
    assert at.number_input(key="size_deadline").value == 30.0
    at.switch_page("pages_/scale.py").run()
    assert at.multiselect(key="scale_counts").value == [32, 64]


def test_plan_waterfall_goes_from_peak_to_useful():
    at = _app()
    waterfall = next(s for s in _specs(at) if "cluster model FLOP/s (PFLOP/s)" in json.dumps(s))
    stages = waterfall["encoding"]["y"]["sort"]
    assert len(stages) == 6 and stages[0].startswith("peak") and stages[-1].startswith("useful")
    assert any(c.value.startswith("Each bar is the cluster's model FLOP/s") for c in at.caption)


def test_compare_and_scale_draw_error_bars():
    at = _submit(_app("pages_/compare.py"), "Compare")
    _clean(at)
    assert any("rule" in _marks(s) and "p90" in json.dumps(s) for s in _specs(at))
    at = _app("pages_/scale.py")
    at.multiselect(key="scale_counts").set_value([32, 64, 128])
    _submit(at, "Run the sweep")
    _clean(at)
    assert any("errorbar" in _marks(s) for s in _specs(at))
    assert any(s.value.startswith("**Verdict: ") for s in at.success)


def test_scale_says_when_no_count_serves():
    at = _app("pages_/scale.py")
    at.multiselect(key="scale_counts").set_value([32, 64])
    at.number_input(key="scale_deadline").set_value(1.0)
    _submit(at, "Run the sweep")
    _clean(at)
    assert any("no count serves" in re.sub(r"\\(.)", r"\1", w.value) for w in at.warning)


def test_size_shows_the_chance_of_meeting_the_targets_and_buy_or_rent():
    at = _app("pages_/size.py")
    at.multiselect(key="size_hardware").set_value(["h100-sxm", "b200"])
    at.multiselect(key="size_counts").set_value([64, 128])
    _submit(at, "Size the cluster")
    _clean(at)
    table = at.dataframe[0].value
    assert "P(on time and budget)" in table.columns
    money = at.dataframe[1].value
    assert list(money["hardware"]) == ["h100-sxm", "b200"] and "own (TCO)" in money.columns
    assert any(h.value == "Buy or rent" for h in at.subheader)
