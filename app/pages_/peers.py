"""Peers: several saved scenarios side by side: their figures and step-time breakdowns on one chart each
(lens: all four; what a peer team's choices buy)."""

import pandas as pd
import streamlit as st

from appkit import cached, charts, page, state
from perfmodel.present import fmt
from perfmodel.spec.errors import InputError
from perfmodel.spec.scenario import parse_scenario, scenario_to_dict
from perfmodel.spec.units import SECONDS_PER_DAY

MAX_PEERS = 8   # scenarios side by side, at most (each is one prediction; the charts stay readable)
PEERS = "_peers"

j = page.job()
st.title("Peers: scenarios side by side")
page.job_caption(j)
st.caption("Save the sidebar's job under its name (Scenario file and link), change it, save again, or load the "
           "scenario files of peers; each is predicted as it stands, its own prices included.")
peers: dict = st.session_state.setdefault(PEERS, {})


def _add_current() -> None:
    if len(peers) >= MAX_PEERS and j.scenario.name not in peers:
        st.session_state["_peer_error"] = f"peers: at most {MAX_PEERS} scenarios; remove one first"
        return
    peers[j.scenario.name] = scenario_to_dict(j.scenario)
    _show(j.scenario.name)


def _show(name: str) -> None:
    shown = st.session_state.get("peer_shown") or []
    if name not in shown:
        st.session_state["peer_shown"] = [*shown, name]


def _add_uploads() -> None:
    st.session_state.pop("_peer_error", None)
    for f in st.session_state.get("peer_upload") or []:
        try:
            sc = parse_scenario(state.parse_text(state.upload_text(f.getvalue(), f.name[:64]), "scenario YAML"))
        except InputError as exc:
            st.session_state["_peer_error"] = str(exc)
            return
        if len(peers) >= MAX_PEERS and sc.name not in peers:
            st.session_state["_peer_error"] = f"peers: at most {MAX_PEERS} scenarios; remove one first"
            return
        peers[sc.name] = scenario_to_dict(sc)
        _show(sc.name)


st.button(page.plain(f"Save the sidebar's job as '{j.scenario.name}'"), on_click=_add_current, key="peer_add")
st.file_uploader(f"Load scenario YAML files (up to {state.MAX_UPLOAD_MIB} MiB each, {MAX_PEERS} scenarios in all)",
                 type=["yaml", "yml"], accept_multiple_files=True, key="peer_upload", on_change=_add_uploads,
                 max_upload_size=state.MAX_UPLOAD_MIB)
if st.session_state.get("_peer_error"):
    st.error(page.plain(st.session_state["_peer_error"]))
st.session_state["peer_shown"] = [n for n in st.session_state.get("peer_shown", list(peers)) if n in peers]
shown = st.multiselect("Shown", list(peers), key="peer_shown")
if len(shown) < 1:
    st.info("Save the sidebar's job (and a variant of it), or load peers' scenario files, to compare them here.")
    st.stop()
keys = tuple(state.JobInputs(parse_scenario(peers[n]), None, parse_scenario(peers[n]).cost, j.use_profile).key()
             for n in shown)
rows = page.call(cached.peers_view, keys)
if rows is None:
    st.stop()
ok = [r for r in rows if not r["reason"]]
if ok:
    page.bar_row([(ok, "step_time_s", "step time (s)", {}),
                  (ok, "tokens_per_s_per_gpu", "throughput (tokens/s per GPU)", {}),
                  (ok, "mfu", "MFU (%)", {"percent": True})], category="scenario")
    timed = [r for r in ok if r.get("time_to_train_s")]
    if timed:
        page.bar_row([(timed, "time_to_train_s", "time to train (days)", {"scale": SECONDS_PER_DAY}),
                      (timed, "cost_usd", "cost (USD)", {"money": True})], category="scenario")
    st.subheader("Where the step time goes, scenario by scenario")
    page.chart(charts.breakdown_by([b for r in ok for b in r["breakdown"]], "scenario", "scenario (name)"))
st.dataframe(pd.DataFrame([{
    "scenario": r["scenario"], "fits": "no" if r["reason"] else "yes", "why not": r["reason"],
    "job": r["job"], "step time": fmt.seconds(r.get("step_time_s")),
    "tokens/s per GPU": fmt.si(r.get("tokens_per_s_per_gpu"), "tok/s"), "MFU": fmt.percent(r.get("mfu")),
    "goodput": fmt.percent(r.get("goodput_frac")), "memory per GPU": fmt.bytes_binary(r["memory_per_gpu_bytes"])
    if r.get("memory_per_gpu_bytes") else "-",
    "time to train": fmt.seconds(r.get("time_to_train_s")), "cost": fmt.usd(r.get("cost_usd")),
    "per M tokens": fmt.usd_per_million_tokens(r.get("cost_usd"), r.get("training_tokens")),
    "price": r["price"]["text"], "bottleneck": r.get("bottleneck") or "",
} for r in rows]), hide_index=True, width="stretch")
