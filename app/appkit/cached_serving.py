"""The Serve page's model call, cached on its frozen input (a JSON key), like ``appkit.cached``."""

from __future__ import annotations

import json

import streamlit as st

import perfmodel as pm

from .cached import CACHE, _profile


@st.cache_data(**CACHE)
def serve_view(scenario_json: str, use_profile: bool) -> dict:
    """``pm.serve`` of a serving scenario mapping, as plain data (its ``to_dict()``)."""
    return pm.serve(json.loads(scenario_json), profile=_profile(use_profile)).to_dict()


@st.cache_data(**CACHE)
def size_view(scenario_json: str, use_profile: bool) -> dict:
    """``pm.size_serving`` of a serving scenario mapping with ``requests_per_s``, as plain data."""
    return pm.size_serving(json.loads(scenario_json), profile=_profile(use_profile)).to_dict()
