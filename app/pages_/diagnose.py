"""Diagnose: the sidebar's job as it ran. The step's sensitivity to each resource first; then
upload its training log or type what was measured, and see predicted against measured, the gap's
likely causes with their lens, and a what-if anchored on the run."""

import json

import pandas as pd
import streamlit as st

import perfmodel as pm
from appkit import cached, charts, page, state
from perfmodel.present import fmt
from perfmodel.spec.errors import InputError

LOG_TYPES = ["log", "txt", "out", "csv", "yaml", "yml"]
# Typed figures: key, label, and the value that means 'not given'.
FIGURES = (("step_time_s", "Step time (s)", 0.0), ("tokens_per_s_per_gpu", "Tokens/s per GPU", 0.0),
           ("gpu_utilisation", "GPU utilisation (%)", 0.0), ("data_wait_s", "Data-loader wait per step (s)", 0.0))

j = page.job()
sc = j.scenario
st.title("Diagnose a run")
st.caption("The job in the sidebar is the job that ran. Give what it measured: the model predicts the same job, "
           "splits the gap into ranked causes (each a term of the step, with its lens and what to measure next) "
           "and anchors what-ifs to your cluster.")


def _measured_from_log() -> list[dict] | None:
    f = st.file_uploader(f"Training log: Megatron-LM, NeMo, torchtitan, Hugging Face Trainer, Lightning metrics.csv, "
                         f"a CSV or YAML of step times (up to {state.MAX_UPLOAD_MIB} MiB: give a long log's tail)",
                         type=LOG_TYPES, key="dg_log")
    if f is None:
        st.info("Upload a log, or choose 'Type the figures'.")
        return None
    try:
        state.check_upload_size("log", f.size)
        text = f.getvalue().decode("utf-8")
    except UnicodeDecodeError:
        st.error("log: the file is not UTF-8 text")
        return None
    except InputError as exc:
        st.error(page.plain(exc))
        return None
    runs = page.call(pm.parse_log, text, "uploaded log")
    if runs is None:
        return None
    out = []
    for i, m in enumerate(runs):
        row = {**m.to_dict(), "label": f"log run {i + 1}" if len(runs) > 1 else "uploaded log"}
        row.update({k: getattr(m, k) for k in ("num_gpus", "global_batch_size") if getattr(m, k)})
        out.append(row)
    st.caption(f"Read {len(runs)} run(s) from the log: " + page.plain(runs[0].source.replace("uploaded log", "")))
    return out


def _measured_typed() -> list[dict] | None:
    c = st.columns(len(FIGURES))
    values = {key: c[i].number_input(label, min_value=0.0, value=default, key=f"dg_{key}", format="%.4g")
              for i, (key, label, default) in enumerate(FIGURES)}
    m = {k: v for k, v in values.items() if v > 0}
    if "gpu_utilisation" in m:
        m["gpu_utilisation"] = min(m["gpu_utilisation"], 100.0) / 100.0
    if not ({"step_time_s", "tokens_per_s_per_gpu"} & set(m)):
        st.info("Type the measured step time or tokens/s per GPU.")
        return None
    return [{**m, "label": "typed"}]


key = j.key()
sens = page.call(cached.sensitivity_view, key)
if sens is not None:
    st.subheader("Sensitivity: what twice as much of each resource buys")
    page.chart(charts.sensitivity_bars(sens["effects"]))
    path = " -> ".join(f"{p['bottleneck'] or 'nothing'} ({fmt.seconds(p['step_time_s'])})" for p in sens["path"])
    st.caption(page.plain(f"Bottleneck: {sens['bottleneck'] or 'none'} ({sens['bottleneck_lens']}). As the binding "
                          f"resource doubles, step by step (pattern 1, bottlenecks move): {path}."))

st.subheader("What the run measured")
source = st.radio("Measured", ("Type the figures", "Upload a log"), horizontal=True, key="dg_source")
measured = _measured_typed() if source == "Type the figures" else _measured_from_log()
if not measured:
    st.stop()
measured_json = json.dumps(measured, sort_keys=True)
d = page.call(cached.diagnose_view, key, measured_json)
if d is None:
    st.stop()

st.subheader("Predicted against measured")
st.dataframe(pd.DataFrame([{
    "run": r["id"], "GPUs": r["num_gpus"], "measured step": fmt.seconds(r["measured_step_time_s"]),
    "predicted step": fmt.seconds(r["predicted_step_time_s"]), "gap": f"{r['gap_frac']:+.1%}",
    "band (p10-p90)": ("-" if r["band"] is None
                       else f"{fmt.seconds(r['band']['p10'])} - {fmt.seconds(r['band']['p90'])}"),
    "measured from": r["basis"], "MFU (predicted)": fmt.percent(r["predicted_mfu"]),
    "GPU utilisation (meas / pred)": f"{fmt.percent(r['measured_gpu_utilisation'])} / "
                                     f"{fmt.percent(r['predicted_gpu_utilisation'])}",
} for r in d["runs"]]), hide_index=True)

st.subheader("Likely causes of the gap")
st.caption(f"Each cause is one lever of the step model at the speed that best explains the measurements; weight = "
           f"relative likelihood. The model's usual error alone: {fmt.percent(d['no_cause_weight'])}. One step time "
           "ranks the levers by how little each must change; timers, GPU utilisation, the loader's wait or runs at "
           "several GPU counts tell them apart.")
shown = d["causes"][:5]
if not shown:
    st.success("No lever of the model explains the run better than the model's usual error.")
if shown:
    page.chart(charts.cause_weights(shown))
    for i, c in enumerate(shown, 1):
        st.markdown(f"**{i}.** ({fmt.percent(c['weight'])}) {page.plain(c['sentence'])}")
        st.caption(page.plain(c["detail"]))
if d["scaling"]:
    st.subheader("Scaling: measured against predicted efficiency")
    page.chart(charts.efficiency_series(d["scaling"]))
    st.caption(f"Measured and predicted part at {d['parts_at_num_gpus']} GPUs." if d["parts_at_num_gpus"]
               else "Measured and predicted efficiency agree at every GPU count.")
if d["symptoms"]:
    st.subheader("Symptoms")
    for s in d["symptoms"]:
        st.markdown(f"- {page.plain(s['sentence'])}")

st.subheader("A what-if anchored on this run")
c = st.columns(3)
what_if = {"num_gpus": int(c[0].number_input("GPUs", min_value=1, value=sc.num_gpus, key="dg_wi_gpus")),
           "global_batch_size": int(c[1].number_input("Global batch", min_value=1, value=sc.global_batch_size,
                                                      key="dg_wi_gbs")),
           "precision": c[2].selectbox("Precision", ("bf16", "fp16", "fp8", "fp4"),
                                       index=("bf16", "fp16", "fp8", "fp4").index(sc.precision), key="dg_wi_prec")}
a = page.call(cached.anchored_view, key, measured_json, json.dumps(what_if, sort_keys=True))
if a is not None:
    band = a["anchored_band"]["tokens_per_s_per_gpu"]
    m = st.columns(3)
    m[0].metric("Anchored tokens/s per GPU", fmt.si(a["tokens_per_s_per_gpu"], "tok/s"),
                help=f"p10-p90: {fmt.si(band['p10'], 'tok/s')} - {fmt.si(band['p90'], 'tok/s')} "
                     f"({page.plain(a['anchored_band_source'])})")
    m[1].metric("Unanchored", fmt.si(a["unanchored"]["tokens_per_s_per_gpu"], "tok/s"))
    m[2].metric("Anchored step time", fmt.seconds(a["step_time_s"]))
    f = a["anchor"]["factors"]
    st.caption(page.plain(f"Anchor factors: compute x{f['compute']:.3g}, communication x{f['communication']:.3g} "
                          f"({a['anchor']['note']}). " + " ".join(a["notes"])))
