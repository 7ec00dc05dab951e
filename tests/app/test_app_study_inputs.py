"""Study inputs that broke the whole session (issue 48, finding 4): clearing Scale's GPU counts, or
Size's counts or hardware, and pressing the button stored an empty list in the scenario, which every
page then refused; a link with GPU counts outside a page's list lost them unseen, with the same end.
Now an emptied list is one line on its page and is not stored, and a link's counts join the list."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app" / "streamlit_app.py"
TIMEOUT_S = 180


def _errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def _press(at: AppTest, label: str) -> AppTest:
    return next(b for b in at.button if b.label == label).click().run()


def _plan_still_works(at: AppTest) -> None:
    at.switch_page("pages_/plan.py").run()
    assert not at.exception and not _errors(at), _errors(at)
    assert any(m.label == "Step time" for m in at.metric)


@pytest.mark.parametrize("page,key,button,field", [
    ("pages_/scale.py", "scale_counts", "Run the sweep", "GPU counts"),
    ("pages_/size.py", "size_counts", "Size the cluster", "GPU counts to try"),
    ("pages_/size.py", "size_hardware", "Size the cluster", "Hardware"),
])
def test_an_emptied_list_is_one_line_and_the_session_survives(page, key, button, field):
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S).run()
    at.switch_page(page).run()
    at.multiselect(key=key).set_value([])
    _press(at, button)
    assert not at.exception
    errors = _errors(at)
    assert len(errors) == 1 and errors[0].startswith(f"{field}:") and "\n" not in errors[0], errors
    _plan_still_works(at)


@pytest.mark.parametrize("page,studies,key,button", [
    ("pages_/scale.py", {"scale_gpu_counts": [24, 96]}, "scale_counts", "Run the sweep"),
    ("pages_/size.py", {"size_gpu_counts": [24, 96]}, "size_counts", "Size the cluster"),
])
def test_a_links_counts_outside_the_list_are_kept(page, studies, key, button):
    from perfmodel.spec.scenario import load_scenario, scenario_to_dict
    sc = json.loads(json.dumps(scenario_to_dict(load_scenario(ROOT / "perfmodel" / "data" / "example_scenario.yaml"))))
    sc["studies"] = studies
    sys.path.insert(0, str(ROOT / "app"))
    from appkit import state
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT_S)
    at.query_params["s"] = state.encode_query(sc)
    at.run()
    at.switch_page(page).run()
    assert at.multiselect(key=key).value == [24, 96]
    _press(at, button)
    assert not at.exception and not _errors(at), _errors(at)
    _plan_still_works(at)
