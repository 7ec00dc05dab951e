"""The public API of serving (re-exported by ``perfmodel.api`` and ``perfmodel``; kept in its own
module so ``api.py`` stays under the size limit):

    import perfmodel as pm
    p = pm.serve("llama70b_serving.yaml")     # or a mapping, or a ServingScenario
    p.ttft_s, p.tpot_s, p.to_dict() == json.loads(`perfmodel serve ... --format json`)
    v = pm.validate_serving()                 # against perfmodel/data/serving_runs.yaml

``profile`` as in ``pm.predict``: ``"auto"`` the project's calibration profile for the hardware,
``None`` the hardware spec's own efficiencies, or a path.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from perfmodel.engine.serve import ServePrediction
from perfmodel.engine.serve import serve as _serve
from perfmodel.spec.errors import InputError
from perfmodel.spec.profile import AUTO, ProfileChoice, efficiencies_for
from perfmodel.spec.serving import (
    ServingScenario,
    load_serving_scenario,
    parse_serving_scenario,
    serving_hardware,
    serving_model,
)
from perfmodel.studies.observed.serving_validation import SERVING_RUNS, ServingValidation
from perfmodel.studies.observed.serving_validation import validate_serving as _validate_serving
from perfmodel.studies.search.serving_size import ServingSize
from perfmodel.studies.search.serving_size import size_serving as _size_serving

__all__ = [
    "ServePrediction",
    "ServingScenario",
    "ServingValidation",
    "load_serving_scenario",
    "parse_serving_scenario",
    "serve",
    "validate_serving",
]


def _serving_scenario(s) -> ServingScenario:
    if isinstance(s, ServingScenario):
        return s
    if isinstance(s, Mapping):
        return parse_serving_scenario(dict(s))
    if isinstance(s, (str, Path)):
        return load_serving_scenario(s)
    raise InputError("scenario", f"expected a ServingScenario, a mapping or a path, got {type(s).__name__}")


def serve(scenario, *, profile: ProfileChoice = AUTO) -> ServePrediction:
    """TTFT, TPOT, tokens/s per GPU and per replica, SLO goodput, $ per million input and output
    tokens, and the throughput-latency curve over concurrency (``perfmodel.engine.serve``)."""
    sc = _serving_scenario(scenario)
    hw = serving_hardware(sc)
    return _serve(sc, hw, serving_model(sc), efficiencies_for(hw, profile)[0])


def validate_serving(path: str | Path = SERVING_RUNS, *, profile: ProfileChoice = AUTO) -> ServingValidation:
    """Predicted against published serving throughput (``perfmodel.studies.observed.serving_validation``)."""
    return _validate_serving(path, profile)


def size_serving(scenario, *, hardware: tuple[str, ...] | None = None, profile: ProfileChoice = AUTO) -> ServingSize:
    """The cheapest hardware, tensor-parallel replica and GPU count that serve the scenario's
    ``requests_per_s`` within its ``ttft_s`` and ``tpot_s`` (``perfmodel.studies.search.serving_size``);
    ``hardware``: the ids to consider (default every reference spec of the catalogue)."""
    return _size_serving(_serving_scenario(scenario), hardware, profile)
