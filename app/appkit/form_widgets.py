"""Draw generated options (``appkit.schema_form``) as Streamlit widgets, a group at a time."""

from __future__ import annotations

import streamlit as st


def draw(opts, group: str, ncols: int, disabled: frozenset = frozenset()) -> None:
    """The group's options: the short widgets ``ncols`` to a row (or as many as a ``Look.row``
    says), a wide one (a list, a text, a long choice) across the sidebar; the keys in
    ``disabled`` greyed out."""
    cols, i = None, 0
    for o in opts:
        if o.group != group:
            continue
        common = dict(key=o.key, help=o.help or None)
        if o.key in disabled:
            common["disabled"] = True
        if o.wide:
            where, i = st, len(cols or ())   # the next short one starts a row
        else:
            if o.row or cols is None or i == len(cols):
                cols, i = st.columns(o.row or ncols), 0
            where, i = cols[i], i + 1
        if o.kind == "multiselect":
            where.multiselect(o.label, o.choices, **common)
        elif o.kind == "text":
            where.text_input(o.label, max_chars=o.max_chars, **common)
        elif o.kind == "checkbox":
            where.checkbox(o.label, **common)
        elif o.kind == "select":
            where.selectbox(o.label, o.choices, **common)
        else:
            where.number_input(o.label, min_value=o.min_value, max_value=o.max_value, step=o.step, format=o.fmt,
                               **common)
