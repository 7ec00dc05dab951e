"""Issue 48, finding 3: edited or inline hardware keeps the calibration of the catalogue spec it
derives from, scaled by what changed, or says in one line that none applies; and faster hardware is
never slower, with the default profile and with activation offload and ZeRO-3 layouts.

Before: an inline spec under the default profile fell back to the spec's own efficiencies, so
'Headline numbers' with every number unchanged moved a step by -7% to +4% (the example job:
b200 -6.8%, a100-sxm-80gb +4.0%), and the faster-hardware fuzz found pairs up to +91% slower. With
the spec's own efficiencies, an activation-offload job whose layers are host-bound was up to 15%
slower on faster compute: its copies hid only behind the GPU work of a layer, not behind the
host dispatch the layer waits for."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from support import fuzz as harness

import perfmodel as pm
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.headline import Headline, headline_of, headline_spec
from perfmodel.spec.profile import efficiencies_for
from perfmodel.spec.scenario import load_scenario, parse_scenario

EXAMPLE = Path(__file__).resolve().parents[2] / "perfmodel" / "data" / "example_scenario.yaml"
PROFILED = ("a100-sxm-80gb", "b200", "gb200-nvl72", "h100-sxm", "h200-sxm")
"""Catalogue specs with a calibration profile (calibration/profiles/)."""


def _inline(data: dict):
    """``data`` as a scenario's inline hardware spec."""
    job = load_scenario(EXAMPLE).model_dump(mode="json", exclude_none=True)
    return parse_scenario({**job, "hardware": data}).hardware


@pytest.mark.parametrize("hw_id", PROFILED)
def test_headline_numbers_unchanged_predict_as_the_catalogue_spec(hw_id):
    sc = load_scenario(EXAMPLE)
    base = load_hardware(hw_id)
    hl = headline_spec(Headline(base=hw_id, name="mine", **headline_of(base)))
    a = pm.predict(sc.model_copy(update={"hardware": hw_id}))
    b = pm.predict(sc.model_copy(update={"hardware": hl}))
    assert b.step_time_s == pytest.approx(a.step_time_s, rel=1e-12)
    assert "calibration profile" in efficiencies_for(hl)[1]


def test_an_edited_fabric_scales_the_profiles_collective_fits():
    base = load_hardware("h100-sxm")
    data = base.model_dump(mode="json", exclude_none=True)
    data["scale_up"]["bandwidth_per_direction_gb_per_s"] *= 2
    edited = _inline(data)
    eff, note = efficiencies_for(edited)
    prof, _ = efficiencies_for(base)
    assert "calibration/profiles/h100-sxm.yaml" in note and "scale-up bandwidth x2" in note
    up = [(f, g) for f, g in zip(prof.collectives, eff.collectives) if f.fabric == "scale_up"]
    assert up and all(g.busbw_bytes_per_s == 2 * f.busbw_bytes_per_s for f, g in up)
    assert eff.gemm == prof.gemm and eff.memory_efficiency == prof.memory_efficiency


def test_an_edited_efficiency_block_is_kept_and_said():
    data = load_hardware("h100-sxm").model_dump(mode="json", exclude_none=True)
    data["efficiency"]["memory_efficiency"] = 0.5
    hw = _inline(data)
    eff, note = efficiencies_for(hw)
    assert eff.memory_efficiency == 0.5
    assert "differs from h100-sxm's, so no calibration profile applies" in note and "\n" not in note


def test_a_spec_of_no_catalogue_lineage_says_no_profile_applies():
    data = load_hardware("h100-sxm").model_dump(mode="json", exclude_none=True)
    data.update(id="my-gpu")
    hw = _inline(data)
    eff, note = efficiencies_for(hw)
    assert eff == hw.efficiency and "no calibration profile applies" in note


HOST_BOUND_OFFLOAD = [
    # found by the faster-hardware fuzz with the spec's own efficiencies (seed 7): +15.1%, +12.1%, +9.2%
    (dict(hardware="h100-sxm", num_gpus=4, seq_length=2048, global_batch_size=8, micro_batch_size=4,
          parallelism=dict(tp=1, pp=1, cp=2, zero_stage=3), precision="fp16", activation_offload_layers=1),
     dict(flops=2.0, hbm=10.0, scale_up=10.0)),
    (dict(hardware="h200-sxm", num_gpus=128, seq_length=4096, global_batch_size=128, micro_batch_size=2,
          parallelism=dict(tp=2, pp=1, cp=1, zero_stage=2), precision="bf16", activation_offload_layers=3),
     dict(flops=10.0, hbm=10.0, scale_up=10.0)),
    (dict(hardware="h100-sxm-hbm2e-500w", num_gpus=4, seq_length=1024, global_batch_size=8, micro_batch_size=4,
          parallelism=dict(tp=4, pp=1, cp=1, zero_stage=3), precision="bf16", activation_offload_layers=3),
     dict(flops=10.0, hbm=10.0, scale_up=10.0, scale_out=2.0)),
]


@pytest.mark.parametrize("profile", [None, "auto"])
@pytest.mark.parametrize("case,factors", HOST_BOUND_OFFLOAD,
                         ids=["h100-zero3-cp2", "h200-zero2-tp2", "h100-500w-zero3"])
def test_host_bound_offload_is_never_slower_on_faster_hardware(case, factors, profile):
    case = dict(case)
    d = dict(name="offload", model=harness.TINY_MODEL, recompute="none", training_tokens=1.5e13,
             software={"activation_offload_layers": case.pop("activation_offload_layers")}, **case)
    p0 = pm.predict(parse_scenario(d), profile=profile)
    faster = harness.scaled_hardware(d["hardware"], factors)
    p1 = pm.predict(parse_scenario({**d, "hardware": faster}), profile=profile)
    assert p1.step_time_s <= p0.step_time_s * (1 + 1e-12), (p0.breakdown_s, p1.breakdown_s)


def test_faster_edited_hardware_is_never_slower_with_the_default_profile():
    """60 random jobs (ZeRO-3 and activation offload among them) on catalogue specs and the same
    specs edited faster: the default profile applies to both."""
    rng = random.Random(48)
    seen = 0
    for _ in range(60):
        out = harness.check_faster_hardware(harness.valid_scenario(rng, software=True), rng, profile="auto")
        assert not out.defect, out.detail
        seen += out.kind == "ok"
    assert seen >= 30
