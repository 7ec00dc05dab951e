"""Sizing under a power envelope and with a fabric (issue 52), in Debian's chromium at 1440 x 1000:
the inputs typed on the Size page reach the result (the GPUs the envelope holds, what binds) and
the share link, and the link opens Size with them filled in. Screenshot:
``artifacts/screenshots/size-power-1440.png``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from browser.test_browser import SHOTS, chromium_page, server  # noqa: F401  (fixture)
from browser.test_browser_decisions import _idle, _no_errors, _press, _text

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "app"))
from appkit import state  # noqa: E402

VIEWPORT = {"width": 1440, "height": 1000}
TIMEOUT_MS = 120_000


@pytest.fixture(scope="module")
def page(server):  # noqa: F811
    with chromium_page(VIEWPORT, TIMEOUT_MS) as pg:
        yield pg


def _fill(pg, label: str, text: str) -> None:
    """Type into a form's number field (the form submits them together)."""
    box = pg.get_by_label(label, exact=True)
    box.fill(text)
    box.press("Tab")


def test_size_with_a_power_envelope_and_a_fabric_round_trips_through_the_link(page, server):  # noqa: F811
    data = {**state.scenario_to_dict(state.default_scenario()), "training_tokens": 1.0e12,
            "studies": {"size_hardware": ["h100-sxm"], "size_gpu_counts": [512, 1024, 2048]}}
    page.goto(f"{server}/size?s={state.encode_query(json.loads(json.dumps(data)))}")
    page.get_by_role("heading", name="Size a cluster").wait_for()
    _idle(page)
    _fill(page, "Power envelope (MW, 0 = none)", "1.7")
    _fill(page, "Site PUE (0 = the cost's)", "1.3")
    _fill(page, "Fabric oversubscription (x:1, 0 = none)", "2")
    _press(page, "Size the cluster")
    page.get_by_text("Power and what binds").wait_for()
    _idle(page)
    _no_errors(page)
    text = _text(page)
    # 1.7 MW / ((1,275 W + 23 W of the 2:1 fabric's optics) x 1.3) = 1,007 GPUs: 125 DGX H100 nodes
    assert "holds 1,000 GPUs" in text and "h100-sxm binds:" in text
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "size-power-1440.png"), full_page=True)
    link = page.url
    sc = state.decode_query(link.split("s=", 1)[1].split("&")[0])
    assert sc.facility.power_mw == 1.7 and sc.facility.pue == 1.3
    assert sc.fabric is not None and sc.fabric.oversubscription == 2.0 and sc.fabric.tiers is None
    page.goto("about:blank")
    page.goto(link)
    page.get_by_role("heading", name="Size a cluster").wait_for()
    _idle(page)
    assert page.get_by_label("Power envelope (MW, 0 = none)", exact=True).input_value() == "1.70"
    assert page.get_by_label("Fabric oversubscription (x:1, 0 = none)", exact=True).input_value() == "2.00"
