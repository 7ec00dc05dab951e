"""The Size page's tokens, deadline and budget: the page's own, started from the job's. They become
the job's (the sidebar, every page, the link) only through a visible button, and that can be undone."""

from __future__ import annotations

import math

import streamlit as st

from perfmodel.present import fmt
from perfmodel.spec.units import GIGA, SECONDS_PER_DAY

from . import sidebar

UNDO = "_size_targets_undo"
"""{"old": the job's targets before the button, "new": what it set}."""
KEYS = ("tokens_b", "deadline_days", "budget_usd")


def of_job(sc, session) -> dict:
    """The job's training tokens (billions), deadline (days) and budget (USD); 0 for none."""
    purpose = sc.purpose
    return {"tokens_b": float((sc.training_tokens or 0.0) / GIGA),
            "deadline_days": float(getattr(purpose, "deadline_days", None) or 0.0),
            "budget_usd": float(getattr(purpose, "budget_usd", None) or 0.0)}


def same(a: dict, b: dict) -> bool:
    return all(math.isclose(a[k], b[k], rel_tol=1e-9, abs_tol=1e-9) for k in KEYS)


def text(t: dict) -> str:
    """'15,000 B tokens, a 30-day deadline and a $10M budget' (with 'no ...' for zeros)."""
    tokens = f"{t['tokens_b']:,.0f} B tokens" if t["tokens_b"] else "no training tokens"
    deadline = f"a {fmt.seconds(t['deadline_days'] * SECONDS_PER_DAY)} deadline" if t["deadline_days"] else "no deadline"
    budget = f"a {fmt.usd(t['budget_usd'])} budget" if t["budget_usd"] else "no budget"
    return f"{tokens}, {deadline} and {budget}"


def _set(t: dict) -> None:
    sidebar.set_values({"training_tokens_b": t["tokens_b"]})
    st.session_state["purpose_deadline_days"] = t["deadline_days"]
    st.session_state["purpose_budget"] = t["budget_usd"]


def _apply(old: dict, new: dict) -> None:
    st.session_state[UNDO] = {"old": old, "new": new}
    _set(new)


def _undo() -> None:
    done = st.session_state.pop(UNDO, None)
    if done:
        _set(done["old"])


def offer_to_job(job: dict, page_values: dict) -> None:
    """Where the page's targets differ from the job's: say so, with a button that makes them the
    job's; just after that button: what changed, with a button that undoes it."""
    done = st.session_state.get(UNDO)
    if done and same(done["new"], job):
        st.success(f"The job in the sidebar now has {text(done['new'])} (it had {text(done['old'])}).")
        st.button("Undo", key="size_targets_undo", on_click=_undo)
        return
    st.session_state.pop(UNDO, None)
    if same(job, page_values):
        return
    st.info(f"This sizing uses {text(page_values)}; the job in the sidebar has {text(job)}, and Plan, Scale and "
            "the link keep the job's until you choose otherwise.")
    st.button("Make them the job's", key="size_targets_apply", on_click=_apply, args=(job, page_values))
