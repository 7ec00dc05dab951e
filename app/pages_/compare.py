"""Compare hardware, or software stacks: the same job on each GPU type, or under each framework's
defaults: time, cost, energy, and (for hardware) its best layout."""

import pandas as pd
import streamlit as st

import perfmodel as pm
from appkit import cached, page, run_inputs
from perfmodel.present import fmt, money
from perfmodel.present.money import BASIS_WORDS
from perfmodel.spec.hardware import list_hardware_ids, reference_hardware_ids
from perfmodel.spec.stacks import list_stacks
from perfmodel.spec.units import KILO, SECONDS_PER_DAY

j = page.job()
st.title("Compare hardware and software")
page.job_caption(j)
vary = st.radio("Vary", ("hardware", "software stack"), key="cmp_vary", horizontal=True)
if vary == "software stack":
    st.caption("The job from the sidebar under each software stack's documented defaults, its hardware and "
               "layout held (lens: co-design: the same work on the same GPUs runs at different speeds under "
               "different software). The job's own options (pipeline layout, recompute layers, offload, MoE "
               "load imbalance) are kept.")
    stacks = st.multiselect("Software stacks", list_stacks(), key="cmp_stacks",
                            default=["megatron-core", "nemo-perf", "torchtitan-compile", "pytorch-fsdp-accelerate"])
    if not stacks:
        st.info("Pick at least one software stack.")
        st.stop()
    rows = page.call(cached.compare_stacks_view, j.key(), tuple(stacks))
    if rows is None:
        st.stop()
    ok = [r for r in rows if not r.get("reason")]
    if ok:
        page.bar_row([(ok, "step_time_s", "step time (s)", {}),
                      (ok, "tokens_per_s_per_gpu", "throughput (tokens/s per GPU)", {})], category="stack")
    st.dataframe(pd.DataFrame([{
        "stack": r["stack"], "framework": r["stack_label"], "fits": "no" if r.get("reason") else "yes",
        "why not": r.get("reason", ""),
        "step time": fmt.seconds(r["step_time_s"]) if r.get("step_time_s") else "-",
        "tokens/s per GPU": fmt.si(r["tokens_per_s_per_gpu"], "tok/s") if r.get("tokens_per_s_per_gpu") else "-",
        "MFU": fmt.percent(r.get("mfu")),
        "memory per GPU": fmt.bytes_binary(r["memory_per_gpu_bytes"]) if r.get("memory_per_gpu_bytes") else "-",
        "bottleneck": r.get("bottleneck") or "", "options unlike the sidebar's": r["differs"],
    } for r in rows]), hide_index=True, width="stretch")
    st.stop()

st.caption("The job from the sidebar on each hardware type, with its layout as given and, optionally, the best "
           "layout the search finds there (lens: co-design: what the same work costs on different silicon). Every "
           "row is priced on one basis, the sidebar's, with its $/GPU-hour and source.")
ids = list_hardware_ids()
default_ids, left_out = pm.recommendable(reference_hardware_ids(), j.cost_model)
with st.form("cmp_form", border=False):
    c1, c3 = st.columns([4, 1])
    chosen = run_inputs.seeded(c1.multiselect, "Hardware", "cmp_hardware", "study_compare_hardware", default_ids,
                               options=ids, help="kept in the link (studies.compare_hardware) when you press Compare")
    with_search = st.checkbox("Also search the best layout on each", value=True, key="cmp_search")
    objective = c3.selectbox("Best by", ("time", "cost", "tokens_per_usd"), key="cmp_objective")
    c1, c2 = st.columns([3, 1])
    c1.caption(f"Price basis: **{BASIS_WORDS[run_inputs.cost_basis(j.cost_model)]}** (sidebar, 'Failures, start-up, "
               "input and cost'): listed prices are of different provider classes, hyperscaler or neocloud compare "
               "on one.")
    submitted = c2.form_submit_button("Compare", type="primary", on_click=run_inputs.submit_sync(
        {"cmp_hardware": ("study_compare_hardware", 1.0, default_ids)}))
if left_out:
    st.caption("Not shown unless you add them (not yet buyable, or priced by a placeholder): "
               + page.plain("; ".join(f"{h} ({why})" for h, why in left_out.items())) + ".")
if not chosen:
    st.info("Pick at least one hardware type.")
    st.stop()
args = (j.key(), tuple(chosen), with_search, objective)
if with_search:
    rows = page.run_study("compare", args, submitted, cached.compare_view,
                          f"Comparing {len(chosen)} hardware types, searching each", "Compare")
else:       # no search: quick, so drawn on every change
    rows = page.call(cached.compare_view, *args)
if rows is None:
    st.stop()

ok = [r for r in rows if not r.get("reason")]
tokens = j.scenario.training_tokens
if not tokens:
    st.warning("Set training tokens (Batch and precision) to compare time to train, cost and energy; "
               "step time is compared meanwhile.")
drawn = {r["hardware"] for r in ok}
unfit = sorted({r["hardware"] for r in rows if r.get("reason")} - drawn)
if unfit:
    st.warning("Not drawn (no fitting layout on the basis chosen, or no price on it): " + page.plain(", ".join(unfit))
               + ". The table's 'why not' column, and the list under it, say why.")
as_given = sorted({r["hardware"] for r in rows if r.get("reason") and r["layout"] == "as given"} & drawn)
if as_given:
    st.caption("The sidebar's layout does not run on " + page.plain(", ".join(as_given)) + "; only the best "
               "layout found there is drawn.")
flagged = sorted({r["hardware"] for r in rows if r.get("announced") or r.get("listed_class") == "placeholder"})
if flagged:
    st.caption("Announced (not yet buyable) or at a placeholder price, as the table marks them: "
               + page.plain(", ".join(flagged)) + ".")
mixed = money.mixed_classes_text({r["hardware"]: r["listed_class"] for r in rows}) \
    if run_inputs.cost_basis(j.cost_model) == "listed" else ""
if mixed:
    st.warning(page.plain(mixed))
if ok:
    if tokens:
        page.bar_row([(ok, "time_to_train_s", "time to train (days)",
                       {"scale": SECONDS_PER_DAY, "band_key": "time_to_train_s"}),
                      (ok, "cost_usd", "cost (USD)", {"band_key": "cost_usd", "money": True}),
                      ([{**r, "energy_wh": r["energy_kwh"] * KILO} for r in ok], "energy_wh", "energy (MWh)",
                       {"scale": 1e6})])
    else:
        page.bar_row([(ok, "step_time_s", "step time (s)", {"band_key": "step_time_s"}),
                      (ok, "tokens_per_s_per_gpu", "throughput (tokens/s per GPU)",
                       {"band_key": "tokens_per_s_per_gpu"})], columns=3)

    st.caption("Black whiskers: the 80% error band of each prediction (docs/validation.md, 'Error band').")

table = pd.DataFrame([{      # the decision's columns first (no scrolling sideways for them at 1024 px)
    "hardware": r["hardware"] + " (announced)" * bool(r.get("announced")), "layout": r["layout"],
    "fits": "no" if r.get("reason") else "yes",
    "time to train": fmt.seconds(r.get("time_to_train_s")), "cost": fmt.usd(r.get("cost_usd")),
    "bottleneck": r.get("bottleneck") or "", "why not": r.get("reason", ""),
    "parallelism": r.get("layout_text", ""), "MFU": fmt.percent(r.get("mfu")),
    "$/GPU-h": fmt.usd_per_gpu_hour(r["price"]["usd_per_gpu_hour"])
    + (" (placeholder)" if r.get("listed_class") == "placeholder" and r["price"]["basis"] == "listed" else ""),
    "per M tokens": fmt.usd_per_million_tokens(r.get("cost_usd"), tokens),
    "step time": fmt.seconds(r["step_time_s"]) if r.get("step_time_s") else "-",
    "tokens/s per GPU": fmt.si(r["tokens_per_s_per_gpu"], "tok/s") if r.get("tokens_per_s_per_gpu") else "-",
    "memory per GPU": fmt.bytes_binary(r["memory_per_gpu_bytes"]) if r.get("memory_per_gpu_bytes") else "-",
    "energy": fmt.si(r["energy_kwh"] * KILO, "Wh") if r.get("energy_kwh") else "-",
} for r in rows])
st.dataframe(table, hide_index=True, width="stretch",
             column_config={"why not": st.column_config.TextColumn(width="medium"),
                            "layout": st.column_config.TextColumn(width="small"),
                            "fits": st.column_config.TextColumn(width="small")})
why = {(r["hardware"], r["layout"]): r["reason"] for r in rows if r.get("reason")}
if why:
    st.markdown("**Why not**, in full\n" + "\n".join(f"- {page.plain(h)} ({page.plain(lay)}): {page.plain(t)}"
                                                      for (h, lay), t in why.items()))
with st.expander("Where each price comes from"):
    seen = {}
    for r in rows:
        seen.setdefault(r["hardware"], r["price"]["text"])
    st.write("\n".join(f"- {page.plain(h)}: {page.plain(t)}" for h, t in seen.items()))
