"""Plan: one job in detail: goodput and its waterfall, the figures with their error band, step-time
breakdown, memory, roofline and pipeline timeline."""

import streamlit as st

from appkit import cached, page, specs
from appkit.lenses import LENS_TEXT
from perfmodel.present import fmt
from perfmodel.present.goodput import waterfall_rows
from perfmodel.spec.units import KILO

j = page.job()
key = j.key()
v = page.call(cached.plan_view, key)
if v is None:
    st.caption("The Search page lists the layouts that run for this model, hardware and GPU count.")
    st.stop()
chart = specs.plan_specs(key)
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
c = st.columns(4)
metric(c[0], "Goodput", fmt.percent(p["goodput_frac"]),
       help_text="useful FLOP/s over the cluster's peak: MFU x the share of wall time that trains (failures, "
                 "restarts, checkpoints and start-up take the rest)",
       note=f"{fmt.percent(p['training_time_frac'])} of wall time trains")
metric(c[1], "Time to train", fmt.seconds(p.get("time_to_train_s")), "time_to_train_s", fmt.seconds,
       "needs training tokens (Batch and precision); ideal time / goodput + start-up")
metric(c[2], "Cost", fmt.usd(p.get("cost_usd")), "cost_usd", fmt.usd, f"{j.cost_model.mode} pricing")
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

left, right = st.columns(2)
with left:
    st.subheader("Where the step time goes")
    page.draw(chart["breakdown"])
with right:
    st.subheader("Memory per GPU against usable HBM")
    page.draw(chart["memory"])

st.subheader("Goodput: from the cluster's peak to useful work")
page.draw(chart["waterfall"])
lost = max(waterfall_rows(p["goodput_waterfall"])[1:], key=lambda r: r["lost_flop_per_s"])
st.caption(f"Each bar is the cluster's model FLOP/s after one more loss; red is what that step lost. The largest loss: "
           f"{lost['lost_to']} ({fmt.percent(lost['lost_flop_per_s'] / p['goodput_waterfall'][0]['flop_per_s'])} of "
           f"peak). Failures, restarts, checkpoints, start-up and the input pipeline are set under 'Failures, start-up, "
           f"input and cost' in the sidebar.")

st.subheader("Roofline: each operation against the GPU's roofs (lens: co-design)")
page.draw(chart["roofline"])
ridge = ", ".join(f"{k} {x:.0f} FLOP/byte" for k, x in v["roofline"]["ridge"].items())
st.caption(f"Forward pass per GPU per micro-batch, at the sharded shapes. Ridge point: {ridge}. "
           "Hover a point for its forward + backward time. Element-wise ops (norms, residuals, activation) "
           "have no modelled FLOPs and sit below the chart's range.")

tl = v["timeline"]
st.subheader("Pipeline schedule (lens: balanced pipeline)")
if tl is None:
    st.caption(f"Not drawn: {v['timeline_bars']:,} bars ({sc.parallelism.pp} stages); the schedule is drawn up to "
               f"{cached.MAX_TIMELINE_BARS:,}.")
else:
    page.draw(chart["timeline"])
    shown = (f"Showing {tl['drawn']} of {tl['total']} micro-batches for readability; the steady state repeats. "
             if tl["drawn"] < tl["total"] else f"All {tl['total']} micro-batches. ")
    st.caption(shown + f"Drawn schedule ({sc.parallelism.schedule}): {fmt.seconds(tl['makespan_s'])}, "
               f"idle share {fmt.percent(tl['bubble_frac'])}. "
               "Gaps are the pipeline bubble; exposed communication (TP, CP, EP, FSDP) is drawn as its own phase.")
