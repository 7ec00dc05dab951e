"""A hostile share link in a real browser (issue 48): every page opens from a link whose scenario
name, inline hardware names, price provider and citations are Markdown images, HTML and bare
URLs, and the viewer's chromium sends no request to any address but this machine's.

Playwright listens to every request of the browser context (documents, images, fonts, scripts,
WebSockets); requests to other hosts are also aborted, so the test never reaches out itself."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

import pytest
from browser.test_browser import CHROMIUM, CHROMIUM_ARGS, server  # noqa: F401  (fixture)
from support.hostile import EVIL, hostile_link

pytestmark = pytest.mark.browser

PAGES = (("home", "Plan"), ("compare", "Compare"), ("scale", "Scale"), ("search", "Search"), ("size", "Size"),
         ("peers", "Peers"), ("diagnose", "Diagnose"), ("calibration", "Calibration"))
TIMEOUT_MS = 120_000
SETTLE_MS = 1500
"""After the script finishes: time for the browser to load whatever the page's Markdown asks for."""


def _local(url: str) -> bool:
    parts = urlsplit(url)
    if parts.scheme in ("data", "blob", "about", "chrome", "chrome-extension"):
        return True
    host = (parts.hostname or "").lower()
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def test_hostile_link_makes_no_outside_request_on_any_page(server):  # noqa: F811
    from playwright.sync_api import sync_playwright

    outside: list[str] = []
    link = hostile_link()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        ctx = browser.new_context(viewport={"width": 1440, "height": 1400})
        ctx.on("request", lambda r: None if _local(r.url) else outside.append(r.url))
        ctx.route(lambda url: not _local(url), lambda route: route.abort())
        pg = ctx.new_page()
        pg.set_default_timeout(TIMEOUT_MS)
        try:
            for path, heading in PAGES:
                pg.goto(f"{server}/{path}?s={link}")
                pg.get_by_role("heading").filter(has_text=heading).first.wait_for()
                pg.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')")
                if path == "peers":
                    pg.locator('[data-testid="stButton"]').filter(has_text="Save the sidebar").first.click()
                    pg.wait_for_function("t => document.body.innerText.includes(t)", arg=EVIL[:30])
                pg.wait_for_timeout(SETTLE_MS)
                assert pg.locator('[data-testid="stException"]').count() == 0, path
        finally:
            browser.close()
    assert not outside, sorted(set(outside))
