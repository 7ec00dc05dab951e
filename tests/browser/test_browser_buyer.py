"""Decisions a buyer can act on (issue 50), in Debian's chromium at 1024 and 1440 px: every page drawn
at both widths with nothing cut off and every chart's bars drawn; no announced hardware or placeholder
price in Size's headline by default, and rings that say whose they are; Size's tokens never rewrite the
job without a visible, undoable choice; Scale on log axes with a linear option; MFU as a percentage;
Search keeps its results after Load; a GPU count of 0 is a one-line error; Compare's hardware is in
the link. Screenshots go to ``artifacts/screenshots/<page>-<width>.png``."""

from __future__ import annotations

import re
import sys
import urllib.parse
from pathlib import Path

import pytest
from browser.test_browser import SHOTS, chromium_page, server  # noqa: F401  (fixture)

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "app"))
from appkit import state  # noqa: E402
from support.apptest import link as _link  # noqa: E402

WIDTHS = (1024, 1440)
HEIGHT = 900
TIMEOUT_MS = 120_000
ANNOUNCED = ("gb200-nvl576", "vera-rubin-nvl72", "rubin-ultra-nvl576")


@pytest.fixture(scope="module")
def page(server):  # noqa: F811
    with chromium_page({"width": WIDTHS[0], "height": HEIGHT}, TIMEOUT_MS) as pg:
        yield pg


def _scenario_in_url(pg):
    query = urllib.parse.parse_qs(urllib.parse.urlparse(pg.url).query)
    return state.decode_query(query[state.QUERY_KEY][0])


def _idle(pg) -> None:
    pg.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')")
    pg.wait_for_timeout(600)


def _open(pg, url: str, heading: str) -> None:
    pg.set_viewport_size({"width": WIDTHS[0], "height": HEIGHT})
    pg.goto(url)
    pg.get_by_role("heading", name=heading).first.wait_for()
    _idle(pg)


def _press(pg, label: str) -> None:
    pg.locator('[data-testid^="stBaseButton-"][data-testid$="FormSubmit"]').filter(has_text=label).first.click()
    pg.wait_for_timeout(800)
    _idle(pg)


def _enter(pg, label: str, text: str) -> None:
    box = pg.get_by_label(label, exact=True)
    box.fill(text)
    box.press("Enter")
    _idle(pg)


def _type(pg, label: str, text: str) -> None:
    """Type into a form's field and leave it (Enter would submit the form)."""
    box = pg.get_by_label(label, exact=True)
    box.fill(text)
    box.press("Tab")
    pg.wait_for_timeout(300)


def _text(pg) -> str:
    return pg.locator("[data-testid='stMain']").first.inner_text()


def _no_errors(pg) -> None:
    assert pg.locator('[data-testid="stException"]').count() == 0, "a traceback reached the page"
    errors = pg.locator('[data-testid="stAlertContentError"]')
    assert errors.count() == 0, errors.all_inner_texts()


def _cut_off(pg) -> list[str]:
    """Metric values, headings, buttons and labels whose text overflows its box (ends in an ellipsis)."""
    return pg.evaluate("""() => [...document.querySelectorAll(
        '[data-testid=stMetricValue], [data-testid=stMetricValue] div, [data-testid=stMain] h1, '
        + '[data-testid=stMain] button p, [data-testid=stMain] [data-testid=stMarkdownContainer]')]
        .filter(e => e.offsetParent !== null && e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)""")


def _bars(pg) -> list[tuple[int, float]]:
    """(bars drawn, longest bar in px) of each bar chart in the page's main area (Vega draws SVG)."""
    return pg.evaluate("""() => [...document.querySelectorAll('[data-testid=stMain] [data-testid=stVegaLiteChart]')]
        .map(c => [...c.querySelectorAll('g.mark-rect path')].map(p => p.getBBox()))
        .filter(boxes => boxes.length)
        .map(boxes => { const w = boxes.map(b => Math.max(b.width, b.height)).sort((a, b) => a - b);
                        return [boxes.length, w[w.length - 1]]; })""")


def _chart_text(pg) -> str:
    return " | ".join(pg.evaluate("""() => [...document.querySelectorAll(
        '[data-testid=stMain] [data-testid=stVegaLiteChart] text')].map(t => t.textContent)"""))


def _headers(pg, n: int = 0) -> list[str]:
    """The dataframe's column headers in view (the grid's accessible table holds the drawn columns)."""
    frame = pg.locator('[data-testid="stDataFrame"]').nth(n)
    frame.scroll_into_view_if_needed()
    pg.wait_for_timeout(500)
    return frame.evaluate("e => [...e.querySelectorAll('[role=columnheader]')].map(x => x.innerText)")


def _cells(pg, n: int = 0) -> str:
    frame = pg.locator('[data-testid="stDataFrame"]').nth(n)
    frame.scroll_into_view_if_needed()
    pg.wait_for_timeout(500)
    return frame.evaluate("e => [...e.querySelectorAll('[role=gridcell]')].map(x => x.innerText).join(' | ')")


def _at_both_widths(pg, name: str, check=None) -> None:
    """At 1024 and 1440 px: ``check(pg, width)``, nothing cut off, and a full-page screenshot."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    for width in WIDTHS:
        pg.set_viewport_size({"width": width, "height": HEIGHT})
        pg.wait_for_timeout(900)
        assert _cut_off(pg) == [], f"{name} at {width} px"
        assert "\u2026" not in _chart_text(pg), f"a chart's text cut off in {name} at {width} px"    # Vega's ellipsis
        if check is not None:
            check(pg, width)
        height = pg.evaluate("document.querySelector('[data-testid=stMain]').scrollHeight")
        pg.set_viewport_size({"width": width, "height": min(height + 40, 8000)})
        pg.wait_for_timeout(900)
        pg.screenshot(path=str(SHOTS / f"{name}-{width}.png"))
    pg.set_viewport_size({"width": WIDTHS[0], "height": HEIGHT})


def _bars_drawn(min_charts: int):
    def check(pg, width):
        bars = _bars(pg)
        assert len(bars) >= min_charts, bars
        assert all(length >= 40 for n, length in bars), (width, bars)
    return check


# ---------------------------------------------------------------------------------- Plan
def test_plan_figures_whole_and_gpu_count_zero_a_one_line_error(page, server):  # noqa: F811
    _open(page, f"{server}/", "Plan: Llama 3 70B on 64 x h100-sxm")
    _no_errors(page)
    assert page.locator('[data-testid="stMetric"]').count() >= 9
    _at_both_widths(page, "plan", _bars_drawn(2))
    _enter(page, "GPUs", "0")
    errors = page.locator('[data-testid="stAlertContentError"]')
    assert errors.count() == 1
    message = errors.first.inner_text().strip()
    assert "num_gpus" in message and "\n" not in message
    assert page.locator('[data-testid="stMetric"]').count() == 0           # no stale results
    assert page.locator('[data-testid="stException"]').count() == 0


# ------------------------------------------------------------------------------- Compare
def test_compare_draws_every_bar_says_what_is_not_drawn_and_keeps_its_hardware_in_the_link(page, server):  # noqa: F811
    chosen = ["h100-sxm", "b200", "a100-sxm-40gb"]
    _open(page, _link(server, "compare", studies={"compare_hardware": chosen}), "Compare hardware and software")
    assert "Not shown unless you add them" in _text(page) and "rubin-ultra-nvl576" in _text(page)
    _press(page, "Compare")
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    _idle(page)
    _no_errors(page)
    text = _text(page)
    # a100-sxm-40gb: the sidebar's layout does not fit, the best one does and is drawn
    assert "Not drawn" not in text and "The sidebar's layout does not run on a100-sxm-40gb" in text
    assert _scenario_in_url(page).studies.compare_hardware == tuple(chosen)

    def check(pg, width):
        _bars_drawn(3)(pg, width)
        assert _headers(pg)[:6] == ["hardware", "layout", "fits", "time to train", "cost", "bottleneck"]
    _at_both_widths(page, "compare", check)


# ---------------------------------------------------------------------------------- Size
def test_size_recommends_only_shipped_hardware_and_its_tokens_stay_on_the_page(page, server):  # noqa: F811
    _open(page, _link(server, "size", training_tokens=2.0e12, studies={"size_gpu_counts": [256, 512, 1024, 2048]}),
          "Size a cluster")
    plan_link = _scenario_in_url(page)
    _type(page, "Training tokens (billions)", "15000")
    _type(page, "Deadline (days, 0 = none)", "30")
    _type(page, "Budget (USD, 0 = none)", "10000000")
    _press(page, "Size the cluster")
    page.get_by_text("Cheapest:").first.wait_for()
    _idle(page)
    _no_errors(page)
    headline = page.locator('[data-testid="stAlertContentSuccess"]').first.inner_text()
    assert not any(h in headline for h in ANNOUNCED) and "announced" not in headline and "placeholder" not in headline
    assert "Left out unless you add them" in _text(page)
    labels = _chart_text(page)
    assert " GPUs" in labels and any(f"{h}: " in labels for h in ("b200", "gb200-nvl72", "h100-sxm", "b300"))
    # the job keeps its 2,000 B tokens: the page says so and offers the change
    assert _scenario_in_url(page).training_tokens == plan_link.training_tokens == 2.0e12
    assert "the job in the sidebar has 2,000 B tokens" in _text(page)
    _at_both_widths(page, "size", lambda pg, w: _headers(pg)[:6] == ["hardware", "meets both", "GPUs",
                                                                     "time to train", "cost", "layout"]
                    or pytest.fail(str(w)))
    page.get_by_role("button", name="Make them the job's").click()
    _idle(page)
    assert _scenario_in_url(page).training_tokens == 1.5e13
    assert "now has 15,000 B tokens" in _text(page)
    assert page.locator('[data-testid="stAlertContentSuccess"]').first.inner_text() == headline   # results kept
    page.get_by_role("button", name="Undo").click()
    _idle(page)
    after = _scenario_in_url(page)
    assert after.training_tokens == 2.0e12 and after.purpose.deadline_days is None


# --------------------------------------------------------------------------------- Scale
def test_scale_reads_on_log_axes_with_a_linear_option(page, server):  # noqa: F811
    _open(page, _link(server, "scale", studies={"scale_gpu_counts": [16, 64, 256, 1024]}), "Scale")
    _press(page, "Run the sweep")
    page.locator('[data-testid="stVegaLiteChart"]').first.wait_for()
    _idle(page)
    _no_errors(page)
    assert "time to solution (days, log scale)" in _chart_text(page)
    assert "cost (USD, log scale)" in _chart_text(page)
    _at_both_widths(page, "scale")
    page.locator('[data-testid="stRadio"]').filter(has_text="Time and cost axes").get_by_text(
        "linear", exact=True).click()
    page.wait_for_timeout(800)
    _idle(page)
    assert "log scale" not in _chart_text(page).replace("GPUs (count, log scale)", "")
    assert "time to solution (days)" in _chart_text(page)
    assert max(length for _, length in _bars(page)) >= 40    # the stacked step-time breakdown (the rest: ticks)


# -------------------------------------------------------------------------------- Search
def test_search_keeps_its_results_after_load(page, server):  # noqa: F811
    _open(page, f"{server}/search", "Search")
    text = _text(page)
    assert "Dimensions the search leaves" not in text and "GPU counts typed beside" not in text   # no stray notes
    _press(page, "Search")
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    _idle(page)
    _at_both_widths(page, "search", lambda pg, w: _headers(pg)[:6] == ["rank", "GPUs", "layout", "step time",
                                                                       "cost of training", "bottleneck"]
                    or pytest.fail(str(w)))
    first = _cells(page)
    page.get_by_role("button", name="Load it into the sidebar").click()
    _idle(page)
    _no_errors(page)
    assert "These are the results of the search you ran before loading layout 1" in _text(page)
    assert page.locator('[data-testid="stDataFrame"]').count() >= 1
    assert _cells(page) == first and first


# --------------------------------------------------------------------------------- Peers
def test_peers_shows_mfu_as_a_percentage(page, server):  # noqa: F811
    _open(page, f"{server}/peers", "Peers: scenarios side by side")
    assert "Scenarios side by side, at most" not in _text(page)                                # no stray note
    page.get_by_role("button", name="Save the sidebar's job as").click()
    page.locator('[data-testid="stVegaLiteChart"]').first.wait_for()
    _idle(page)
    _no_errors(page)
    labels = _chart_text(page)
    assert "MFU (%)" in labels and re.search(r"\b\d{1,2}\.\d%", labels)
    assert not re.search(r"\b\d+(\.\d+)?m\b", labels), labels             # never SI's "436m"
    _at_both_widths(page, "peers", _bars_drawn(3))


# ----------------------------------------------------------------- Diagnose, Calibration
@pytest.mark.parametrize("path, heading", [("diagnose", "Diagnose"), ("calibration", "Calibration")])
def test_the_other_pages_fit_both_widths(page, server, path, heading):  # noqa: F811
    _open(page, f"{server}/{path}", heading)
    _no_errors(page)
    _at_both_widths(page, path)
