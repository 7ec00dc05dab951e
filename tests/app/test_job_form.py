"""The job editor's own fields come from the schema: a field added to the scenario, its
parallelism or the model (here in fixture subclasses) gets its widget, label, help, bounds,
group and default with no app code, and its value goes through the widgets and back."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

from pydantic import Field, StrictBool

from perfmodel.spec.limits import int_field, real_field
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.reliability import FailureModel
from perfmodel.spec.scenario import Parallelism, Scenario

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "app"))
from appkit import job_form, run_inputs, state  # noqa: E402


class FixtureParallelism(Parallelism):
    """The parallelism with a degree the app has never heard of."""

    fixture_degree: int_field(64) = 2
    """A fixture parallel degree. Only a test knows it."""


class FixtureScenario(Scenario):
    """The scenario with three fields the app has never heard of."""

    parallelism: FixtureParallelism = Field(default_factory=FixtureParallelism)
    fixture_warmup_frac: real_field(1.0, exclusive_minimum=False) = 0.25
    """Share of the steps spent warming up."""
    fixture_mode: Literal["eager", "graph"] = "eager"
    """How the fixture runs."""
    fixture_flag: StrictBool = False
    """A fixture switch."""


class FixtureFailures(FailureModel):
    fixture_drain_s: real_field(3600.0, exclusive_minimum=False) | None = None
    """Seconds to drain a node before a restart; null = none."""


class FixtureRun(Scenario):
    """The scenario whose failure model has a field the app has never heard of."""

    reliability: FixtureFailures = Field(default_factory=FixtureFailures)


class FixtureModel(ModelSpec):
    fixture_layers: int_field(512, minimum=0) = 0
    """Fixture layers of the model."""


def _option(key, opts):
    return next(o for o in opts if o.key == key)


def test_a_field_added_to_the_scenario_gets_a_widget_from_its_schema():
    opts = job_form.options(FixtureScenario)
    frac, mode, flag = (_option(k, opts) for k in ("fixture_warmup_frac", "fixture_mode", "fixture_flag"))
    assert (frac.kind, frac.min_value, frac.max_value, frac.default) == ("float", 0.0, 1.0, 0.25)
    assert frac.label == "Fixture warmup frac" and frac.help == "Share of the steps spent warming up."
    assert (mode.kind, mode.choices, mode.default) == ("select", ("eager", "graph"), "eager")
    assert (flag.kind, flag.default) == ("checkbox", False)
    assert {frac.group, mode.group, flag.group} == {"Batch and precision"}   # the scenario's own group
    degree = _option("fixture_degree", opts)
    assert (degree.kind, degree.min_value, degree.max_value, degree.default) == ("int", 1, 64, 2)
    assert degree.group == "Cluster and layout" and degree.help == "A fixture parallel degree."
    assert "fixture_degree" not in {o.key for o in job_form.options()}   # the real scenario has none


def test_an_added_scenario_field_round_trips_through_the_widget_values():
    data = state.scenario_to_dict(state.default_scenario())
    data.update(fixture_warmup_frac=0.5, fixture_mode="graph", fixture_flag=True)
    data["parallelism"] = {**data["parallelism"], "fixture_degree": 8}
    sc = FixtureScenario(**data)
    values = state.widget_values(sc, FixtureScenario)
    assert (values["fixture_warmup_frac"], values["fixture_mode"], values["fixture_degree"]) == (0.5, "graph", 8)
    assert state.scenario_from_values(values, FixtureScenario) == sc
    values["fixture_degree"] = 4   # as the widget sets it
    assert state.scenario_from_values(values, FixtureScenario).parallelism.fixture_degree == 4


def test_a_field_added_to_the_model_gets_a_custom_model_widget():
    opt = _option("m_fixture_layers", job_form.model_options(FixtureModel))
    assert (opt.kind, opt.min_value, opt.max_value, opt.group) == ("int", 0, 512, "Model")
    m = FixtureModel(num_layers=4, hidden_size=256, num_attention_heads=4, ffn_hidden_size=1024, vocab_size=1000,
                     fixture_layers=3)
    v = job_form.model_widget_values(m, FixtureModel)
    assert v["m_fixture_layers"] == 3 and v["m_num_experts"] == 0   # a dense model: no experts
    assert FixtureModel(**job_form.model_from_values(v, FixtureModel)) == m.model_copy(
        update={"num_query_groups": 4})   # the KV heads widget shows the resolved count


def test_the_real_scenario_keeps_its_labels_keys_and_bounds():
    opts = {o.key: o for o in job_form.options()}
    assert {k: opts[k].label for k in ("num_gpus", "tp", "training_tokens_b", "pipeline_schedule")} == {
        "num_gpus": "GPUs", "tp": "tp", "training_tokens_b": "Training tokens (billions, 0 = none)",
        "pipeline_schedule": "Pipeline schedule"}
    assert opts["num_gpus"].min_value == 0 and opts["num_gpus"].step == 8   # 0 reaches the one-line error
    assert opts["zero_stage"].choices == (0, 1, 2, 3)
    assert opts["pipeline_schedule"].choices[0] == state.DEFAULT_SCHEDULE
    assert opts["training_tokens_b"].max_value == 1.0e7   # the schema's 1e16 tokens, in billions
    sc = state.default_scenario()
    assert state.scenario_from_values(state.widget_values(sc)) == sc


def test_a_moe_model_round_trips_through_the_custom_widgets():
    data = {"name": "moe", "num_layers": 8, "hidden_size": 512, "num_attention_heads": 8, "num_query_groups": 2,
            "ffn_hidden_size": 2048, "vocab_size": 32000,
            "moe": {"num_experts": 16, "top_k": 2, "expert_ffn_hidden_size": 256, "num_dense_layers": 1,
                    "router_num_groups": 4, "router_group_topk": 2}}
    m = ModelSpec(**data)
    assert ModelSpec(**job_form.model_from_values(job_form.model_widget_values(m))) == m


def test_the_sidebar_draws_every_generated_field_with_its_label():
    """The sidebar draws what the generator gives, group by group (so a field added to the
    schema is drawn with no app code): each option's widget is there, of its kind, with its label."""
    import pytest
    pytest.importorskip("streamlit")
    from support.apptest import assert_clean, open_app

    def widgets(at, o):
        kind = {"checkbox": "checkbox", "select": "selectbox", "multiselect": "multiselect", "text": "text_input"}
        return getattr(at, kind.get(o.kind, "number_input"))

    at = open_app()
    for group in ("Cluster and layout", "Batch and precision", "Scenario file and link"):
        if group != "Cluster and layout":
            at = at.selectbox(key="_sidebar_group").set_value(group).run()
        for o in job_form.group_options(group):
            assert widgets(at, o)(key=o.key).label == o.label, o.key
    at = at.selectbox(key="_sidebar_group").set_value("Model").run()
    at = at.radio(key="model_source").set_value("Custom").run()
    for o in job_form.model_options():
        assert widgets(at, o)(key=o.key).label == o.label, o.key
    at = at.selectbox(key="_sidebar_group").set_value("Failures, start-up, input and cost").run()
    for o in (o for section in run_inputs.SECTIONS for o in run_inputs.options(section)):
        assert widgets(at, o)(key=o.key).label == o.label, o.key
    assert_clean(at)


def test_a_field_added_to_a_run_section_gets_a_widget_in_its_section():
    opt = _option("fixture_drain_s", run_inputs.options("reliability", FixtureRun))
    assert (opt.kind, opt.optional, opt.min_value, opt.max_value, opt.group) == ("float", True, 0, 3600.0,
                                                                                 "reliability")
    assert opt.label == "Fixture drain s (0 = none)" and opt.help == "Seconds to drain a node before a restart;" \
        " null = none."
    data = state.scenario_to_dict(state.default_scenario())
    sc = FixtureRun(**{**data, "reliability": {**data.get("reliability", {}), "fixture_drain_s": 120.0}})
    values = state.widget_values(sc, FixtureRun)
    assert values["fixture_drain_s"] == 120.0 and values["rel_restart_s"] == sc.reliability.restart_s
    assert state.scenario_from_values(values, FixtureRun) == sc
    values["fixture_drain_s"] = 0.0   # 0 in the widget is none
    assert state.scenario_from_values(values, FixtureRun).reliability.fixture_drain_s is None
