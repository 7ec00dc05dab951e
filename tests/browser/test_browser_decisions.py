"""The app as a decision tool (issue 35), in Debian's chromium at 1440 x 1000: sizing that grows the
batch and says so, the Search page at the sidebar's GPU count for the presets that crashed, quick
redraws and progress bars, one price basis with its source, links and downloads that keep every
setting, fixes for a layout that does not fit, peers side by side and the report. Screenshots of
each page go to ``artifacts/screenshots/*-1440.png``."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import pytest
import yaml
from browser.test_browser import SHOTS, chromium_page, server  # noqa: F401  (fixture)

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "app"))
from appkit import state  # noqa: E402
from support.apptest import link as _link  # noqa: E402

VIEWPORT = {"width": 1440, "height": 1000}
TIMEOUT_MS = 120_000
REDRAW_MEDIAN_BOUND_S = 0.45
"""Plan's redraw after a sidebar change, median of six, in this shared 2-core test machine's
chromium: scripts/measure_redraw_browser.py measured about 0.23 s (the target is 0.3 s); the test
allows for a loaded machine."""


@pytest.fixture(scope="module")
def page(server):  # noqa: F811
    with chromium_page(VIEWPORT, TIMEOUT_MS, accept_downloads=True) as pg:
        yield pg


def _idle(pg) -> None:
    pg.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')")
    pg.wait_for_timeout(600)


def _no_errors(pg) -> None:
    assert pg.locator('[data-testid="stException"]').count() == 0, "a traceback reached the page"
    errors = pg.locator('[data-testid="stAlertContentError"]')
    assert errors.count() == 0, errors.all_inner_texts()


def _press(pg, label: str) -> None:
    """Click a form's submit button (not, say, a dataframe toolbar's 'Search')."""
    pg.locator('[data-testid^="stBaseButton-"][data-testid$="FormSubmit"]').filter(has_text=label).first.click()


def _enter(pg, label: str, text: str) -> None:
    """Type into the field labelled ``label`` and press Enter, as a user commits a value."""
    box = pg.get_by_label(label, exact=True)
    box.fill(text)
    box.press("Enter")
    _idle(pg)


def _edit(pg, group: str) -> None:
    """Open one of the sidebar's groups (the "Edit" choice)."""
    pg.get_by_label("Edit", exact=True).click()
    pg.get_by_role("option", name=group, exact=True).click()
    _idle(pg)


def _shot(pg, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    pg.screenshot(path=str(SHOTS / f"{name}-1440.png"), full_page=True)


def _text(pg) -> str:
    return pg.locator("section.main, [data-testid='stMain']").first.inner_text()


def _grid(pg, n: int = 0) -> tuple[list[str], str]:
    """A dataframe's column headers and all its cells' text (from the grid's accessible table: the
    grid itself is drawn on a canvas)."""
    frame = pg.locator('[data-testid="stDataFrame"]').nth(n)
    frame.scroll_into_view_if_needed()           # the grid draws (and labels) what is in view
    pg.wait_for_timeout(500)
    headers = frame.evaluate("e => [...e.querySelectorAll('[role=columnheader]')].map(x => x.innerText)")
    cells = frame.evaluate("e => [...e.querySelectorAll('[role=gridcell]')].map(x => x.innerText).join(' | ')")
    return headers, cells


# ------------------------------------------------------------------------ 1 sizing grows the batch
def test_size_grows_the_batch_and_says_the_batch_limited(page, server):  # noqa: F811
    url = _link(server, "size", purpose={"deadline_days": 30.0, "budget_usd": 1.0e7},
                studies={"size_hardware": ["h100-sxm", "b200", "gb200-nvl72"],
                         "size_gpu_counts": [1024, 2048, 4096, 8192]}, training_tokens=1.5e13)
    page.goto(url)
    page.get_by_role("heading", name="Size a cluster").wait_for()
    _idle(page)
    assert "Press Size the cluster" in _text(page)            # a search runs only when asked
    _press(page, "Size the cluster")
    page.locator('[data-testid="stProgress"]').first.wait_for(state="attached")    # a real progress bar
    page.get_by_text("Cheapest: 4096 x gb200-nvl72").wait_for()
    _idle(page)
    _no_errors(page)
    text = _text(page)
    assert "The batch, not the hardware, was what limited" in text
    assert "at $4.54/GPU-h" in text and "the global batch grown to 16.8M tokens" in text
    headers, cells = _grid(page)
    assert headers[:6] == ["hardware", "meets both", "GPUs", "time to train", "cost", "layout"]
    assert "16.8M tokens (grown)" in cells
    _shot(page, "size")


# ------------------------------------------------------------------- 5 search answers the question
def test_search_renders_for_the_presets_that_crashed_at_the_sidebars_count(page, server):  # noqa: F811
    for model in ("gpt3-175b", "llama2-70b"):
        page.goto(_link(server, "search", model=model, num_gpus=64, parallelism={"tp": 8, "pp": 8}))
        page.get_by_role("heading", name="Search").wait_for()
        _idle(page)
        _press(page, "Search")
        page.locator('[data-testid="stVegaLiteChart"]').first.wait_for()
        _idle(page)
        _no_errors(page)
        assert "MaxRowsError" not in _text(page)
        assert "Load it into the sidebar (and the Plan page)" in _text(page)    # no GPU count change
    _shot(page, "search")
    box = page.get_by_label("Also try GPU counts (optional, comma-separated)", exact=True)
    box.fill("128")
    _press(page, "Search")
    page.get_by_text("besides the sidebar's 64").wait_for()
    _idle(page)
    # the fastest layouts are at 128 GPUs: loading the first says it changes the GPU count
    page.get_by_role("button", name="Load it into the sidebar: changes the GPU count from 64 to 128").click()
    page.get_by_text("the GPU count changed from 64 to 128").wait_for()
    _no_errors(page)



def _enumerated(pg) -> int:
    import re
    return int(re.search(r"([\d,]+) combinations enumerated", _text(pg)).group(1).replace(",", ""))


def test_search_also_searches_what_the_user_picks(page, server):  # noqa: F811
    page.goto(_link(server, "search", num_gpus=16))
    page.get_by_role("heading", name="Search").wait_for()
    _idle(page)
    _press(page, "Search")
    page.get_by_text("combinations enumerated").wait_for()
    _idle(page)
    plain = _enumerated(page)
    box = page.locator('[data-testid="stMultiSelect"]').filter(has_text="Also search")
    for choice in ("pipeline schedule", "sequence parallelism off"):
        box.locator("input").click()
        page.get_by_role("option", name=choice, exact=True).click()
    page.keyboard.press("Escape")
    _press(page, "Search")
    page.wait_for_function(f"() => !document.body.innerText.includes('{plain:,} combinations enumerated')")
    _idle(page)
    _no_errors(page)
    assert _enumerated(page) > plain
    headers, _ = _grid(page)
    assert {"schedule", "SP", "precision", "overlapped"} <= set(headers)
    _shot(page, "search-widened")

# --------------------------------------------------------------------- 2 fast pages, progress bars
def test_plan_redraws_quickly_after_a_sidebar_change(page, server):  # noqa: F811
    page.goto(server)
    page.locator('[data-testid="stVegaLiteChart"]').nth(2).wait_for()
    _idle(page)
    box = page.get_by_label("tp", exact=True)
    times = []
    for value in ("8", "4", "8", "4", "8", "4"):
        before = page.locator('[data-testid="stMetric"]').filter(has_text="Step time").inner_text()
        box.fill(value)
        t0 = time.perf_counter()
        box.press("Enter")
        page.wait_for_function(
            "old => { const m = [...document.querySelectorAll('[data-testid=\"stMetric\"]')]"
            ".find(e => e.innerText.includes('Step time')); return m && m.innerText !== old; }", arg=before)
        times.append(time.perf_counter() - t0)
        _idle(page)
    print(f"Plan redraw after tp: median {1e3 * statistics.median(times):.0f} ms, worst {1e3 * max(times):.0f} ms")
    assert statistics.median(times) < REDRAW_MEDIAN_BOUND_S
    _no_errors(page)
    _shot(page, "plan")


# ------------------------------------------------------------------------- 3 one price basis, sourced
def test_compare_prices_every_row_on_one_basis_with_its_source(page, server):  # noqa: F811
    page.goto(_link(server, "compare", cost={"cloud_class": "neocloud"}, model="llama3-405b"))
    page.get_by_role("heading", name="Compare hardware and software").wait_for()
    _idle(page)
    assert "neocloud on demand" in _text(page)
    page.get_by_text("Also search the best layout on each").click()    # as given only
    _press(page, "Compare")
    page.locator('[data-testid="stDataFrame"]').first.wait_for()
    _idle(page)
    page.get_by_text("Where each price comes from").click()
    text = _text(page)
    assert "spheron.network" in text and "mercatus-ai.com" in text
    assert "no neocloud on-demand price is sourced for gb300-nvl72" in text
    headers, cells = _grid(page)
    # 1440 px: whether a row fits, its time, cost and bottleneck, and why not, are never off-screen
    # (issue 50 put time, cost and bottleneck before why not), and the 405B rows that do not fit say so
    assert headers[:7] == ["hardware", "layout", "fits", "time to train", "cost", "bottleneck", "why not"]
    box = page.locator('[data-testid="stDataFrame"]').first.bounding_box()
    assert box["x"] + box["width"] <= VIEWPORT["width"]
    assert "does not fit: 320 GiB per GPU > 79 GiB usable" in cells
    _shot(page, "compare")


# ---------------------------------------------------------------------------- 4 everything round-trips
def test_a_link_and_the_yaml_keep_prices_page_options_and_edited_hardware(page, server):  # noqa: F811
    page.goto(f"{server}/scale")
    page.get_by_role("heading", name="Scale").wait_for()
    _idle(page)
    page.get_by_text("grow", exact=True).click()
    _press(page, "Run the sweep")
    page.locator('[data-testid="stVegaLiteChart"]').first.wait_for()
    _idle(page)
    _no_errors(page)
    _shot(page, "scale")
    link = page.url
    assert "s=" in link
    sc = state.decode_query(link.split("s=", 1)[1].split("&")[0])
    assert sc.studies.scale_mode == "grow"
    page.goto("about:blank")
    page.goto(link)
    page.get_by_role("heading", name="Scale").wait_for()
    _idle(page)
    assert page.get_by_role("radio", name="grow").is_checked()
    # the price basis and headline hardware, into the YAML download
    _edit(page, "Hardware")
    page.get_by_text("Headline numbers", exact=True).click()
    _idle(page)
    _enter(page, "Price (USD per GPU-hour)", "3.21")
    _edit(page, "Scenario file and link")
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download scenario YAML").click()
    data = yaml.safe_load(Path(dl.value.path()).read_text())
    assert isinstance(data["hardware"], dict) and data["hardware"]["price"]["cloud_usd_per_gpu_hour"] == 3.21
    assert data["studies"]["scale_mode"] == "grow"


# -------------------------------------------------------------------- 7 help when a plan fails, report
def test_plan_that_does_not_fit_offers_the_smallest_changes(page, server):  # noqa: F811
    page.goto(_link(server, "plan", model="llama3-405b"))        # /plan opens the Plan page, like /
    page.get_by_text("The smallest changes that make it fit").wait_for()
    _idle(page)
    assert page.get_by_text("Page not found").count() == 0
    _shot(page, "plan-does-not-fit")
    page.get_by_role("button", name="Apply it to the sidebar", exact=True).click()
    page.get_by_role("heading", name="Plan: Llama 3.1 405B on 512 x h100-sxm").wait_for()
    _idle(page)
    _no_errors(page)
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download a report (HTML: figures, price source, charts, scenario YAML)").click()
    html = Path(dl.value.path()).read_text()
    assert "<html" in html and "<figure class='chart'><svg" in html and "num_gpus: 512" in html


# ---------------------------------------------------------------- 8 peers; every page by its URL path
def test_peers_side_by_side_and_every_page_by_its_path(page, server):  # noqa: F811
    page.goto(f"{server}/peers")
    page.get_by_role("heading", name="Peers: scenarios side by side").wait_for()
    _idle(page)
    page.get_by_role("button", name="Save the sidebar's job as 'llama3-70b-64xh100'").click()
    _idle(page)
    _enter(page, "tp", "8")
    _edit(page, "Scenario file and link")
    _enter(page, "Scenario name", "tp8")
    page.get_by_role("button", name="Save the sidebar's job as 'tp8'").click()
    page.locator('[data-testid="stVegaLiteChart"]').nth(5).wait_for()
    _idle(page)
    _no_errors(page)
    _shot(page, "peers")
    for path, title in (("diagnose", "Diagnose a run"), ("calibration", "Calibration and validation")):
        page.goto(f"{server}/{path}")
        page.get_by_role("heading", name=title).first.wait_for()
        _idle(page)
        _no_errors(page)
        _shot(page, path)


# ------------------------------------------------------- 9 a link with CUDA graphs lifts a host-bound job
def _seconds(text: str) -> float:
    value, unit = text.split()[:2]
    return float(value.replace(",", "")) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[unit]


def test_a_link_with_cuda_graphs_shortens_a_host_bound_step(page, server):  # noqa: F811
    """Short sequences on GB200 leave the Grace host dispatching each op (37 us) behind the GPU; the
    same job's link with software.cuda_graphs: true opens with the box ticked and a shorter step,
    as perfmodel.predict gives it."""
    job = dict(hardware="gb200-nvl72", model="llama3-8b", num_gpus=8, seq_length=1024, global_batch_size=64,
               micro_batch_size=1, precision="fp8", recompute="none",
               parallelism={"tp": 1, "pp": 1, "vpp": 1, "cp": 1, "sequence_parallel": False, "zero_stage": 1})
    steps = {}
    for graphs in (False, True):
        page.goto(_link(server, "plan", **job, software={"stack": "nemo-perf", "cuda_graphs": graphs}))
        page.locator('[data-testid="stVegaLiteChart"]').first.wait_for()
        _idle(page)
        _no_errors(page)
        steps[graphs] = _seconds(page.locator('[data-testid="stMetric"]').filter(has_text="Step time")
                                 .locator('[data-testid="stMetricValue"]').inner_text())
    _edit(page, "Software stack")
    assert page.get_by_label("CUDA graphs", exact=True).is_checked()
    assert steps[True] < 0.8 * steps[False]
