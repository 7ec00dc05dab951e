"""Small helpers every page uses: the current job, errors as one line, chart drawing."""

from __future__ import annotations

import re

import streamlit as st

from perfmodel.spec.errors import InputError

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


def chart(c) -> None:
    """Draw an Altair chart across the column."""
    draw(to_spec(c))


def draw(spec: dict) -> None:
    """Draw a spec from ``specs.to_spec`` across the column, at its own height."""
    st.vega_lite_chart(spec=spec["spec"], width="stretch", height=spec["height"])
