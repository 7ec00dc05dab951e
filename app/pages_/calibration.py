"""Calibration and validation: fitted efficiency curves against published microbenchmarks,
and predicted against measured throughput for published training runs."""

import pandas as pd
import streamlit as st

from appkit import cached_calibration as cached
from appkit import charts_calibration as charts
from appkit import page, state
from calibration.published import PUBLISHED_HARDWARE
from perfmodel.present import fmt
from perfmodel.spec.hardware import list_hardware_ids

FAMILY_TITLES = {"gemm": "GEMMs", "gemm_fast_accum": "fp8 GEMMs with fast accumulation (the forward pass)",
                 "grouped_gemm": "Expert (grouped) GEMMs", "attention": "Attention kernels",
                 "memory": "HBM streaming", "collective": "Collectives", "launch": "Kernel launch",
                 "host_op": "Eager framework op"}


def _draw_fit(fit: dict, key: str | None = None) -> None:
    """The fitted curves by family; with ``key``, one family at a time (a selectbox of that key)."""
    families: dict = {}
    for p in fit["points"]:
        families.setdefault(p["group"].split(".")[0], []).append(p)
    if key is not None and families:
        if st.session_state.get(key) not in families:
            st.session_state[key] = next(iter(families))
        fam = st.selectbox("Kernel family", list(families), key=key, format_func=lambda f: FAMILY_TITLES.get(f, f),
                           help="one family at a time keeps the page quick to redraw")
        families = {fam: families[fam]}
    for fam, pts in families.items():
        st.subheader(FAMILY_TITLES.get(fam, fam))
        page.chart(charts.fit_curve(pts, fam))
        groups = sorted(g for g in fit["params"] if g.split(".")[0] == fam)
        st.caption(page.plain("; ".join(f"{g}: " + ", ".join(f"{k} {v:.4g}" for k, v in fit["params"][g].items())
                                        for g in groups)))


st.title("Calibration and validation")
j = st.session_state[page.JOB_KEY]
SECTIONS = ("Fitted curves", "Fit your own measurements", "Predicted against measured", "Maturing software")
section = st.radio("Section", SECTIONS, key="cal_section", horizontal=True,
                   help="one section at a time keeps the page quick to redraw")


def fitted_curves() -> None:
    st.header("Fitted curves against measured points")
    st.caption("Efficiency forms (perfmodel/efficiency.py) fitted to the published microbenchmarks of one GPU "
               "(calibration/data/microbenchmarks.yaml, trust medium or high) and, for H100 and H200, to the suite's "
               "own runs on a lent GPU (calibration/results). Filled: measured; open and dashed: the fitted model at "
               "the same shape or size (lens: co-design).")
    hw = st.selectbox("Hardware", PUBLISHED_HARDWARE, key="cal_hardware")
    fit = page.call(cached.fit_view, hw)
    if fit is not None:
        if not fit["points"]:
            st.info(f"No published curve of trust medium or high for {hw}.")
        _draw_fit(fit, key="cal_family")
        if fit["left_out"]:
            with st.expander(f"{len(fit['left_out'])} records left out"):
                st.write("\n".join(f"- {page.plain(x)}" for x in fit["left_out"]))



def fit_your_own() -> None:
    st.header("Fit your own measurements")
    st.caption("Upload an nccl-tests log (the output of all_reduce_perf, all_gather_perf, reduce_scatter_perf, "
               "alltoall_perf or sendrecv_perf) or a result file of `perfmodel bench-hw`. It is fitted as "
               "`perfmodel calibrate` fits it, on the hardware chosen here; nothing is saved. A collective fit "
               "describes the group it measured: its size and the hosts it spanned. Download the profile and "
               "pass it to `perfmodel predict --profile PATH`.")
    ids = list_hardware_ids()
    job_hw = j.scenario.hardware if j is not None and j.scenario is not None else None
    default = ids.index(job_hw) if isinstance(job_hw, str) and job_hw in ids else 0
    up_hw = st.selectbox("Hardware the measurements ran on", ids, index=default, key="cal_upload_hardware")
    upload = st.file_uploader(f"nccl-tests log or result file (up to {state.MAX_UPLOAD_MIB} MiB)",
                              type=["txt", "log", "out", "yaml", "yml", "json"], key="cal_upload",
                              max_upload_size=state.MAX_UPLOAD_MIB)
    if upload is not None:
        text = page.call(state.upload_text, upload.getvalue(), "uploaded file")
        mine = page.call(cached.upload_fit_view, text, upload.name, up_hw) if text is not None else None
        if mine is not None:
            st.caption(page.plain(f"{mine['records']} records fitted on {up_hw}."))
            for group, why in mine["not_fitted"].items():
                st.warning(page.plain(f"{group}: {why}"))
            _draw_fit(mine)
            with st.expander("Where each fitted value comes from"):
                st.write("\n".join(f"- {page.plain(k)}: {page.plain(v)}" for k, v in mine["sources"].items()))
            st.download_button("Download the profile", mine["profile_yaml"], file_name=f"profile-{up_hw}.yaml",
                               mime="text/yaml", key="cal_profile_download")



def predicted_against_measured() -> None:
    st.header("Predicted against measured: published training runs")
    use_profile = bool(j.use_profile) if j is not None else True
    val = page.call(cached.validation_view, use_profile)
    if val is not None and val["results"]:
        st.caption(f"{len(val['results'])} runnable cases from {val['path']} (tokens/s per GPU; measured values first, "
                   f"derived where the source gave only a step time or TFLOP/s). Efficiencies: "
                   f"{'calibration profiles where they exist' if use_profile else 'hardware spec defaults'}.")
        within = {b: sum(abs(r["error"]) <= b for r in val["results"]) / len(val["results"]) for b in charts.BANDS}
        wi = val["what_if"]
        c = st.columns(4)
        c[0].metric("Mean absolute error", fmt.percent(val["mape"]))
        c[1].metric("Within ±10%", fmt.percent(within[0.10]))
        c[2].metric("Within ±20%", fmt.percent(within[0.20]))
        c[3].metric("What-if ratio error", fmt.percent(wi["mean"]),
                    help=f"Mean error of the predicted tokens/s ratio over {wi['pairs']} pairs of cases that share a "
                         "source, a GPU and a model (median " + fmt.percent(wi["median"]) + "): how far a what-if "
                         "on one software stack can be trusted, with the stack's common offset cancelled.")
        page.chart(charts.predicted_vs_measured(val["results"]))
        st.dataframe(pd.DataFrame([{"GPU": g, "cases": v["cases"], "mean abs. error": fmt.percent(v["mape"]),
                                    "specs": ", ".join(v["specs"])}
                                   for g, v in val["by_gpu"].items()]), hide_index=True)
        st.caption("By source: each publication and release is its own software stack (co-design: the same GPUs "
                   "and layout can differ 2x between releases). A positive mean error means the model is faster "
                   "than the stack that was measured.")
        st.dataframe(pd.DataFrame([{"source": src, "cases": v["cases"], "mean abs. error": fmt.percent(v["mape"]),
                                    "mean error": f"{100 * v['mean_error']:+.1f}%"}
                                   for src, v in val["by_source"].items()]), hide_index=True)
        unfit = [r for r in val["results"] if not r["predicted_fits"]]
        st.caption(f"Memory fit: every published run fitted, yet the model says {len(unfit)} of "
                   f"{len(val['results'])} do not. Each is a miss of the memory model, or a recipe feature the "
                   "scenario cannot express (activation offloading, per-module recompute).")
        if unfit:
            with st.expander(f"The {len(unfit)} runs the model says do not fit"):
                st.dataframe(pd.DataFrame([{"case": r["id"], "predicted GiB": f"{r['predicted_memory_gib']:.1f}",
                                            "usable GiB": f"{r['usable_memory_gib']:.1f}"} for r in unfit]),
                             hide_index=True)
        worst = sorted(val["results"], key=lambda r: -abs(r["error"]))[:15]
        st.subheader("Largest errors")
        st.dataframe(pd.DataFrame([{
            "case": r["id"], "hardware": r["hardware"], "measured tok/s/GPU": f"{r['measured_tokens_per_s_per_gpu']:,.0f}",
            "predicted": f"{r['predicted_tokens_per_s_per_gpu']:,.0f}", "error": f"{100 * r['error']:+.1f}%",
            "basis": r["basis"], "bottleneck": r["bottleneck"],
        } for r in worst]), hide_index=True)
        if val["skipped"]:
            with st.expander(f"{len(val['skipped'])} cases not run"):
                st.dataframe(pd.DataFrame(val["skipped"]), hide_index=True)


def maturing_software() -> None:
    use_profile = bool(j.use_profile) if j is not None else True
    st.header("Same GPUs, maturing software")
    for h in page.call(cached.software_history_view, use_profile) or ():
        first, last = h["rows"][0], h["rows"][-1]
        st.caption(f"{h['title']}. {h['source']} Unit: {h['unit']}. Dashed: perfmodel for the final layout "
                   f"({h['efficiency']}), {h['predicted_tflop_per_s']:,.0f} TFLOP/s. The same {h['hardware']} GPUs "
                   f"went from {first['measured_tflop_per_s']:,.0f} to {last['measured_tflop_per_s']:,.0f} TFLOP/s "
                   f"({first['fraction_of_model']:.0%} to {last['fraction_of_model']:.0%} of the model) with "
                   f"software alone (lens: co-design).")
        page.chart(charts.software_history(h["rows"], h["predicted_tflop_per_s"]))
        with st.expander("The steps and the scenario's assumptions"):
            st.dataframe(pd.DataFrame([{"step": r["step"], "change": r["change"], "dispatcher": r["dispatcher"],
                                        "measured TFLOP/s": f"{r['measured_tflop_per_s']:,.0f}",
                                        "of perfmodel": fmt.percent(r["fraction_of_model"])}
                                       for r in h["rows"]]), hide_index=True)
            st.write("\n".join(f"- {n}" for n in h["notes"]))


{"Fitted curves": fitted_curves, "Fit your own measurements": fit_your_own,
 "Predicted against measured": predicted_against_measured, "Maturing software": maturing_software}[section]()
