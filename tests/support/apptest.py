"""The app as the AppTest and browser tests open it: from a crafted link carrying the default
scenario with some fields replaced, and a run that shows no exception and no error."""

from __future__ import annotations

import json
import sys
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app" / "streamlit_app.py"
if str(APP.parent) not in sys.path:
    sys.path.insert(0, str(APP.parent))
TIMEOUT_S = 120


def query(**over) -> str:
    """The link's ``s`` value: the default scenario with ``over`` in place of its fields."""
    from appkit import state
    data = {**state.scenario_to_dict(state.default_scenario()), **over}
    return state.encode_query(json.loads(json.dumps(data)))


def open_app(over: dict | None = None):
    """The app run once, opened from a link of ``over`` (None: no link)."""
    from appkit import state
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    if over is not None:
        at.query_params[state.QUERY_KEY] = query(**over)
    return at.run()


def assert_clean(at) -> None:
    """No exception and no error on the page."""
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def link(server_url: str, path: str, **over) -> str:
    """A page's address on a running app, opened from a link of ``over``."""
    return f"{server_url}/{path}?s={query(**over)}"
