"""Small helpers every page uses: the current job, errors as one line, chart drawing."""

from __future__ import annotations

import json
import re

import streamlit as st

from perfmodel.spec.errors import InputError

from . import charts
from .specs import to_spec
from .state import JobInputs

JOB_KEY = "_job"
_MARKDOWN_CHARACTERS = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~:$&])")


def plain(text) -> str:
    """``text`` with every Markdown character escaped and on one line, for Streamlit's Markdown
    elements (title, caption, error, ...). Names and messages can come from a link or an upload:
    unescaped, ``![](https://...)`` there would make the viewer's browser fetch that address."""
    return _MARKDOWN_CHARACTERS.sub(r"\\\1", " ".join(str(text).splitlines()))


def job() -> JobInputs:
    """The job the sidebar describes; stops the page with the one-line error if it is invalid."""
    j: JobInputs = st.session_state[JOB_KEY]
    if j.scenario is None:
        st.error(plain(j.error))
        st.stop()
    return j


def call(fn, *args, **kwargs):
    """``fn(*args)``, or None after showing an InputError's one line with ``st.error``."""
    try:
        return fn(*args, **kwargs)
    except InputError as exc:
        st.error(plain(exc))
        return None


def progress(text: str):
    """A progress bar and the ``progress(done, total)`` callback a study feeds it."""
    bar = st.progress(0.0, text=text)

    def update(done: int, total: int) -> None:
        bar.progress(min(1.0, done / total) if total else 1.0, text=f"{text} ({100 * done / total:.0f}%)"
                     if total else text)
    return bar, update


def run_study(name: str, args: tuple, submitted: bool, fn, text: str, button: str):
    """A study that takes more than a second runs only when asked: ``fn(*args, _progress=...)``
    when the form was just submitted, or when these very inputs ran before (then it is cached);
    else a note to press ``button`` and None. Invalid input: its one line, and None."""
    done = st.session_state.setdefault("_studies_run", {})
    tag = json.dumps([name, list(args)], sort_keys=True, default=str)
    if submitted:
        done[tag] = True
    elif tag not in done:
        st.info(f"Press **{button}** to run it with these inputs (the job in the sidebar and the options above); "
                "results stay cached for this session, on every page.")
        return None
    bar, update = progress(text)
    try:
        return call(fn, *args, _progress=update)
    finally:
        bar.empty()


def job_caption(j: JobInputs) -> None:
    """The question asked: the sidebar's job in one line, on every study page."""
    sc = j.scenario
    p = sc.parallelism
    model = sc.model if isinstance(sc.model, str) else sc.model.name
    hw = sc.hardware if isinstance(sc.hardware, str) else sc.hardware.id
    st.caption(plain(f"Job: {model} on {sc.num_gpus} x {hw}, tp{p.tp} pp{p.pp} cp{p.cp}, global batch "
                     f"{sc.global_batch_size} x {sc.seq_length} tokens, {sc.precision}"))


def chart(c) -> None:
    """Draw an Altair chart across the column."""
    draw(to_spec(c))


def bar_row(bars, columns: int | None = None, **common) -> None:
    """``charts.hardware_bars`` side by side, one per column: ``bars`` holds ``(rows, field,
    title, options)``, ``common`` the options they share; ``columns`` (default one per bar) keeps
    a row's widths when it has fewer bars than its neighbours. In a window narrower than
    ``WIDE_PX`` the columns stack (``LAYOUT_CSS``), so that every bar keeps a readable width."""
    for column, (rows, field, title, options) in zip(stacking_columns(columns or len(bars)), bars):
        with column:
            chart(charts.hardware_bars(rows, field, title, **{**common, **options}))


def stacking_columns(spec) -> list:
    """``st.columns(spec)`` for charts: side by side in a wide window, stacked (each full width)
    in one narrower than ``WIDE_PX`` (``LAYOUT_CSS``)."""
    n = st.session_state.get("_chart_rows", (None, 0))
    k = n[1] + 1 if n[0] == st.session_state.get("_run") else 0     # container keys must differ in a run
    st.session_state["_chart_rows"] = (st.session_state.get("_run"), k)
    return st.container(key=f"chart_row_{k}").columns(spec)


WIDE_PX = 1280
"""Below this window width, a row of bar charts stacks: beside a 300 px sidebar, three charts in
1024 px get under 200 px each, too little for the hardware names and the bars."""
LAYOUT_CSS = f"""<style>
/* a figure wraps or shrinks rather than end in "..." (st.metric cuts a long value at its column) */
[data-testid="stMetricValue"] {{ font-size: clamp(1.35rem, 2.3vw, 2.25rem); }}
[data-testid="stMetricValue"] > div {{ white-space: normal; overflow: visible; text-overflow: clip; }}
@media (max-width: {WIDE_PX - 1}px) {{
  [class*="st-key-chart_row_"] [data-testid="stHorizontalBlock"] {{ flex-wrap: wrap; }}
  [class*="st-key-chart_row_"] [data-testid="stColumn"] {{ flex: 1 1 100% !important; min-width: 100% !important; }}
}}
</style>"""


def layout_css() -> None:
    """The app's few layout rules (``LAYOUT_CSS``), once per page run."""
    st.html(LAYOUT_CSS)


def draw(spec: dict) -> None:
    """Draw a spec from ``specs.to_spec`` across the column, at its own height."""
    st.vega_lite_chart(spec=spec["spec"], width="stretch", height=spec["height"])
