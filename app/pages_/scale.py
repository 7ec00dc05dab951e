"""Scale: the best layout at each GPU count; where adding GPUs stops paying."""

import pandas as pd
import streamlit as st

from appkit import cached, charts, page, run_inputs
from perfmodel.present import fmt
from perfmodel.spec.units import SECONDS_PER_DAY

COUNTS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
DEFAULT_COUNTS = [16, 32, 64, 128, 256, 512, 1024, 2048]
MODES = ("strong", "weak", "grow")

j = page.job()
st.title("Scale")
page.job_caption(j)
st.caption("The job at each GPU count, each with the best layout the search finds (lens: scale serves purpose: "
           "does each added GPU still buy throughput, and at what price per hour saved?).")
with st.form("scale_form", border=False):
    c1, c2, c3 = st.columns([3, 1, 1])
    counts = run_inputs.seeded(c1.multiselect, "GPU counts", "scale_counts", "study_scale_counts", DEFAULT_COUNTS,
                               options=COUNTS)
    mode = run_inputs.seeded(c2.radio, "Scaling", "scale_mode", "study_scale_mode", "strong", options=MODES,
                             horizontal=True,
                             help="strong: the sidebar's global batch at every count; weak: the batch grows in "
                                  "proportion to the GPUs; grow: it doubles as the GPUs double past the sidebar's "
                                  "count, up to the batch limit (Size page; default Llama 3's 16M tokens)")
    objective = run_inputs.seeded(c3.selectbox, "Best layout by", "scale_objective", "study_objective", "time",
                                  options=("time", "cost", "tokens_per_usd"))
    c1, c2, c3 = st.columns(3)
    threshold = c1.slider("Efficiency threshold", 0.5, 1.0, 0.8, 0.05, key="scale_threshold",
                          help="against the best goodput per GPU of the sweep: the knee is the first count past the "
                               "best below this, and without a value of time or deadline the verdict is the largest "
                               "count above")
    vot = run_inputs.seeded(c2.number_input, "Value of time (USD per day, 0 = none)", "scale_vot", "purpose_vot",
                            0.0, min_value=0.0, step=10000.0,
                            help="what finishing a day earlier is worth to you: the verdict never buys an hour for "
                                 "more (saved with the scenario, in its purpose section)")
    deadline_d = run_inputs.seeded(c3.number_input, "Deadline (days, 0 = none)", "scale_deadline",
                                   "purpose_deadline_days", 0.0, min_value=0.0, step=10.0)
    submitted = st.form_submit_button("Run the sweep", type="primary", on_click=run_inputs.submit_sync({
        "scale_counts": ("study_scale_counts", 1.0, DEFAULT_COUNTS), "scale_mode": ("study_scale_mode", 1.0, "strong"),
        "scale_objective": ("study_objective", 1.0, "time"), "scale_vot": ("purpose_vot", 1.0, 0.0),
        "scale_deadline": ("purpose_deadline_days", 1.0, 0.0)}))
if not counts:
    st.error("GPU counts: pick at least one")
    st.stop()
res = page.run_study("scale", (j.key(), tuple(sorted(counts)), mode, objective, threshold, vot or None,
                               deadline_d * SECONDS_PER_DAY or None, j.scenario.studies.max_batch_tokens), submitted,
                     cached.scale_view,
                     f"Searching the best layout at {len(counts)} GPU counts", "Run the sweep")
if res is None:
    st.stop()

v = res["verdict"]
reason = page.plain(v["reason"])
if v["num_gpus"]:
    st.success(f"**Verdict: {v['num_gpus']} GPUs.** {reason}")
else:
    st.warning(f"**Verdict: no count serves.** {reason}" if v["rule"] != "none_runs" else f"**Verdict:** {reason}")
if res["knee_num_gpus"]:
    st.info(f"Knee at {res['knee_num_gpus']} GPUs: {page.plain(res['knee_reason'])}")
st.caption("Parallel efficiency is each count's goodput-adjusted tokens/s per GPU (throughput x the share of wall time "
           "that trains) against the best any count in the sweep reaches, so it also reads as useful tokens per dollar "
           "against the cheapest count. Error bars are the 80% band of the prediction; counts of one sweep share it, "
           "so the ratios between them are surer than the levels.")
pts = [p for p in res["points"] if not p["skipped_reason"]]
axes = st.radio("Time and cost axes", ("log", "linear"), key="scale_axes", horizontal=True,
                help="log: counts that differ by orders of magnitude in time and cost stay readable; linear: "
                     "differences in absolute days and dollars")
log = axes == "log"
per_day = (vot or 0.0) / 24.0
c = page.stacking_columns(2)
with c[0]:
    page.chart(charts.scaling(pts, "tokens_per_s_per_gpu", "throughput (tokens/s per GPU)",
                              band_key="tokens_per_s_per_gpu"))
with c[1]:
    page.chart(charts.scaling(pts, "parallel_efficiency", "parallel efficiency against the best (fraction)",
                              y_format="%", rule=threshold, rule_label="efficiency threshold"))
c = page.stacking_columns(2)
with c[0]:
    page.chart(charts.scaling(pts, "time_to_solution_s", "time to solution (days)", SECONDS_PER_DAY,
                              band_key="time_to_train_s",
                              rule=deadline_d * SECONDS_PER_DAY or None, rule_label="deadline", y_scale=axes))
with c[1]:
    page.chart(charts.scaling(pts, "cost_usd", "cost (USD)", band_key="cost_usd", y_format=charts.USD_FORMAT,
                              y_scale=axes))
marginal = [p for p in pts if p["marginal_usd_per_hour_saved"] is not None]
if marginal:
    st.subheader("What each hour saved costs (lens: scale serves purpose)")
    page.chart(charts.scaling(marginal, "marginal_usd_per_hour_saved", "marginal cost per hour saved (USD/h)",
                              rule=per_day or None, rule_label="value of time", y_format=charts.USD_FORMAT,
                              y_scale="symlog" if log else "linear"))
    st.caption("From the count before to this one: extra dollars over hours of wall time saved. Above the dashed value "
               "of time, the hours are not worth their price. Negative: the larger count is also cheaper.")
bd = [{"num_gpus": p["num_gpus"], "component": k, "seconds": s}
      for p in pts if p["breakdown_s"] for k, s in p["breakdown_s"].items() if s > 0]
if bd:
    st.subheader("Where the step time goes at each count")
    page.chart(charts.breakdown_lines(bd, "num_gpus", "GPUs (count)") if log else
               charts.breakdown_by(bd, "num_gpus", "GPUs (count)"))


def band_text(p, key, formatter):
    b = (p.get("band") or {}).get(key)
    return fmt.band(b, formatter) if b else ""


st.dataframe(pd.DataFrame([{
    "GPUs": p["num_gpus"], "runs": "no" if p["skipped_reason"] else "yes", "skipped because": p["skipped_reason"],
    "global batch": f"{p['global_batch_size']:,} ({fmt.compact(p['global_batch_size'] * j.scenario.seq_length)} tokens)",
    "layout": (" ".join(f"{k}{p['layout'][k]}" for k in ("tp", "pp", "vpp", "cp", "dp")) if p["layout"] else ""),
    "tokens/s per GPU": fmt.si(p["tokens_per_s_per_gpu"], "tok/s") if not p["skipped_reason"] else "-",
    "goodput": fmt.percent(p["goodput_frac"]) if not p["skipped_reason"] else "-",
    "wall time training": fmt.percent(p["training_time_frac"]) if not p["skipped_reason"] else "-",
    "efficiency": fmt.percent(p["parallel_efficiency"]) if not p["skipped_reason"] else "-",
    "time to solution": fmt.seconds(p["time_to_solution_s"]),
    "time 80% band": band_text(p, "time_to_train_s", fmt.seconds),
    "cost": fmt.usd(p["cost_usd"]) if not p["skipped_reason"] else "-",
    "per M tokens": fmt.usd_per_million_tokens(p["cost_usd"], j.scenario.training_tokens)
    if not p["skipped_reason"] else "-",
    "cost 80% band": band_text(p, "cost_usd", fmt.usd),
    "useful tokens per $": fmt.si(p["useful_tokens_per_usd"]) if not p["skipped_reason"] else "-",
    "$ per hour saved": fmt.usd(p["marginal_usd_per_hour_saved"]), "bottleneck": p["bottleneck"] or "",
} for p in res["points"]]), hide_index=True, width="stretch")
st.caption(page.plain(f"Price: {res['price']['text']}"))
