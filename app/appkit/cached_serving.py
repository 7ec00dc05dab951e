"""The Serve page's model call, cached on its frozen input (a JSON key), like ``appkit.cached``."""

from __future__ import annotations

import json

import streamlit as st

import perfmodel as pm

from .cached import CACHE, _profile

SERVE_DEFAULTS = {"prompt_tokens": 1000, "output_tokens": 1000, "concurrency": 64, "batching": "continuous",
                  "ttft_s": 2.0, "tpot_s": 0.05, "objectives_at": "mean", "tp": 8, "weights": "fp8",
                  "kv_cache": "fp8", "requests_per_s": 0.0}
"""The Serve page's options where the scenario's ``studies`` name none: a 1,000-token prompt and answer
(the ISL/OSL 1000/1000 of NVIDIA's inference performance tables); a TTFT objective of 2 s, MLPerf
Inference's Llama 2 70B server bound (there at p99, beside TPOT 0.2 s), and a TPOT of 0.05 s (20
tokens/s), both on the means; fp8 on tp8; a request rate of 0 does not size."""


def serve_options(studies) -> dict:
    """The Serve page's options of a scenario's ``studies``: each field's value, else its default."""
    return {k: (d if getattr(studies, f"serve_{k}") is None else getattr(studies, f"serve_{k}"))
            for k, d in SERVE_DEFAULTS.items()}


def serving_scenario(j, o: dict) -> dict:
    """The serving scenario (``perfmodel.spec.serving``) of the sidebar's job and the page's options ``o``."""
    sc = j.scenario
    model = sc.model if isinstance(sc.model, str) else sc.model.model_dump(mode="json")
    hardware = sc.hardware if isinstance(sc.hardware, str) else sc.hardware.model_dump(mode="json")
    return {"name": "serve", "hardware": hardware, "model": model, "cost": j.cost_model.model_dump(mode="json"),
            "serving": {"prompt_tokens": int(o["prompt_tokens"]), "output_tokens": int(o["output_tokens"]),
                        "concurrency": int(o["concurrency"]), "ttft_s": float(o["ttft_s"]),
                        "tpot_s": float(o["tpot_s"]), "objectives_at": o["objectives_at"], "batching": o["batching"],
                        "precision": {"weights": o["weights"], "activations": o["weights"],
                                      "kv_cache": o["kv_cache"]},
                        "parallelism": {"tp": int(o["tp"])}}}


@st.cache_data(**CACHE)
def serve_view(scenario_json: str, use_profile: bool) -> dict:
    """``pm.serve`` of a serving scenario mapping, as plain data (its ``to_dict()``)."""
    return pm.serve(json.loads(scenario_json), profile=_profile(use_profile)).to_dict()


@st.cache_data(**CACHE)
def size_view(scenario_json: str, use_profile: bool) -> dict:
    """``pm.size_serving`` of a serving scenario mapping with ``requests_per_s``, as plain data."""
    return pm.size_serving(json.loads(scenario_json), profile=_profile(use_profile)).to_dict()
