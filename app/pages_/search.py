"""Search: every layout of the job at the sidebar's GPU count, ranked; the time-cost Pareto front; why
layouts fail. Other GPU counts only when asked; loading a layout says what it changes."""

import json
from typing import get_args

import pandas as pd
import streamlit as st

from appkit import cached, charts, page, run_inputs, sidebar
from appkit.state import OVERLAP_KINDS
from perfmodel.present import fmt
from perfmodel.spec.scenario import Precision, hardware_of
from perfmodel.spec.schedules import schedule_names

WIDEN = {
    "precision": "every precision the GPU has a tensor-core peak for (changes the numerics)",
    "overlap": "each communication overlap switched off and on (tp, cp, ep, pp, dp, fsdp)",
    "pipeline schedule": "every pipeline schedule on layouts with pp > 1 (1f1b, interleaved, zero-bubble, DualPipe)",
    "sequence parallelism off": "tp > 1 layouts with and without sequence parallelism",
}  # dimensions the search leaves at the scenario's settings unless asked (``SearchOptions``)

MAX_EXTRA_COUNTS = 16   # GPU counts typed beside the job's own: each is a whole search
MAX_GPU_COUNT = 2**31 - 1
HELD = "_search_held"   # {"args": the search shown when a layout was loaded, "rank": its rank, "for": the job after}

j = page.job()
n_job = j.scenario.num_gpus
st.title("Search")
page.job_caption(j)
if st.session_state.get("_loaded_note"):
    st.success(page.plain(st.session_state.pop("_loaded_note")))
st.caption(f"Every parallel layout, micro-batch size and recompute policy of the job at the sidebar's "
           f"{n_job:,} GPUs, evaluated at once and ranked. The sidebar's layout is ignored here; its model, hardware, "
           f"GPU count and batch are kept. Other GPU counts are searched only when you add them.")
with st.form("search_form", border=False):
    c1, c2, c3, c4 = st.columns(4)
    objective = run_inputs.seeded(c1.selectbox, "Rank by", "search_objective", "study_objective", "time",
                                  options=("time", "cost", "tokens_per_usd"))
    top_k = c2.number_input("Show the top", min_value=1, max_value=50, value=10, key="search_top_k")
    max_mbs = c3.number_input("Largest micro-batch", min_value=1, max_value=32, value=8, key="search_mbs")
    stored = st.session_state.get("study_search_counts")       # the scenario's list, shown as text
    want = ", ".join(str(x) for x in stored or () if x != n_job)
    run = st.session_state.get("_run", 0)
    if st.session_state.get("_seeded_search_counts") != want or st.session_state.get("_drawn_search_counts") != run - 1:
        st.session_state["search_counts"] = want
        st.session_state["_seeded_search_counts"] = want
    st.session_state["_drawn_search_counts"] = run
    counts_text = c4.text_input("Also try GPU counts (optional, comma-separated)", key="search_counts",
                                max_chars=200, help=f"other cluster sizes, which make the time-cost front non-trivial "
                                                    f"(up to {MAX_EXTRA_COUNTS}); empty: only the sidebar's {n_job:,}")

    def _sync() -> None:
        run_inputs.submit_sync({"search_objective": ("study_objective", 1.0, "time")})()
        text = st.session_state.get("search_counts", "")
        words = [x for x in text.replace(" ", "").split(",") if x]
        if all(x.isascii() and x.isdigit() and 1 <= int(x) <= MAX_GPU_COUNT for x in words) and \
                len(words) <= MAX_EXTRA_COUNTS:
            st.session_state["study_search_counts"] = [int(x) for x in words] or None
            st.session_state["_seeded_search_counts"] = ", ".join(words)

    widen = st.multiselect("Also search", list(WIDEN), key="search_widen",
                           help="; ".join(f"{k}: {v}" for k, v in WIDEN.items()) + ". Each multiplies the layouts "
                                "tried; unchecked, the sidebar's setting is kept.")
    submitted = st.form_submit_button("Search", type="primary", on_click=_sync)
words = [x for x in counts_text.replace(" ", "").split(",") if x]
if not all(x.isascii() and x.isdigit() and 1 <= int(x) <= MAX_GPU_COUNT for x in words):
    st.error(page.plain(f"GPU counts: {counts_text!r} is not a comma-separated list of whole numbers from 1 to "
                        f"{MAX_GPU_COUNT:,}"))
    st.stop()
if len(words) > MAX_EXTRA_COUNTS:
    st.error(f"GPU counts: {len(words)} counts; the limit is {MAX_EXTRA_COUNTS} (each is a whole search)")
    st.stop()
extra = tuple(int(x) for x in words)
options = {"objective": objective, "top_k": int(top_k), "max_micro_batch_size": int(max_mbs)}
if extra:
    options["gpu_counts"] = sorted({n_job, *extra})
if "precision" in widen:
    gpu = hardware_of(j.scenario).gpu
    options["precisions"] = [p for p in get_args(Precision) if gpu.supports(p)]
if "overlap" in widen:
    options["overlap"] = list(OVERLAP_KINDS)
if "pipeline schedule" in widen:
    options["schedules"] = list(schedule_names())
if "sequence parallelism off" in widen:
    options["sequence_parallel"] = [True, False]
args = (j.key(), json.dumps(options, sort_keys=True))
held = st.session_state.get(HELD)     # the search shown when a layout was loaded: kept until the job changes again
if held is not None and "for" not in held:
    held["for"] = list(args)            # the first run after the load: the job it made
if held is not None and not submitted and held["for"] == list(args):
    res = page.call(cached.search_view, *held["args"])
    st.info(page.plain(f"These are the results of the search you ran before loading layout {held['rank']}, which the "
                       "sidebar now holds (the search ignores the sidebar's layout, so they still stand). Press "
                       "Search to search again."))
else:
    st.session_state.pop(HELD, None)
    res = page.run_study("search", args, submitted, cached.search_view,
                         f"Searching the layouts at {', '.join(str(n) for n in options.get('gpu_counts', [n_job]))} "
                         "GPUs", "Search")
if res is None:
    st.stop()

st.caption(f"{res['num_enumerated']:,} combinations enumerated, {res['num_valid']:,} pass the layout rules, "
           f"{res['num_fitting']:,} fit in memory; {fmt.seconds(res['elapsed_s'])}.")
if not res["top"]:
    first = next(iter(res["rejected"]), "no layout enumerated")
    st.warning(page.plain(f"No layout runs and fits at {n_job:,} GPUs; the most common reason: {first}. "
                          "Add larger GPU counts above, or see Size for the counts that do."))
    if res["rejected"]:
        st.subheader("Why layouts were rejected")
        page.chart(charts.rejected(res["rejected"]))
    st.stop()

cost_label = "cost of training" if res["cost_basis"] == "training_tokens" else "cost of one step"
top = pd.DataFrame([{        # the decision's columns first (no scrolling sideways for them at 1024 px)
    "rank": i + 1, "GPUs": c["num_gpus"],
    "layout": " ".join(f"{k}{c[k]}" for k in ("tp", "pp", "vpp", "cp", "ep", "dp")),
    "step time": fmt.seconds(c["step_time_s"]), cost_label: fmt.usd(c["cost_usd"]), "bottleneck": c["bottleneck"],
    # then what 'Also search' can vary, so a widened search shows its choices in view at 1440 px
    "schedule": c["pipeline_schedule"] if c["pp"] > 1 else "-", "SP": "on" if c["sequence_parallel"] else "off",
    "precision": c["precision"], "overlapped": ", ".join(c["overlapped"]) or "none",
    "memory (fits)": fmt.bytes_binary(c["memory_per_gpu_bytes"]), "MFU": fmt.percent(c["mfu"]),
    "tokens/s per GPU": fmt.si(c["tokens_per_s_per_gpu"], "tok/s"),
    "ZeRO": c["zero_stage"], "mbs": c["micro_batch_size"], "recompute": c["recompute"],
} for i, c in enumerate(res["top"])])
st.subheader(f"Top {len(res['top'])} by {objective}")
others = sorted({c["num_gpus"] for c in res["top"]} - {n_job})
if others:
    st.info(f"The list holds layouts at {', '.join(f'{n:,}' for n in others)} GPUs besides the sidebar's {n_job:,}: "
            "loading one changes the sidebar's GPU count, and the button says so.")
st.dataframe(top, hide_index=True, width="stretch")


def _use(i: int) -> None:
    data = res["top_scenarios"][i]
    st.session_state[HELD] = {"args": held["args"] if held and held.get("for") == list(args) else args, "rank": i + 1}
    sidebar.load_scenario_data(data)
    if data.get("num_gpus") != n_job and "_notice" not in st.session_state:
        st.session_state["_loaded_note"] = (f"Loaded layout {i + 1}: the GPU count changed from {n_job:,} to "
                                            f"{data['num_gpus']:,}.")


def _label(i: int) -> str:
    c = res["top"][i]
    return f"{i + 1}: tp{c['tp']} pp{c['pp']} cp{c['cp']} dp{c['dp']} at {c['num_gpus']:,} GPUs"


c1, c2 = st.columns([2, 3])
pick = c1.selectbox("Layout to load", range(len(res["top"])), format_func=_label, key="search_pick")
n_pick = res["top"][pick]["num_gpus"]
label = ("Load it into the sidebar (and the Plan page)" if n_pick == n_job else
         f"Load it into the sidebar: changes the GPU count from {n_job:,} to {n_pick:,}")
c2.button(label, on_click=_use, args=(pick,), key="search_load")

st.subheader("Time against cost: every fitting layout, the Pareto front in black")
page.chart(charts.pareto(res["cloud"], res["pareto"], res["time_basis"]))
if res["cloud_sampled"]:
    st.caption(f"The cloud is an even sample of {len(res['cloud']):,} of the {res['num_fitting']:,} fitting layouts, "
               "for drawing speed; the front uses all of them.")
if res["rejected"]:
    st.subheader("Why layouts were rejected")
    page.chart(charts.rejected(res["rejected"]))
