"""Serve: the sidebar's model on its hardware as a service: TTFT, TPOT, tokens/s per GPU, goodput
within the objectives, $ per million tokens, and the throughput-latency curve over concurrency
(lenses: amortisation, the batch that fills a decode step; scale must serve purpose, goodput)."""

import json

import altair as alt
import pandas as pd
import streamlit as st

from appkit import page, run_inputs
from appkit.cached_serving import serve_options, serve_view, serving_scenario, size_view
from perfmodel.present import fmt

j = page.job()
sc = j.scenario
st.title("Serve: latency, throughput and price")
st.caption(page.plain(f"The sidebar's model and hardware served by one replica per tp x pp x attention-dp GPUs "
                      f"({sc.model if isinstance(sc.model, str) else sc.model.name} on "
                      f"{sc.hardware if isinstance(sc.hardware, str) else sc.hardware.id})."))

OPTS = serve_options(sc.studies)
# widget key -> option; each is seeded from the scenario's ``studies`` and written back on submit,
# so the link and the YAML carry the serving scenario
WIDGETS = {"serve_prompt": "prompt_tokens", "serve_output": "output_tokens", "serve_concurrency": "concurrency",
           "serve_batching": "batching", "serve_ttft": "ttft_s", "serve_tpot": "tpot_s", "serve_at": "objectives_at",
           "serve_tp": "tp",
           "serve_weights": "weights", "serve_kv": "kv_cache", "serve_rate": "requests_per_s"}


def _w(widget, label: str, key: str, **kwargs):
    return run_inputs.seeded(widget, label, key, f"study_serve_{WIDGETS[key]}", OPTS[WIDGETS[key]], **kwargs)


with st.form("serve_form"):
    c = st.columns(4)
    _w(c[0].number_input, "prompt tokens", "serve_prompt", min_value=1, max_value=1_000_000)
    _w(c[1].number_input, "output tokens", "serve_output", min_value=1, max_value=1_000_000)
    _w(c[2].number_input, "concurrency per replica", "serve_concurrency", min_value=1, max_value=100_000)
    _w(c[3].selectbox, "batching", "serve_batching", options=["continuous", "chunked_prefill", "static"])
    c = st.columns(4)
    _w(c[0].number_input, "TTFT objective (s)", "serve_ttft", min_value=0.001, max_value=600.0)
    _w(c[1].number_input, "TPOT objective (s)", "serve_tpot", min_value=0.0001, max_value=10.0, format="%.4f")
    _w(c[2].number_input, "serving tp", "serve_tp", min_value=1, max_value=1024)
    _w(c[3].selectbox, "weights and activations", "serve_weights", options=["fp8", "bf16", "fp4", "fp16"])
    c = st.columns(3)
    _w(c[0].selectbox, "KV cache", "serve_kv", options=["fp8", "bf16", "fp4", "fp16"])
    _w(c[1].selectbox, "objectives on", "serve_at", options=["mean", "p50", "p99"],
       help="the statistic of TTFT and TPOT the objectives bound (MLPerf's server scenario: p99)")
    _w(c[2].number_input, "size for requests/s (0: do not size)", "serve_rate", min_value=0.0, max_value=1e6)
    st.form_submit_button("Serve", on_click=run_inputs.submit_sync(
        {k: (f"study_serve_{o}", 1.0, 0.0 if o == "requests_per_s" else None) for k, o in WIDGETS.items()}))

o = {o: st.session_state[k] for k, o in WIDGETS.items()}
rate = o["requests_per_s"]
st.session_state["_serve_shown"] = True   # the Plan page's report adds the serving answer
scenario = serving_scenario(j, o)
d = page.call(serve_view, json.dumps(scenario, sort_keys=True), j.use_profile)
if d is None:
    st.stop()

m = st.columns(5)
m[0].metric("time to first token", fmt.seconds(d["ttft_s"]))
m[1].metric("time per output token", fmt.seconds(d["tpot_s"]))
m[2].metric("output tokens/s per GPU", f"{d['output_tokens_per_s_per_gpu']:,.0f}")
m[3].metric("SLO goodput, tokens/s per GPU", f"{d['slo_goodput_output_tokens_per_s_per_gpu']:,.0f}")
m[4].metric("$ per million output tokens", f"${d['usd_per_million_output_tokens']:.3g}")
st.caption(page.plain(
    f"p50 / p99 with Poisson arrivals: TTFT {fmt.seconds(d['ttft_p50_s'])} / {fmt.seconds(d['ttft_p99_s'])}, "
    f"TPOT {fmt.seconds(d['tpot_p50_s'])} / {fmt.seconds(d['tpot_p99_s'])}. "
    f"Meets the objectives (at the {o['objectives_at']}): {'yes' if d['point']['meets_objectives'] else 'no'}. "
    f"Weights "
    f"{fmt.bytes_binary(d['weight_bytes_per_gpu'])} and KV cache {fmt.bytes_binary(d['kv_cache_bytes_per_gpu'])} "
    f"per GPU; the cache holds {d['max_concurrency']:,} requests per replica. Input tokens cost "
    f"${d['usd_per_million_input_tokens']:.3g} per million at {fmt.usd_per_gpu_hour(d['usd_per_gpu_hour'])}."))

st.subheader("Throughput against latency, over concurrency")
curve = pd.DataFrame(d["curve"])
curve["tpot_ms"] = curve["tpot_s"] * 1e3
curve["meets"] = curve["meets_objectives"].map({True: "meets objectives", False: "misses"})
page.chart(alt.Chart(curve).mark_line(point=True).encode(
    x=alt.X("tpot_ms:Q", title="time per output token (ms)"),
    y=alt.Y("output_tokens_per_s_per_gpu:Q", title="throughput (output tokens/s per GPU)"),
    color=alt.Color("meets:N", title=None),
    tooltip=["concurrency:Q", "ttft_s:Q", "tpot_ms:Q", "output_tokens_per_s_per_gpu:Q"]))
st.dataframe(pd.DataFrame([{"concurrency": c["concurrency"], "TTFT": fmt.seconds(c["ttft_s"]),
                            "TPOT": fmt.seconds(c["tpot_s"]),
                            "output tokens/s per GPU": round(c["output_tokens_per_s_per_gpu"]),
                            "meets objectives": c["meets_objectives"]} for c in d["curve"]]), hide_index=True)

if rate > 0:
    st.subheader("The cheapest deployment for this request rate")
    sized = {**scenario, "serving": {**{k: v for k, v in scenario["serving"].items() if k != "concurrency"},
                                     "requests_per_s": float(rate)}}
    z = page.call(size_view, json.dumps(sized, sort_keys=True), j.use_profile)
    if z is not None:
        b = z["best"]
        st.caption(page.plain(
            f"{b['replicas']} replica(s) of {b['layout']} on {b['hardware']}: {b['num_gpus']} GPUs at "
            f"{fmt.usd(b['usd_per_hour'])} per hour, TTFT {fmt.seconds(b['ttft_s'])}, TPOT {fmt.seconds(b['tpot_s'])}"
            if b else "No hardware and layout of the catalogue meets the objectives at any concurrency."))
        st.dataframe(pd.DataFrame([{"hardware": o["hardware"], "layout": o["layout"], "replicas": o["replicas"],
                                    "GPUs": o["num_gpus"], "USD per hour": o["usd_per_hour"],
                                    "verdict": o["reason"] or "meets the objectives"}
                                   for o in z["options"][:12]]), hide_index=True)
