"""Search: every layout of the job, ranked; the time-cost Pareto front; why layouts fail."""

import json

import pandas as pd
import streamlit as st

from appkit import cached, charts, page, sidebar
from perfmodel.present import fmt

MAX_EXTRA_COUNTS = 16
"""GPU counts typed beside the job's own: each is a whole search."""
MAX_GPU_COUNT = 2**31 - 1

j = page.job()
st.title("Search")
st.caption("Every parallel layout, micro-batch size and recompute policy of the job, evaluated at once and "
           "ranked. The sidebar's layout is ignored here; its model, hardware, GPUs and batch are kept.")
c1, c2, c3, c4 = st.columns(4)
objective = c1.selectbox("Rank by", ("time", "cost", "tokens_per_usd"), key="search_objective")
top_k = c2.number_input("Show the top", min_value=1, max_value=50, value=10, key="search_top_k")
max_mbs = c3.number_input("Largest micro-batch", min_value=1, max_value=32, value=8, key="search_mbs")
counts_text = c4.text_input("Also try GPU counts (comma-separated)", value="32, 128", key="search_counts",
                            max_chars=200, help="adds other cluster sizes, which makes the time-cost front "
                                                f"non-trivial (up to {MAX_EXTRA_COUNTS})")
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
    options["gpu_counts"] = sorted({j.scenario.num_gpus, *extra})
res = page.call(cached.search_view, j.key(), json.dumps(options, sort_keys=True))
if res is None:
    st.stop()

st.caption(f"{res['num_enumerated']:,} combinations enumerated, {res['num_valid']:,} pass the layout rules, "
           f"{res['num_fitting']:,} fit in memory; {fmt.seconds(res['elapsed_s'])}.")
if not res["top"]:
    first = next(iter(res["rejected"]), "no layout enumerated")
    st.error(page.plain(f"No layout runs and fits: {first}"))
    st.stop()

cost_label = "cost of training" if res["cost_basis"] == "training_tokens" else "cost of one step"
top = pd.DataFrame([{
    "rank": i + 1, "GPUs": c["num_gpus"], "tp": c["tp"], "pp": c["pp"], "vpp": c["vpp"], "cp": c["cp"],
    "ep": c["ep"], "dp": c["dp"], "ZeRO": c["zero_stage"], "mbs": c["micro_batch_size"], "recompute": c["recompute"],
    "step time": fmt.seconds(c["step_time_s"]), "tokens/s per GPU": fmt.si(c["tokens_per_s_per_gpu"], "tok/s"),
    "MFU": fmt.percent(c["mfu"]), "memory": fmt.bytes_binary(c["memory_per_gpu_bytes"]),
    cost_label: fmt.usd(c["cost_usd"]), "bottleneck": c["bottleneck"],
} for i, c in enumerate(res["top"])])
st.subheader(f"Top {len(res['top'])} by {objective}")
st.dataframe(top, hide_index=True)


def _use(i: int) -> None:
    sidebar.load_scenario_data(res["top_scenarios"][i])


c1, c2 = st.columns([1, 3])
pick = c1.selectbox("Layout to load", range(1, len(res["top"]) + 1), key="search_pick")
c2.button("Load it into the sidebar (and the Plan page)", on_click=_use, args=(pick - 1,), key="search_load")

st.subheader("Time against cost: every fitting layout, the Pareto front in black")
page.chart(charts.pareto(res["cloud"], res["pareto"], res["time_basis"]))
if res["cloud_sampled"]:
    st.caption("The cloud is a uniform sample of the fitting layouts, for drawing speed; the front uses all of them.")
if res["rejected"]:
    st.subheader("Why layouts were rejected")
    page.chart(charts.rejected(res["rejected"]))
