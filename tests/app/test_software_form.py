"""The job editor's software options come from the ``SoftwareStack`` schema: an option added to
the stack (here in a fixture subclass) gets its widget, label, help, bounds, choices and default
with no app code, and its value goes through the widgets and back."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Literal

import pytest
from pydantic import StrictBool

from perfmodel.spec.errors import InputError
from perfmodel.spec.limits import int_field, real_field
from perfmodel.spec.software import SoftwareStack

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "app"))
from appkit import software_form, state  # noqa: E402


class FixtureStack(SoftwareStack):
    """The stack with four options the app has never heard of."""

    fixture_kernel: Literal["fast", "slow", "auto"] = "auto"
    """Which fixture kernel runs. Only a test knows it."""
    fixture_fused: StrictBool = True
    """A fused fixture pass."""
    fixture_chunks: int_field(64) = 4
    """Chunks of the fixture pass, 1 to 64."""
    fixture_scale: real_field(8.0, 0.5, exclusive_minimum=False) | None = None
    """A fixture scale; null = none."""


def _option(key, model=FixtureStack):
    return next(o for o in software_form.options(model) if o.key == key)


def test_an_option_added_to_the_stack_gets_a_widget_from_its_schema():
    kernel, fused = _option("fixture_kernel"), _option("fixture_fused")
    chunks, scale = _option("fixture_chunks"), _option("fixture_scale")
    assert (kernel.kind, kernel.choices, kernel.default) == ("select", ("fast", "slow", "auto"), "auto")
    assert kernel.label == "Fixture kernel" and kernel.help == "Which fixture kernel runs."
    assert kernel.group == "Software stack"   # an option the labels table does not name
    assert (fused.kind, fused.default, fused.help) == ("checkbox", True, "A fused fixture pass.")
    assert (chunks.kind, chunks.min_value, chunks.max_value, chunks.step, chunks.default) == ("int", 1, 64, 1, 4)
    assert (scale.kind, scale.optional, scale.min_value, scale.max_value, scale.default) == ("float", True, 0, 8.0,
                                                                                             0.0)
    assert scale.label == "Fixture scale (0 = none)"


def test_an_added_option_round_trips_through_the_widget_values():
    sw = FixtureStack(fixture_kernel="fast", fixture_fused=False, fixture_chunks=16, fixture_scale=2.5,
                      moe_load_imbalance=1.25, selective_recompute=("mlp", "layernorm"))
    values = software_form.widget_values(sw, FixtureStack)
    assert values["fixture_kernel"] == "fast" and values["fixture_scale"] == 2.5
    back = software_form.software_values(values, FixtureStack)
    assert FixtureStack(**back, overlap=sw.overlap) == sw
    # a widget not drawn yet takes the schema's default
    assert software_form.software_values({}, FixtureStack)["fixture_chunks"] == 4
    assert FixtureStack(**software_form.software_values({}, FixtureStack)) == FixtureStack()


def test_every_option_of_the_real_stack_has_a_widget_and_its_default():
    opts = {o.key: o for o in software_form.options()}
    assert set(opts) == set(SoftwareStack.model_fields) - {"stack", "overlap"}
    assert SoftwareStack(**software_form.software_values({})) == SoftwareStack()
    assert opts["attention_backend"].label == "Attention kernel"   # the labels table's words are kept
    assert opts["moe_expert_capacity_factor"].step == 0.25


def test_options_the_app_did_not_show_before_now_round_trip():
    """Options such as moe_dispatch_fp8 used to be dropped by the app's hand-typed list."""
    data = state.scenario_to_dict(state.default_scenario())
    data["software"] = {**data.get("software", {}), "moe_dispatch_fp8": True, "fp8_scaling": "blockwise",
                        "moe_comm_reserved_sms": 20, "te_module_host_ops": 2.5}
    sc = state.parse_scenario(data)
    assert state.scenario_from_values(state.widget_values(sc)) == sc


def test_a_named_policy_stands_alone():
    with pytest.raises(InputError) as e:
        _option("selective_recompute", SoftwareStack).from_widget(["op_sac", "mlp"])
    assert e.value.field == "software.selective_recompute"
