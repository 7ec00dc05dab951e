"""perfmodel: an analytical performance and cost model of distributed AI training.

    import perfmodel as pm
    p = pm.predict(pm.load_scenario("job.yaml"))

The public API is ``perfmodel.api`` (documented in docs/api.md), re-exported here. Names load on
first use, so ``import perfmodel`` costs little until a prediction is asked for.
"""

from __future__ import annotations

__version__ = "0.1.0"

_EXPORTS = {
    # functions
    "load_scenario": "perfmodel.api", "parse_scenario": "perfmodel.spec.scenario",
    "scenario_to_dict": "perfmodel.spec.scenario", "predict": "perfmodel.api", "describe": "perfmodel.api",
    "search": "perfmodel.api", "scale": "perfmodel.api", "size": "perfmodel.api", "validate": "perfmodel.api",
    "hardware": "perfmodel.api", "model": "perfmodel.api", "hardware_ids": "perfmodel.api",
    "model_ids": "perfmodel.api", "efficiencies": "perfmodel.api", "resolve": "perfmodel.api",
    "roofline": "perfmodel.api", "timeline": "perfmodel.api", "bench": "perfmodel.api",
    "software_histories": "perfmodel.api", "BREAKDOWN_COMPONENTS": "perfmodel.api", "LENS": "perfmodel.api",
    "TIMELINE_PHASES": "perfmodel.api", "band": "perfmodel.api", "read_log": "perfmodel.api", "parse_log": "perfmodel.api",
    "load_runs": "perfmodel.api", "observed_run": "perfmodel.api", "diagnose": "perfmodel.api",
    "load_runs_assumed": "perfmodel.api", "trace": "perfmodel.api", "compare_trace": "perfmodel.api",
    "sensitivity": "perfmodel.api", "fit_anchor": "perfmodel.api", "predict_anchored": "perfmodel.api",
    "price": "perfmodel.api", "fit_fixes": "perfmodel.api", "recommendable": "perfmodel.api", "stage_memory": "perfmodel.api",
    "serve": "perfmodel.api", "validate_serving": "perfmodel.api", "size_serving": "perfmodel.api", "load_serving_scenario": "perfmodel.api",
    # inputs
    "Scenario": "perfmodel.spec.scenario", "Parallelism": "perfmodel.spec.scenario",
    "SoftwareStack": "perfmodel.spec.software", "Overlap": "perfmodel.spec.software",
    "HardwareSpec": "perfmodel.spec.hardware", "ModelSpec": "perfmodel.spec.model",
    "CostModel": "perfmodel.spec.cost", "FailureModel": "perfmodel.spec.reliability",
    "Startup": "perfmodel.spec.startup", "InputPipeline": "perfmodel.spec.input_pipeline",
    "Purpose": "perfmodel.spec.purpose", "Studies": "perfmodel.spec.studies",
    "SearchOptions": "perfmodel.studies.search.search", "InputError": "perfmodel.spec.errors",
    "Facility": "perfmodel.spec.facility", "FabricSpec": "perfmodel.spec.fabric",
    "Preemption": "perfmodel.spec.capacity", "ServingScenario": "perfmodel.spec.serving",
    "ServingSpec": "perfmodel.spec.serving",
    # results
    "Prediction": "perfmodel.engine.prediction", "Description": "perfmodel.studies.views.describe",
    "SearchResult": "perfmodel.studies.search.search", "Candidate": "perfmodel.studies.search.search",
    "ScalingResult": "perfmodel.studies.search.scaling", "SizingResult": "perfmodel.studies.search.sizing",
    "Report": "perfmodel.studies.observed.validation", "ErrorBand": "perfmodel.engine.band",
    "MeasuredRun": "perfmodel.spec.observed.measured",
    "ObservedRun": "perfmodel.spec.observed.measured", "Diagnosis": "perfmodel.studies.observed.diagnose",
    "Sensitivity": "perfmodel.studies.views.sensitivity", "Anchor": "perfmodel.studies.observed.anchor",
    "AnchoredPrediction": "perfmodel.studies.observed.anchor", "PriceQuote": "perfmodel.formulas.cost",
    "FitFixes": "perfmodel.studies.search.fixes", "Fix": "perfmodel.studies.search.fixes",
    "StageMemory": "perfmodel.studies.views.stages", "Headline": "perfmodel.spec.headline",
    "ServePrediction": "perfmodel.engine.serve", "ServingSize": "perfmodel.studies.search.serving_size", "ServingValidation": "perfmodel.studies.observed.serving_validation",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'perfmodel' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
