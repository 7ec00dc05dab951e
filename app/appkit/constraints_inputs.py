"""The Size page's constraints beyond the deadline and the budget: the site's power envelope, PUE
and a power cap per GPU, and the fabric bought (oversubscription, tiers). Their values are the ``run_inputs.SITE``
session keys, so the link and the YAML carry them (``facility``, ``fabric``)."""

from __future__ import annotations

import streamlit as st

from perfmodel.present import fmt

SYNC = {"size_power_mw": ("site_power_mw", 1.0, 0.0), "size_pue": ("site_pue", 1.0, 0.0),
        "size_gpu_cap_w": ("site_gpu_cap_w", 1.0, 0.0),
        "size_oversubscription": ("fabric_oversubscription", 1.0, 0.0), "size_tiers": ("fabric_tiers", 1.0, None)}
"""``run_inputs.submit_sync`` pairs: widget key -> (session key, scale, the value that means none)."""


def draw(seeded) -> None:
    """The five inputs, inside the page's form."""
    c1, c2, c5, c3, c4 = st.columns(5)
    seeded(c1.number_input, "Power envelope (MW, 0 = none)", "size_power_mw", "site_power_mw", 0.0, min_value=0.0,
           step=5.0, help="the site's facility power (IT load x PUE): each hardware type's GPU count is capped at "
                          "what it holds, in whole nodes (racks) at their maximum power")
    seeded(c2.number_input, "Site PUE (0 = the cost's)", "size_pue", "site_pue", 0.0, min_value=0.0, step=0.05,
           help="facility power over IT power; given, it also prices the energy; 0: the PUE of the sidebar's "
                "cost section")
    seeded(c5.number_input, "GPU power cap (W, 0 = none)", "size_gpu_cap_w", "site_gpu_cap_w", 0.0, min_value=0.0,
           step=50.0, help="a power limit per GPU: lower clocks (interpolated between published points of the "
                           "die, e.g. H100 NVL at 400 W), less power per node, more GPUs under the envelope")
    seeded(c3.number_input, "Fabric oversubscription (x:1, 0 = none)", "size_oversubscription",
           "fabric_oversubscription", 0.0, min_value=0.0, step=1.0,
           help="a rail-optimised fat tree whose leaf tier is oversubscribed x:1: collectives that cross it slow "
                "down, and its optics count against the power envelope; 0: a non-blocking network")
    seeded(c4.number_input, "Fabric tiers (0 = as needed)", "size_tiers", "fabric_tiers", 0, min_value=0,
           max_value=3, step=1, help="switch tiers: two reach 2,048 NICs of 64-port switches at 1:1, three "
                                     "beyond; 0: two where they reach, else three")


def columns(r: dict) -> dict:
    """The table's columns of one sizing row: what binds, the GPUs the envelope holds, tokens per MWh."""
    cap = r.get("power_cap") or {}
    return {"binds": r.get("binding_constraint") or "-",
            "power cap (GPUs)": f"{cap['num_gpus']:,}" if cap else "-",
            "tokens per MWh": fmt.compact(r["tokens_per_mwh"]) if r.get("tokens_per_mwh") else "-"}


def notes(rows: list[dict]) -> None:
    """Lines per hardware type: the envelope, the binding constraint, rent, reserve or spot, the fabric."""
    lines = [t for r in rows for k in ("power_text", "binding_text", "capacity_text", "fabric_text")
             if (t := r.get(k))]
    if lines:
        st.markdown("**Power and what binds**\n" + "\n".join(f"- {t}" for t in lines))
