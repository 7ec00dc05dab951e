"""Plan: one job in detail: goodput and its waterfall, the figures with their error band, the price with
its source, step-time breakdown, memory (per stage too), roofline and pipeline timeline; when the layout
does not fit, the smallest changes that make it fit; a downloadable report."""

import pandas as pd
import streamlit as st

from appkit import cached, page, report, sidebar, specs
from appkit.lenses import LENS_TEXT
from perfmodel.present import fmt
from perfmodel.present.goodput import waterfall_rows
from perfmodel.spec.units import KILO

j = page.job()
key = j.key()


def show_fixes(fx: dict) -> None:
    """The smallest changes that make the job run and fit, each with its step time."""
    if not fx["fixes"]:
        st.caption("No change of one, two or three levers (recompute, ZeRO, tp, pp, cp, micro-batch, up to 8x the "
                   "GPUs) makes it fit: try a larger model-parallel layout on the Search page.")
        return
    st.markdown("**The smallest changes that make it fit**, fastest first:")
    words = ["; ".join(f"{c['field'].replace('parallelism.', '')} {c['from']} -> {c['to']}" for c in f["changes"])
             for f in fx["fixes"]]
    st.dataframe(pd.DataFrame([{
        "change": w, "step time": fmt.seconds(f["step_time_s"]),
        "memory per GPU": fmt.bytes_binary(f["memory_per_gpu_bytes"]),
        "tokens/s per GPU": fmt.si(f["tokens_per_s_per_gpu"], "tok/s"), "MFU": fmt.percent(f["mfu"]),
        "GPUs": f["num_gpus"]} for w, f in zip(words, fx["fixes"])]), hide_index=True, width="stretch")
    c1, c2 = st.columns([3, 1])
    pick = c1.selectbox("Apply a change", range(len(words)), format_func=lambda i: words[i], key="plan_fix")
    c2.button("Apply it to the sidebar", key="plan_fix_apply", on_click=sidebar.load_scenario_data,
              args=(fx["scenarios"][pick],))


v = page.call(cached.plan_view, key)
if v is None:
    fx = cached.fixes_view(key)
    show_fixes(fx)
    st.caption("The Search page lists the layouts that run for this model, hardware and GPU count.")
    st.stop()
p = v["prediction"]
sc = j.scenario
st.title(f"Plan: {page.plain(v['model_name'])} on {sc.num_gpus} x {page.plain(v['hardware_id'])}")
st.caption(page.plain(v["hardware_name"]))
st.caption(f"dp {p['dp']}, {p['num_microbatches']} micro-batches per step. Efficiencies: "
           f"{page.plain(v['efficiency_note'])}.")

band = p.get("band") or {}


def metric(col, label: str, value: str, band_key: str | None = None, formatter=None, help_text: str | None = None,
           note: str = "") -> None:
    """A metric with, beneath it, its 80% band (p10 - p90) or a note."""
    col.metric(label, value, help=help_text)
    b = band.get(band_key) if band_key else None
    if b:
        col.caption(f"80%: {formatter(b['p10'])} - {formatter(b['p90'])}")
    elif note:
        col.caption(note)


def tok_s(x):
    return fmt.si(x, "tok/s")


st.caption(f"Ranges are the 80% error band: where the measured figure fell for 80% of published runs like this one "
           f"({page.plain(p.get('band_stratum', ''))}), fitted on other sources (docs/validation.md, 'Error band').")
if p.get("band_note"):
    st.caption(f"Band: {page.plain(p['band_note'])}")
c = st.columns(4)
metric(c[0], "Goodput", fmt.percent(p["goodput_frac"]),
       help_text="useful FLOP/s over the cluster's peak: MFU x the share of wall time that trains (failures, "
                 "restarts, checkpoints and start-up take the rest)",
       note=f"{fmt.percent(p['training_time_frac'])} of wall time trains")
metric(c[1], "Time to train", fmt.seconds(p.get("time_to_train_s")), "time_to_train_s", fmt.seconds,
       "needs training tokens (Batch and precision); ideal time / goodput + start-up")
price = v["price"]
metric(c[2], "Cost", fmt.usd(p.get("cost_usd")), "cost_usd", fmt.usd,
       page.plain(f"{fmt.usd_per_gpu_hour(price['usd_per_gpu_hour'])}, {price['basis']}: {price['source']}"))
if p.get("cost_usd") is not None:
    c[2].caption(f"{fmt.usd_per_million_tokens(p['cost_usd'], sc.training_tokens)} at "
                 f"{fmt.usd_per_gpu_hour(price['usd_per_gpu_hour'])} ({page.plain(price['basis'])})")
metric(c[3], "Tokens/s per GPU", fmt.si(p["tokens_per_s_per_gpu"], "tok/s"), "tokens_per_s_per_gpu", tok_s)
c = st.columns(5)
metric(c[0], "Step time", fmt.seconds(p["step_time_s"]), "step_time_s", fmt.seconds)
metric(c[1], "MFU", fmt.percent(p["mfu"]), help_text="model FLOPs (no recompute) / (step time x GPUs x dense peak)")
c[2].metric("Memory per GPU", fmt.bytes_binary(p["memory_per_gpu_bytes"]),
            delta="fits" if p["fits_in_memory"] else "does not fit", delta_color="normal" if p["fits_in_memory"] else "inverse")
metric(c[3], "Energy", fmt.si(p["energy_kwh"] * KILO, "Wh") if p.get("energy_kwh") else "-",
       help_text="facility energy, PUE included")
metric(c[4], "GPU-hours", fmt.si(p["gpu_hours"]) if p.get("gpu_hours") else "-")

lens = p["bottleneck_lens"]
st.info(f"**Bottleneck: {p['bottleneck']}** ({fmt.percent(p['breakdown_s'].get(p['bottleneck'], p['breakdown_s']['compute']) / p['step_time_s'])} "
        f"of the step). Lens: **{lens}**: {LENS_TEXT.get(lens, '')}")
if not p["fits_in_memory"]:
    st.warning(f"Does not fit: {fmt.bytes_binary(p['memory_per_gpu_bytes'])} per GPU against "
               f"{fmt.bytes_binary(v['usable_hbm_bytes'])} usable HBM.")
    show_fixes(cached.fixes_view(key))

left, right = page.stacking_columns(2)
with left:
    st.subheader("Where the step time goes")
    page.draw(specs.plan_spec(key, "breakdown"))
with right:
    st.subheader("Memory per GPU against usable HBM")
    page.draw(specs.plan_spec(key, "memory"))

DETAILS = {"Goodput waterfall": "waterfall", "Memory per pipeline stage": "stages", "Roofline": "roofline",
           "Pipeline schedule": "timeline"}
detail = st.radio("Detail", tuple(DETAILS), key="plan_detail", horizontal=True,
                  help="One detail chart at a time keeps the page quick to redraw; the report has them all")
if detail == "Goodput waterfall":
    st.subheader("Goodput: from the cluster's peak to useful work")
    page.draw(specs.plan_spec(key, "waterfall"))
    lost = max(waterfall_rows(p["goodput_waterfall"])[1:], key=lambda r: r["lost_flop_per_s"])
    st.caption(f"Each bar is the cluster's model FLOP/s after one more loss; red is what that step lost. The largest "
               f"loss: {lost['lost_to']} ({fmt.percent(lost['lost_flop_per_s'] / p['goodput_waterfall'][0]['flop_per_s'])}"
               f" of peak). Failures, restarts, checkpoints, start-up and the input pipeline are set under 'Failures, "
               f"start-up, input and cost' in the sidebar.")
elif detail == "Memory per pipeline stage":
    st.subheader("Memory per GPU of each pipeline stage")
    page.draw(specs.plan_spec(key, "stages"))
    totals = v["stage_memory"]["totals"]
    worst = max(range(len(totals)), key=lambda i: totals[i])
    st.caption(f"Stage {worst} is the fullest ({fmt.bytes_binary(totals[worst])}); the first holds the embedding and "
               f"pp micro-batches in flight, the last the output layer and its fp32 logits (lens: balanced pipeline).")
elif detail == "Roofline":
    st.subheader("Roofline: each operation against the GPU's roofs (lens: co-design)")
    page.draw(specs.plan_spec(key, "roofline"))
    ridge = ", ".join(f"{k} {x:.0f} FLOP/byte" for k, x in v["roofline"]["ridge"].items())
    st.caption(f"Forward pass per GPU per micro-batch, at the sharded shapes. Ridge point: {ridge}. "
               "Hover a point for its forward + backward time. Element-wise ops (norms, residuals, activation) "
               "have no modelled FLOPs and sit below the chart's range.")
else:
    tl = v["timeline"]
    st.subheader("Pipeline schedule (lens: balanced pipeline)")
    if tl is None:
        st.caption(f"Not drawn: {v['timeline_bars']:,} bars ({sc.parallelism.pp} stages); the schedule is drawn up to "
                   f"{cached.MAX_TIMELINE_BARS:,}.")
    else:
        page.draw(specs.plan_spec(key, "timeline"))
        shown = (f"Showing {tl['drawn']} of {tl['total']} micro-batches for readability; the steady state repeats. "
                 if tl["drawn"] < tl["total"] else f"All {tl['total']} micro-batches. ")
        st.caption(shown + f"Drawn schedule ({sc.parallelism.schedule}): {fmt.seconds(tl['makespan_s'])}, idle share "
                   f"{fmt.percent(tl['bubble_frac'])}. Gaps are the pipeline bubble; exposed communication (TP, CP, "
                   "EP, FSDP) is drawn as its own phase.")

report.download_button(j, key)
