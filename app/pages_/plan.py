"""Plan: one job in detail: step-time breakdown, memory, roofline and pipeline timeline."""

import streamlit as st

from appkit import cached, page, specs
from appkit.lenses import LENS_TEXT
from perfmodel.present import fmt
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

c = st.columns(4)
c[0].metric("Step time", fmt.seconds(p["step_time_s"]))
c[1].metric("Tokens/s per GPU", fmt.si(p["tokens_per_s_per_gpu"], "tok/s"))
c[2].metric("MFU", fmt.percent(p["mfu"]), help="model FLOPs (no recompute) / (step time x GPUs x dense peak)")
c[3].metric("Memory per GPU", fmt.bytes_binary(p["memory_per_gpu_bytes"]),
            delta="fits" if p["fits_in_memory"] else "does not fit", delta_color="normal" if p["fits_in_memory"] else "inverse")
c = st.columns(4)
c[0].metric("Time to train", fmt.seconds(p.get("time_to_train_s")), help="needs training tokens (Batch and precision)")
c[1].metric("Cost", fmt.usd(p.get("cost_usd")), help=f"{j.cost_model.mode} pricing")
c[2].metric("Energy", fmt.si(p["energy_kwh"] * KILO, "Wh") if p.get("energy_kwh") else "-", help="facility energy, PUE included")
c[3].metric("GPU-hours", fmt.si(p["gpu_hours"]) if p.get("gpu_hours") else "-")

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
    st.caption(shown + f"Drawn schedule: {fmt.seconds(tl['makespan_s'])}, idle share {fmt.percent(tl['bubble_frac'])}. "
               "Gaps are the pipeline bubble; exposed communication (TP, CP, EP, FSDP) is drawn as its own phase.")
