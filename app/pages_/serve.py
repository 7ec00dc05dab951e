"""Serve: the sidebar's model on its hardware as a service: TTFT, TPOT, tokens/s per GPU, goodput
within the objectives, $ per million tokens, and the throughput-latency curve over concurrency
(lenses: amortisation, the batch that fills a decode step; scale must serve purpose, goodput)."""

import json

import altair as alt
import pandas as pd
import streamlit as st

from appkit import page
from appkit.cached_serving import serve_view, size_view
from perfmodel.present import fmt

j = page.job()
sc = j.scenario
st.title("Serve: latency, throughput and price")
model = sc.model if isinstance(sc.model, str) else sc.model.model_dump(mode="json")
hardware = sc.hardware if isinstance(sc.hardware, str) else sc.hardware.model_dump(mode="json")
st.caption(page.plain(f"The sidebar's model and hardware served by one replica per tp x pp x attention-dp GPUs "
                      f"({sc.model if isinstance(sc.model, str) else sc.model.name} on "
                      f"{sc.hardware if isinstance(sc.hardware, str) else sc.hardware.id})."))

with st.form("serve_form"):
    c = st.columns(4)
    prompt = c[0].number_input("prompt tokens", 1, 1_000_000, 1000, key="serve_prompt")
    output = c[1].number_input("output tokens", 1, 1_000_000, 1000, key="serve_output")
    concurrency = c[2].number_input("concurrency per replica", 1, 100_000, 64, key="serve_concurrency")
    batching = c[3].selectbox("batching", ["continuous", "chunked_prefill", "static"], key="serve_batching")
    c = st.columns(4)
    ttft = c[0].number_input("TTFT objective (s)", 0.001, 600.0, 2.0, key="serve_ttft")
    tpot = c[1].number_input("TPOT objective (s)", 0.0001, 10.0, 0.05, format="%.4f", key="serve_tpot")
    tp = c[2].number_input("serving tp", 1, 1024, 8, key="serve_tp")
    weights = c[3].selectbox("weights and activations", ["fp8", "bf16", "fp4", "fp16"], key="serve_weights")
    c = st.columns(2)
    kv = c[0].selectbox("KV cache", ["fp8", "bf16", "fp4", "fp16"], key="serve_kv")
    rate = c[1].number_input("size for requests/s (0: do not size)", 0.0, 1e6, 0.0, key="serve_rate")
    st.form_submit_button("Serve")

scenario = {"name": "serve", "hardware": hardware, "model": model, "cost": j.cost_model.model_dump(mode="json"),
            "serving": {"prompt_tokens": int(prompt), "output_tokens": int(output), "concurrency": int(concurrency),
                        "ttft_s": float(ttft), "tpot_s": float(tpot), "batching": batching,
                        "precision": {"weights": weights, "activations": weights, "kv_cache": kv},
                        "parallelism": {"tp": int(tp)}}}
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
    f"Meets the objectives: {'yes' if d['point']['meets_objectives'] else 'no'}. Weights "
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
            f"{b['replicas']} replica(s) of tp{b['tp']} on {b['hardware']}: {b['num_gpus']} GPUs at "
            f"{fmt.usd(b['usd_per_hour'])} per hour, TTFT {fmt.seconds(b['ttft_s'])}, TPOT {fmt.seconds(b['tpot_s'])}"
            if b else "No hardware and tp of the catalogue meets the objectives at any concurrency."))
        st.dataframe(pd.DataFrame([{"hardware": o["hardware"], "tp": o["tp"], "replicas": o["replicas"],
                                    "GPUs": o["num_gpus"], "USD per hour": o["usd_per_hour"],
                                    "verdict": o["reason"] or "meets the objectives"}
                                   for o in z["options"][:12]]), hide_index=True)
