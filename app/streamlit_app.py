"""perfmodel's Streamlit app: ``perfmodel app`` or ``streamlit run app/streamlit_app.py``.

The sidebar holds the job (shared by every page, and mirrored in the URL); each page under
``pages_/`` gathers its own options, calls one cached model function and draws its charts.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import streamlit as st  # noqa: E402

from appkit import page, sidebar  # noqa: E402
from appkit.offline import no_address_lookups  # noqa: E402

no_address_lookups()   # already done by app/serve.py (perfmodel app); here for `streamlit run`
st.set_page_config(page_title="perfmodel", layout="wide")

PAGES = [
    st.Page("pages_/plan.py", title="Plan", url_path="home", default=True),
    st.Page("pages_/compare.py", title="Compare hardware and software", url_path="compare"),
    st.Page("pages_/scale.py", title="Scale", url_path="scale"),
    st.Page("pages_/search.py", title="Search", url_path="search"),
    st.Page("pages_/size.py", title="Size a cluster", url_path="size"),
    st.Page("pages_/peers.py", title="Peers side by side", url_path="peers"),
    st.Page("pages_/serve.py", title="Serve", url_path="serve"),
    st.Page("pages_/diagnose.py", title="Diagnose a run", url_path="diagnose"),
    st.Page("pages_/calibration.py", title="Calibration and validation", url_path="calibration"),
    # the default page is served at the root; /plan opens it too (a shared link names its page)
    st.Page("pages_/plan.py", title="Plan", url_path="plan", visibility="hidden"),
]

nav = st.navigation(PAGES)
st.session_state["_run"] = st.session_state.get("_run", 0) + 1   # runs of this session (appkit.run_inputs.seeded)
try:
    page.layout_css()
    sidebar.init()
    st.session_state[page.JOB_KEY] = sidebar.job_editor()
    nav.run()
except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, no traceback
    traceback.print_exc()   # to the server log, not the page
    st.error(page.plain(f"internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"))
