"""The Serve page (issue 53) with Streamlit's AppTest: it draws its figures and chart without an
error, and a serving tp whose weights do not fit says so in one line."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from app.test_app import _app, _check_chart, _specs, _submit

PAGE = "pages_/serve.py"


def test_serve_page_draws_figures_and_the_curve():
    at = _app(PAGE)
    assert not at.exception and not at.error
    labels = [m.label for m in at.metric]
    assert "time to first token" in labels and "$ per million output tokens" in labels
    specs = _specs(at)
    assert specs
    for spec in specs:
        _check_chart(spec)


def test_weights_that_do_not_fit_are_one_line():
    at = _app(PAGE)
    at.number_input(key="serve_tp").set_value(1)
    at.selectbox(key="serve_weights").set_value("bf16")
    _submit(at, "Serve")
    assert not at.exception
    assert at.error and "weights take" in at.error[0].value and "\n" not in at.error[0].value


def test_serve_page_sizes_for_a_request_rate():
    at = _app(PAGE)
    at.number_input(key="serve_rate").set_value(20.0)
    _submit(at, "Serve")
    assert not at.exception and not at.error
    assert any("GPUs at" in c.value and "per hour" in c.value for c in at.caption)


def _link(at):
    from appkit import state
    encoded = at.query_params[state.QUERY_KEY]
    return state.decode_query(encoded[0] if isinstance(encoded, list) else encoded)


def test_the_serving_scenario_goes_into_the_link_and_back():
    at = _app(PAGE)
    at.number_input(key="serve_prompt").set_value(2000)
    at.number_input(key="serve_tp").set_value(4)
    at.selectbox(key="serve_batching").set_value("chunked_prefill")
    at.number_input(key="serve_tpot").set_value(0.1)
    at.selectbox(key="serve_at").set_value("p99")
    _submit(at, "Serve")
    assert not at.exception and not at.error
    st = _link(at).studies
    assert (st.serve_prompt_tokens, st.serve_tp, st.serve_batching, st.serve_tpot_s) == (2000, 4, "chunked_prefill",
                                                                                         0.1)
    assert st.serve_objectives_at == "p99" and any("at the p99" in c.value for c in at.caption)
    assert st.serve_requests_per_s is None            # 0: do not size, not stored
    from support.apptest import open_app
    back = open_app({"studies": {"serve_prompt_tokens": 2000, "serve_tp": 4, "serve_batching": "chunked_prefill"}})
    back.switch_page(PAGE).run()
    assert not back.exception and not back.error
    assert back.number_input(key="serve_prompt").value == 2000 and back.number_input(key="serve_tp").value == 4
    assert back.selectbox(key="serve_batching").value == "chunked_prefill"


def test_the_report_holds_the_serving_answer_escaped():
    import json

    from appkit import cached_serving, report, state
    sc = state.default_scenario()
    sc = sc.model_copy(update={"name": "<script>alert(1)</script>",
                               "studies": sc.studies.model_copy(update={"serve_tp": 4})})
    j = state.JobInputs(sc, None, sc.cost, True)
    serving = json.dumps(cached_serving.serving_scenario(j, cached_serving.serve_options(sc.studies)), sort_keys=True)
    html = report.report_html(j.key(), state.scenario_yaml(sc), serving)
    assert "<h2>Serving</h2>" in html and "time to first token" in html and "tp4" in html
    assert "<script>alert" not in html
    assert "<h2>Serving</h2>" not in report.report_html(j.key(), state.scenario_yaml(sc))
