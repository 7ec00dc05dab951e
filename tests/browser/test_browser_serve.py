"""The Serve page (issue 53) in Debian's chromium: the sidebar's model served on its hardware, the
TTFT/TPOT/throughput figures and the throughput-latency chart draw, a longer prompt raises the
time to first token, and a request rate gets the sizing answer. Screenshot: ``artifacts/screenshots/serve-1440.png``."""

from __future__ import annotations

import pytest
from browser.test_browser import SHOTS, chromium_page, server  # noqa: F401  (fixture)
from browser.test_browser_decisions import _idle, _no_errors, _seconds

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1440, "height": 1800}
TIMEOUT_MS = 120_000


@pytest.fixture(scope="module")
def page(server):  # noqa: F811
    with chromium_page(VIEWPORT, TIMEOUT_MS) as pg:
        yield pg


def _metric(pg, label: str) -> str:
    box = pg.locator('[data-testid="stMetric"]').filter(has_text=label).first
    return box.locator('[data-testid="stMetricValue"]').inner_text()


def test_serve_page_draws_the_curve_and_answers_a_longer_prompt(page, server):  # noqa: F811
    page.goto(f"{server}/serve")
    page.get_by_role("heading", name="Serve: latency, throughput and price").wait_for()
    page.locator('[data-testid="stVegaLiteChart"]').first.wait_for()
    _idle(page)
    _no_errors(page)
    ttft = _seconds(_metric(page, "time to first token"))
    assert ttft > 0
    assert _seconds(_metric(page, "time per output token")) > 0
    assert "$" in _metric(page, "$ per million output tokens")
    box = page.get_by_label("prompt tokens", exact=True)
    box.fill("8000")
    page.locator('[data-testid^="stBaseButton-"][data-testid$="FormSubmit"]').filter(has_text="Serve").first.click()
    _idle(page)
    _no_errors(page)
    assert _seconds(_metric(page, "time to first token")) > 2 * ttft
    page.get_by_label("size for requests/s (0: do not size)", exact=True).fill("10")
    page.locator('[data-testid^="stBaseButton-"][data-testid$="FormSubmit"]').filter(has_text="Serve").first.click()
    page.get_by_role("heading", name="The cheapest deployment for this request rate").wait_for()
    _idle(page)
    _no_errors(page)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "serve-1440.png"), full_page=True)
