"""Hostile names render as text on every page (issue 48, finding 1).

A share link can carry any string a scenario holds: its name, an inline hardware spec's names,
price source and citations. Streamlit renders titles, captions, alerts, widget labels, tooltips
and radio options as Markdown, so such a string, unescaped, becomes an image the viewer's browser
fetches or a link. Every one goes through ``appkit.page.plain``; these tests walk every page (its
study run, Peers with the job saved) and look at every Markdown-rendered field.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from support.hostile import EVIL, hostile_link

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app" / "streamlit_app.py"
TIMEOUT_S = 180
STUDY_BUTTONS = {"pages_/compare.py": "Compare", "pages_/scale.py": "Run the sweep", "pages_/search.py": "Search",
                 "pages_/size.py": "Size the cluster"}
PAGES = ("pages_/plan.py", "pages_/compare.py", "pages_/scale.py", "pages_/search.py", "pages_/size.py",
         "pages_/peers.py", "pages_/diagnose.py", "pages_/calibration.py")
ACTIVE = re.compile(r"(?<!\\)!(?<!\\)\[|(?<!\\)\]\(|(?<!\\)<|https?://|www\.evil|evil\.example")
"""Markdown that would load or link something: an image, a link, an HTML tag, a bare URL."""
MARKDOWN_FIELDS = ("body", "label", "help")
"""Proto fields Streamlit renders as Markdown (options too, for radio buttons)."""


def markdown_fields(node, out: list) -> list:
    """``(element type, field, text)`` of every Markdown-rendered field under ``node``."""
    proto = getattr(node, "proto", None)
    if proto is not None:
        for field in MARKDOWN_FIELDS:
            value = getattr(proto, field, None)
            if isinstance(value, str) and value:
                out.append((type(node).__name__, field, value))
        if type(node).__name__ == "Radio":
            out += [("Radio", "option", o) for o in proto.options]
    children = getattr(node, "children", None)
    for child in (children.values() if isinstance(children, dict) else ()):
        markdown_fields(child, out)
    return out


def active_fields(fields: list) -> list:
    """The fields whose Markdown would load or link something, less the app's own layout rules
    (``appkit.page.LAYOUT_CSS``, the one HTML it writes, with no user text in it)."""
    from appkit.page import LAYOUT_CSS
    return [(t, f, v) for t, f, v in fields if ACTIVE.search(v) and (t, v) != ("Html", LAYOUT_CSS)]


@pytest.fixture(scope="module")
def walked() -> dict[str, list]:
    """Every page opened from the hostile link: its Markdown fields."""
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    at.query_params["s"] = hostile_link()
    at.run()
    out = {}
    for page in PAGES:
        at.switch_page(page).run()
        if page in STUDY_BUTTONS:
            next(b for b in at.button if b.label == STUDY_BUTTONS[page]).click().run()
        if page == "pages_/peers.py":
            at.button(key="peer_add").click().run()
        assert not at.exception, (page, [e.value for e in at.exception])
        out[page] = markdown_fields(at._tree, [])
    return out


@pytest.mark.parametrize("page", PAGES)
def test_no_hostile_markdown_on_any_page(walked, page):
    active = active_fields(walked[page])
    assert not active, active


def test_the_hostile_strings_are_shown(walked):
    """Not vacuous: the name reaches the Peers button and the price source Plan's cost tooltip."""
    shown = [re.sub(r"\\(.)", r"\1", v) for t, f, v in walked["pages_/peers.py"] + walked["pages_/plan.py"]]
    assert any(EVIL[:40] in v and "Save" in v for v in shown)
    assert any("https://evil.example/b.png" in v and "GPU-h" in v for v in shown)


def test_pages_hold_no_bare_string_statements():
    """Streamlit's 'magic' writes a bare string statement as Markdown: an attribute docstring in a
    page shows on it as text. Only the module docstring may stand alone."""
    found = []
    for path in sorted((ROOT / "app" / "pages_").glob("*.py")) + [APP]:
        body = ast.parse(path.read_text()).body
        found += [f"{path.name}:{s.lineno}" for s in body[1:]
                  if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)]
    assert not found, found


def test_the_report_escapes_hostile_names():
    """The downloadable report is HTML: every name and source in it goes through ``html.escape``."""
    import sys
    sys.path.insert(0, str(ROOT / "app"))
    from appkit import report, state
    sc = state.decode_query(hostile_link())
    key = state.JobInputs(sc, None, sc.cost, True).key()
    text = report.report_html(key, state.scenario_yaml(sc))
    assert "<img" not in text and "href=" not in text   # Markdown is inert in HTML; tags are what load
    assert "&lt;img src=https://evil.example/b.png&gt;" in text


def test_a_refused_links_hostile_key_shows_as_text():
    """A link refused for an unknown key: the one-line error names the key, escaped."""
    import base64
    import json
    import zlib

    from perfmodel.spec.scenario import load_scenario, scenario_to_dict
    sc = json.loads(json.dumps(scenario_to_dict(load_scenario(ROOT / "perfmodel" / "data" / "example_scenario.yaml"))))
    sc[EVIL[:60]] = 1
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    at.query_params["s"] = base64.urlsafe_b64encode(zlib.compress(json.dumps(sc).encode())).decode().rstrip("=")
    at.run()
    assert not at.exception and at.error
    fields = markdown_fields(at._tree, [])
    assert any("evil" in v for _, _, v in fields)
    assert not active_fields(fields)
