"""The sidebar's widget values, kept while their group is not drawn.

Streamlit forgets the value of a widget that a run does not draw. The sidebar draws the cluster
and layout always and one other group at a time (``GROUPS``), so the values of the rest live in
a store in Session State and go back before their widgets are drawn again
(``perfmodel``'s app, ``appkit.sidebar``).
"""

from __future__ import annotations

import streamlit as st

from . import job_form, run_inputs, software_form, state
from .job_labels import BATCH, CLUSTER, FILE

STORE = "_job_values"
"""The sidebar's values, kept while their group is not drawn. Streamlit forgets the value of a
widget that a run does not draw; only the chosen group's widgets are drawn (drawing all ~150 on
every run cost ~200 ms in the browser), so the rest live here and go back into Session State
before their widgets are drawn again."""
GROUPS = ("Model", "Hardware", "Software stack", "Batch and precision", "Overlap and ZeRO-3",
          "Failures, start-up, input and cost", "Scenario file and link")
GROUP_KEY = "_sidebar_group"


def job_keys() -> frozenset:
    """The Session State keys of the job's widgets (what the store keeps)."""
    if "_job_keys" not in st.session_state:
        plain = set(run_inputs.PURPOSE) | set(run_inputs.STUDY) | set(run_inputs.SITE)   # not widgets: kept by Streamlit
        st.session_state["_job_keys"] = frozenset(k for k in state.widget_values(state.default_scenario())
                                                  if k not in plain) | {"use_profile"}
    return st.session_state["_job_keys"]


def apply(values: dict) -> None:
    store = st.session_state.setdefault(STORE, {})
    for k, v in values.items():
        st.session_state[k] = v
        if k in job_keys():
            store[k] = v


CLUSTER_KEYS = job_form.group_keys(CLUSTER)
"""The scenario's and its parallelism's fields drawn with the cluster (generated from the schema)."""


def _software_keys(group: str) -> frozenset:
    """The software options the sidebar draws in ``group`` (generated from the schema)."""
    return frozenset(o.key for o in software_form.group_options(group))


STACK_KEYS = frozenset(("stack",)) | _software_keys("Software stack")
BATCH_KEYS = job_form.group_keys(BATCH) | _software_keys(BATCH)


def group_keys(group: str | None) -> frozenset:
    """The widget keys a group draws (besides the cluster's, always drawn)."""
    keys = job_keys()
    if group == "Model":
        return frozenset(k for k in keys if k.startswith("m_") or k in ("model_source", "model_preset"))
    if group == "Hardware":
        return frozenset(k for k in keys if k.startswith(("hw_", "hl_")) or k == "hardware_id")
    if group == "Software stack":
        return STACK_KEYS
    if group == "Batch and precision":
        return BATCH_KEYS
    if group == "Overlap and ZeRO-3":
        return frozenset(k for k in keys if k.startswith("ov_")) | _software_keys("Overlap and ZeRO-3")
    if group == "Failures, start-up, input and cost":
        return frozenset(k for k in keys if k not in CLUSTER_KEYS and k.startswith(
            ("rel_", "su_", "in_", "cost_", "usd_", "use_")))
    if group == "Scenario file and link":
        return job_form.group_keys(FILE)
    return frozenset()


def restore() -> None:
    """Put the stored values of the widgets the last run did not draw back into Session State
    (Streamlit has forgotten them, or holds a stale value); those it drew are as the user left them."""
    store = st.session_state.setdefault(STORE, {})
    fresh = CLUSTER_KEYS | group_keys(st.session_state.get("_drawn_group"))
    for k, v in store.items():
        if k not in fresh or k not in st.session_state:
            st.session_state[k] = v


def keep(values: dict) -> None:
    st.session_state.setdefault(STORE, {}).update({k: v for k, v in values.items() if k in job_keys()})
