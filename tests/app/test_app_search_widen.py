"""The Search page's "Also search": each chosen dimension joins the search (more combinations,
the winning layout's setting shown), and the choices leave the sidebar's job as it was."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

APP = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"


def _enumerated(at) -> int:
    text = next(c.value for c in at.caption if "combinations enumerated" in c.value)
    return int(re.search(r"([\d,]+) combinations enumerated", text).group(1).replace(",", ""))


def _search(at) -> None:
    next(b for b in at.button if b.label == "Search").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def test_also_search_widens_the_search_and_shows_the_settings():
    at = AppTest.from_file(str(APP), default_timeout=300).run()
    at.switch_page("pages_/search.py").run()
    at.number_input(key="num_gpus").set_value(16).run()
    _search(at)
    plain = _enumerated(at)
    table = at.dataframe[0].value
    assert {"schedule", "SP", "precision", "overlapped"} <= set(table.columns)
    assert set(table["precision"]) == {"bf16"}                     # the sidebar's precision only
    counts = {}
    for choice in ("sequence parallelism off", "pipeline schedule", "overlap", "precision"):
        at.multiselect(key="search_widen").set_value([choice])    # sent with the form's button
        _search(at)
        counts[choice] = _enumerated(at)
        assert counts[choice] > plain, choice
    assert counts["precision"] == 3 * plain                        # bf16, fp16 and fp8 on an H100
    at.multiselect(key="search_widen").set_value(["precision", "sequence parallelism off"])
    _search(at)
    top = at.dataframe[0].value
    assert set(top["precision"]) <= {"bf16", "fp16", "fp8"} and set(top["SP"]) <= {"on", "off"}
    assert at.session_state["precision"] == "bf16"                 # the sidebar's job is unchanged
