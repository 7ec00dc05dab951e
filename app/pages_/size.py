"""Size a cluster: per hardware type, the cheapest GPU count and layout within a deadline and budget, how
likely it is to meet them, and whether to buy or rent."""

import pandas as pd
import streamlit as st

from appkit import cached, charts, page, run_inputs
from perfmodel.present import fmt
from perfmodel.spec.hardware import list_hardware_ids, reference_hardware_ids
from perfmodel.spec.units import GIGA, SECONDS_PER_DAY

COUNTS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)

j = page.job()
st.title("Size a cluster")
st.caption("For each hardware type: the cheapest GPU count (with its best layout) that trains the tokens within "
           "the deadline and the budget, goodput (failures, checkpoints, restarts) included. The model, sequence, "
           "batch and precision come from the sidebar.")
c1, c2, c3 = st.columns(3)
tokens_b = c1.number_input("Training tokens (billions)", min_value=1.0, step=100.0,
                           value=float((j.scenario.training_tokens or 1e12) / GIGA), key="size_tokens")
deadline_d = run_inputs.purpose_input(c2, "Deadline (days, 0 = none)", "size_deadline", step=5.0)
budget = run_inputs.purpose_input(c3, "Budget (USD, 0 = none)", "size_budget", step=1.0e5)
ids = list_hardware_ids()
c1, c2 = st.columns(2)
hardware = c1.multiselect("Hardware", ids, default=reference_hardware_ids(), key="size_hardware")
counts = c2.multiselect("GPU counts to try", COUNTS, default=[64, 128, 256, 512, 1024, 2048], key="size_counts")
if not hardware or not counts:
    st.info("Pick at least one hardware type and one GPU count.")
    st.stop()
deadline_s = deadline_d * SECONDS_PER_DAY or None
res = page.call(cached.size_view, j.key(), tokens_b * GIGA, deadline_s, budget or None, tuple(hardware),
                tuple(sorted(counts)))
if res is None:
    st.stop()

fits = [r for r in res["rows"] if r["num_gpus"]]
if fits:
    best = min(fits, key=lambda r: r["cost_usd"])
    chance = ""
    if best.get("probability_met") is not None:
        chance = (f" Chance it meets the deadline and the budget under the 80% error band's distribution: "
                  f"**{fmt.probability(best['probability_met'])}**.")
    st.success(f"**Cheapest: {best['num_gpus']} x {page.plain(best['hardware'])}**: {page.plain(best['reason'])}."
               + chance)
    risky = [r for r in fits if r.get("probability_met") is not None and r["probability_met"] < 0.5]
    if risky:
        st.warning("Less likely than not to meet the deadline and the budget, once the model's error is counted: "
                   + ", ".join(f"{r['num_gpus']} x {page.plain(r['hardware'])} "
                               f"({fmt.probability(r['probability_met'])})" for r in risky)
                   + ". Leave room, or choose a larger count.")
else:
    st.warning("No hardware type meets both the deadline and the budget; the table says why for each.")
page.chart(charts.sizing(res["options"], deadline_s, budget or None))
st.caption("Lines join the GPU counts of one hardware type (more GPUs: faster, usually dearer); black rings mark "
           "each type's choice; dashed red rules are the deadline and the budget (lens: scale serves purpose).")


def chance(r):
    return fmt.probability(r.get("probability_met")) if r.get("probability_met") is not None else "-"


st.dataframe(pd.DataFrame([{
    "hardware": r["hardware"], "GPUs": r["num_gpus"] or "-",
    "layout": " ".join(f"{k}{r['layout'][k]}" for k in ("tp", "pp", "vpp", "cp", "dp")) if r.get("layout") else "",
    "time to train": fmt.seconds(r.get("time_to_train_s")),
    "time 80% band": fmt.band((r.get("band") or {}).get("time_to_train_s"), fmt.seconds),
    "cost": fmt.usd(r.get("cost_usd")), "cost 80% band": fmt.band((r.get("band") or {}).get("cost_usd"), fmt.usd),
    "P(on time and budget)": chance(r),
    "MFU": fmt.percent(r.get("mfu")), "goodput": fmt.percent(r.get("goodput_frac")), "why": r["reason"],
} for r in res["rows"]]), hide_index=True)

st.subheader("Buy or rent")
money = [r for r in res["rows"] if r.get("buy_vs_rent")]
if money:
    st.dataframe(pd.DataFrame([{
        "hardware": r["hardware"], "GPUs": r["buy_vs_rent"]["num_gpus"],
        "rent (cloud)": fmt.usd(r["buy_vs_rent"]["rent_usd"]), "own (TCO)": fmt.usd(r["buy_vs_rent"]["tco_usd"]),
        "buying breaks even after (GPU-hours per GPU)": fmt.si(r["buy_vs_rent"]["break_even_gpu_hours"]),
        "at utilisation over the life": fmt.percent(r["buy_vs_rent"]["break_even_utilisation_frac"]),
        "months at your utilisation": f"{r['buy_vs_rent']['break_even_months']:.1f}",
    } for r in money]), hide_index=True)
    st.caption("The run rented at the cloud price and owned (capital over its life at the utilisation, networking, "
               "energy), side by side. Owning is cheaper once each GPU is used for more than the break-even GPU-hours: "
               "above that utilisation over the amortisation life. Set prices, life, utilisation, PUE and electricity "
               "under 'Failures, start-up, input and cost' in the sidebar.")
