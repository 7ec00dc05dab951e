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
