"""Size a cluster: per hardware type, the cheapest GPU count, layout and global batch within a deadline and
budget, at one price basis, how likely it is to meet them, and whether to buy or rent."""

import pandas as pd
import streamlit as st

import perfmodel as pm
from appkit import cached, charts, constraints_inputs, page, run_inputs, size_targets, state
from perfmodel.present import fmt, money
from perfmodel.present.money import BASIS_WORDS
from perfmodel.present.verdicts import batch_text
from perfmodel.spec.hardware import list_hardware_ids, reference_hardware_ids
from perfmodel.spec.studies import MAX_BATCH_TOKENS_DEFAULT
from perfmodel.spec.units import GIGA, MEGA, SECONDS_PER_DAY

COUNTS = (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
DEFAULT_COUNTS = [64, 128, 256, 512, 1024, 2048, 4096]

j = page.job()
sc = j.scenario
st.title("Size a cluster")
page.job_caption(j)
st.caption("For each hardware type: the cheapest GPU count (with its best layout) that trains the tokens within "
           "the deadline and the budget, goodput (failures, checkpoints, restarts) included. The model, sequence, "
           "batch and precision come from the sidebar; where that batch cannot meet the targets, the batch doubles "
           "(as real runs grow it with their GPUs) up to the limit below, and the table says so.")
ids = list_hardware_ids()
default_ids, left_out = pm.recommendable(reference_hardware_ids(), j.cost_model)
job_targets = size_targets.of_job(sc, st.session_state)
with st.form("size_form", border=False):
    c1, c2, c3 = st.columns(3)
    # this page's tokens, deadline and budget start from the job's and stay on this page: the job changes only
    # through the button under the results, which can be undone
    tokens_b = run_inputs.seeded(c1.number_input, "Training tokens (billions)", "size_tokens", "_size_tokens_none",
                                 job_targets["tokens_b"] or 1000.0, min_value=1.0, step=100.0,
                                 help="for this sizing only; the job's (sidebar) tokens change only if you choose "
                                      "to make them the job's, below the results")
    deadline_d = run_inputs.seeded(c2.number_input, "Deadline (days, 0 = none)", "size_deadline",
                                   "_size_deadline_none", job_targets["deadline_days"], min_value=0.0, step=5.0)
    budget = run_inputs.seeded(c3.number_input, "Budget (USD, 0 = none)", "size_budget", "_size_budget_none",
                               job_targets["budget_usd"], min_value=0.0, step=1.0e5, format="%.0f")
    c1, c2 = st.columns(2)
    hardware = run_inputs.seeded(c1.multiselect, "Hardware", "size_hardware", "study_size_hardware",
                                 default_ids, options=ids,
                                 help="announced hardware and placeholder prices are left out unless you add them")
    counts = run_inputs.seeded(c2.multiselect, "GPU counts to try", "size_counts", "study_size_counts",
                               DEFAULT_COUNTS, options=COUNTS)
    c1, c2, c3 = st.columns([2, 1, 2])
    grow = run_inputs.seeded(c1.checkbox, "Let the batch grow", "size_grow", "study_grow_batch", True,
                             help="where the sidebar's global batch cannot meet the deadline or the budget, double "
                                  "it up to the limit; off: the sidebar's batch at every count")
    limit_m = run_inputs.seeded(c2.number_input, "Batch limit (M tokens)", "size_limit", "study_max_batch_mtokens",
                                MAX_BATCH_TOKENS_DEFAULT / MEGA, min_value=0.001, step=4.0, format="%.3g",
                                help="default 16.8M tokens: Llama 3 405B's final batch, 2,048 x 8,192 (Llama Team "
                                     "2024, section 3.4.1); a batch past the critical batch (McCandlish et al. 2018) "
                                     "would need more tokens")
    c3.caption(f"Price basis: **{BASIS_WORDS[run_inputs.cost_basis(j.cost_model)]}** for every row (sidebar, "
               "'Failures, start-up, input and cost').")
    constraints_inputs.draw(run_inputs.seeded)
    submitted = st.form_submit_button("Size the cluster", type="primary", on_click=run_inputs.submit_sync({
        "size_hardware": ("study_size_hardware", 1.0, default_ids),
        "size_counts": ("study_size_counts", 1.0, DEFAULT_COUNTS), "size_grow": ("study_grow_batch", 1.0, True),
        "size_limit": ("study_max_batch_mtokens", 1.0, MAX_BATCH_TOKENS_DEFAULT / MEGA),
        **constraints_inputs.SYNC}))
if left_out:
    st.caption("Left out unless you add them (not yet buyable, or priced by a placeholder): "
               + page.plain("; ".join(f"{h} ({why})" for h, why in left_out.items())) + ".")
if not hardware or not counts:
    st.error("Hardware: pick at least one type" if not hardware else "GPU counts to try: pick at least one")
    st.stop()
deadline_s = deadline_d * SECONDS_PER_DAY or None
# the study's tokens, deadline and budget are its own arguments: the job's are left out of its key, so
# making them the job's (below) keeps these results
study_key = state.JobInputs(sc.model_copy(update={"training_tokens": None}), None, j.cost_model, j.use_profile).key()
res = page.run_study("size", (study_key, tokens_b * GIGA, deadline_s, budget or None, tuple(hardware),
                              tuple(sorted(counts)), bool(grow), float(limit_m) * MEGA), submitted, cached.size_view,
                     f"Sizing {len(hardware)} hardware types x {len(counts)} GPU counts", "Size the cluster")
if res is None:
    st.stop()

rows, seq = res["rows"], res["seq_length"]
fits = [r for r in rows if r["num_gpus"]]


def badge(r) -> str:
    """' (announced)', ' (placeholder price)' or both, for a row the user added."""
    return " (announced)" * bool(r.get("announced")) + " (placeholder price)" * bool(r.get("placeholder_price"))


if fits:
    best = min(fits, key=lambda r: r["cost_usd"])
    chance = ""
    if best.get("probability_met") is not None:
        chance = (f" Chance it meets the deadline and the budget under the 80% error band's distribution: "
                  f"**{fmt.probability(best['probability_met'])}**.")
    st.success(f"**Cheapest: {best['num_gpus']} x {page.plain(best['hardware'] + badge(best))}** at "
               f"{fmt.usd_per_gpu_hour(best['price']['usd_per_gpu_hour'])}"
               f"{' (placeholder)' if best.get('placeholder_price') else ''}: {page.plain(best['reason'])}." + chance)
    risky = [r for r in fits if r.get("probability_met") is not None and r["probability_met"] < 0.5]
    if risky:
        st.warning("Less likely than not to meet the deadline and the budget, once the model's error is counted: "
                   + ", ".join(f"{r['num_gpus']} x {page.plain(r['hardware'])} "
                               f"({fmt.probability(r['probability_met'])})" for r in risky)
                   + ". Leave room, or choose a larger count.")
else:
    st.warning("No hardware type meets both the deadline and the budget; the table says why for each.")
size_targets.offer_to_job(job_targets, {"tokens_b": float(tokens_b), "deadline_days": float(deadline_d),
                                        "budget_usd": float(budget)})
grown = [r for r in rows if r.get("batch_grown")]
if grown:
    st.info("**The batch, not the hardware, was what limited** " + ", ".join(page.plain(r["hardware"]) for r in grown)
            + f": at the sidebar's batch of {page.plain(batch_text(sc.global_batch_size, seq))} no count met both "
              "targets, so the batch grew (see 'batch'). Set the batch limit, or switch growth off, above.")
mixed = money.mixed_classes_text({r["hardware"]: r["listed_class"] for r in rows}) \
    if run_inputs.cost_basis(j.cost_model) == "listed" else ""
if mixed:
    st.warning(page.plain(mixed) + " (in the sidebar)")
page.chart(charts.sizing(res["options"], deadline_s, budget or None))
st.caption("Lines join the GPU counts of one hardware type (more GPUs: faster, usually dearer; a larger batch "
           "draws its own point); black rings mark each type's choice, labelled with its hardware and GPU count; "
           "dashed red rules are the deadline and the budget (lens: scale serves purpose).")


def chance(r):
    return fmt.probability(r.get("probability_met")) if r.get("probability_met") is not None else "-"


st.dataframe(pd.DataFrame([{
    "hardware": r["hardware"] + badge(r), "meets both": "yes" if r["num_gpus"] else "no",
    "GPUs": f"{r['num_gpus']:,}" if r["num_gpus"] else "-",
    "time to train": fmt.seconds(r.get("time_to_train_s")), "cost": fmt.usd(r.get("cost_usd")),
    "layout": " ".join(f"{k}{r['layout'][k]}" for k in ("tp", "pp", "vpp", "cp", "dp")) if r.get("layout") else "",
    "per M tokens": fmt.usd_per_million_tokens(r.get("cost_usd"), tokens_b * GIGA),
    "batch": f"{fmt.compact(r['global_batch_size'] * seq)} tokens" + (" (grown)" if r.get("batch_grown") else ""),
    "$/GPU-h": fmt.usd_per_gpu_hour(r["price"]["usd_per_gpu_hour"]) + " (placeholder)" * bool(r.get("placeholder_price")),
    "P(on time and budget)": chance(r),
    "time 80% band": fmt.band((r.get("band") or {}).get("time_to_train_s"), fmt.seconds),
    "cost 80% band": fmt.band((r.get("band") or {}).get("cost_usd"), fmt.usd),
    "MFU": fmt.percent(r.get("mfu")), "goodput": fmt.percent(r.get("goodput_frac")),
    **constraints_inputs.columns(r),
} for r in rows]), hide_index=True, width="stretch",
    column_config={**{k: st.column_config.TextColumn(width="small") for k in ("meets both", "GPUs")},
                   "layout": st.column_config.TextColumn(width="medium")})
constraints_inputs.notes(rows)
st.markdown("**Why, per hardware type**\n" + "\n".join(f"- **{page.plain(r['hardware'])}**: {page.plain(r['reason'])}"
                                                          for r in rows))
with st.expander("Where each price comes from"):
    st.write("\n".join(f"- {page.plain(r['hardware'])}: {page.plain(r['price']['text'])}" for r in rows))

st.subheader("Buy or rent")
money = [r for r in rows if r.get("buy_vs_rent")]
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
