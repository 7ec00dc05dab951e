"""The app in a real browser: Debian's chromium driven by Playwright's sync API.

Starts ``streamlit run app/streamlit_app.py`` on a free localhost port, opens every page,
checks that the charts draw and that no exception or error shows, changes an input and
checks that the figures update, and saves screenshots to ``artifacts/screenshots/``.
Skipped (with the reason) when /usr/bin/chromium or Playwright is missing.
"""

from __future__ import annotations

from contextlib import contextmanager

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app" / "streamlit_app.py"
SHOTS = ROOT / "artifacts" / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update"]
PAGES = [("", "plan", "Plan"), ("compare", "compare", "Compare hardware"), ("scale", "scale", "Scale"),
         ("search", "search", "Search"), ("size", "size", "Size a cluster"),
         ("calibration", "calibration", "Calibration and validation")]
START_TIMEOUT_S = 60
PAGE_TIMEOUT_MS = 90_000
VIEWPORT = {"width": 1500, "height": 2600}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium; scripts/test.sh does it)")
    pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    port = _free_port()
    SHOTS.mkdir(parents=True, exist_ok=True)
    log = open(SHOTS.parent / "streamlit.log", "w")
    cmd = [sys.executable, "-m", "streamlit", "run", str(APP), "--server.port", str(port), "--server.address",
           "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
           "--server.fileWatcherType", "none"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://localhost:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"streamlit did not become healthy on port {port} (exit code {proc.poll()})")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@contextmanager
def chromium_page(viewport: dict, timeout_ms: int = PAGE_TIMEOUT_MS, **context):
    """A page of Debian's chromium, started with the flags above, at ``viewport`` (``context``: more
    browser-context options, such as ``accept_downloads``); the browser closes on exit."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            pg = browser.new_context(viewport=viewport, **context).new_page()
            pg.set_default_timeout(timeout_ms)
            yield pg
        finally:
            browser.close()


@pytest.fixture(scope="module")
def page(server):
    with chromium_page(VIEWPORT) as pg:
        yield pg


def _wait_until_drawn(pg, min_charts: int = 1) -> None:
    """The script has finished (no 'running' indicator) and the charts are on the page."""
    pg.wait_for_function(
        "n => document.querySelectorAll('[data-testid=\"stVegaLiteChart\"] canvas, "
        "[data-testid=\"stVegaLiteChart\"] svg').length >= n", arg=min_charts)
    pg.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')")
    pg.wait_for_timeout(800)   # let Vega finish painting before a screenshot


def _no_errors(pg) -> None:
    assert pg.locator('[data-testid="stException"]').count() == 0, "a traceback reached the page"
    errors = pg.locator('[data-testid="stAlertContentError"]')
    assert errors.count() == 0, errors.all_inner_texts()


def _metric(pg, label: str) -> str:
    m = pg.locator('[data-testid="stMetric"]').filter(has_text=label).first
    return m.locator('[data-testid="stMetricValue"]').inner_text()


STUDY_BUTTONS = {"compare": "Compare", "scale": "Run the sweep", "search": "Search", "size": "Size the cluster"}
"""Pages whose studies run when asked: the button each test presses."""


@pytest.mark.parametrize("path,name,title", PAGES)
def test_every_page_renders(page, server, path, name, title):
    page.goto(f"{server}/{path}")
    page.get_by_role("heading", name=title).first.wait_for()
    if name in STUDY_BUTTONS:
        page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')")
        page.locator('[data-testid$="FormSubmit"]').filter(has_text=STUDY_BUTTONS[name]).first.click()
    _wait_until_drawn(page)
    _no_errors(page)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def _set_and_wait(pg, label: str, value: str) -> float:
    """Type ``value`` into the number input ``label``; seconds until the step time changes."""
    before = _metric(pg, "Step time")
    box = pg.get_by_label(label, exact=True)
    box.fill(value)
    t0 = time.perf_counter()
    box.press("Enter")
    pg.wait_for_function(
        "old => { const m = [...document.querySelectorAll('[data-testid=\"stMetric\"]')]"
        ".find(e => e.innerText.includes('Step time'));"
        " return m && !m.innerText.includes(old); }", arg=before)
    return time.perf_counter() - t0


def test_changing_an_input_updates_the_figures(page, server):
    page.goto(server)
    _wait_until_drawn(page, min_charts=3)
    before = _metric(page, "Step time")
    charts_before = page.locator('[data-testid="stVegaLiteChart"]').first.inner_html()
    times = [_set_and_wait(page, "tp", v) for v in ("8", "2", "4", "8")]
    _wait_until_drawn(page, min_charts=3)
    _no_errors(page)
    assert _metric(page, "Step time") != before
    assert page.locator('[data-testid="stVegaLiteChart"]').first.inner_html() != charts_before
    assert "s=" in page.url, "the URL carries the scenario"
    page.screenshot(path=str(SHOTS / "plan-tp8.png"), full_page=True)
    times.sort()
    print(f"browser redraw after changing tp: median {1e3 * (times[1] + times[2]) / 2:.0f} ms, "
          f"worst {1e3 * times[-1]:.0f} ms")


def _open_plan_and_set_gpus(page, server, num_gpus: int) -> None:
    page.goto(server)
    _wait_until_drawn(page, min_charts=3)
    gpus = page.get_by_label("GPUs", exact=True)
    gpus.fill(str(num_gpus))
    gpus.press("Enter")


def test_invalid_layout_shows_one_line_error(page, server):
    _open_plan_and_set_gpus(page, server, 60)
    err = page.locator('[data-testid="stAlertContentError"]').first
    err.wait_for()
    assert "does not divide num_gpus(60)" in err.inner_text()
    assert page.locator('[data-testid="stException"]').count() == 0
    page.screenshot(path=str(SHOTS / "plan-invalid.png"), full_page=True)


def test_shared_link_opens_the_same_job(page, server):
    _open_plan_and_set_gpus(page, server, 128)
    page.wait_for_function("() => document.body.innerText.includes('128 x h100-sxm')")
    page.wait_for_function("() => location.search.includes('s=')")
    link = page.url
    page.goto("about:blank")
    page.goto(link)
    page.wait_for_function("() => document.body.innerText.includes('128 x h100-sxm')")
    _no_errors(page)
