"""The smallest changes that make a layout fit (``perfmodel.fit_fixes``, issue 35)."""

from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.spec.units import GIBI

EXAMPLE = pm.load_scenario("perfmodel/data/example_scenario.yaml")   # Llama 3 70B, 64 H100, tp4 pp4 vpp5 cp2


def with_(**over):
    return pm.parse_scenario({**pm.scenario_to_dict(EXAMPLE), **over})


def test_a_fitting_layout_needs_no_fix():
    r = pm.fit_fixes(EXAMPLE, profile=None)
    assert r.fits and r.fixes == () and r.reason == ""


def test_single_changes_fix_a_micro_batch_too_large():
    sc = with_(micro_batch_size=4)
    assert not pm.predict(sc, profile=None).fits_in_memory
    r = pm.fit_fixes(sc, profile=None)
    assert not r.fits and r.reason == "does not fit in memory"
    assert r.memory_per_gpu_bytes > r.usable_bytes
    assert all(len(f.changes) == 1 for f in r.fixes)
    changed = {f.changes[0][:3] for f in r.fixes}
    assert ("micro_batch_size", 4, 1) in changed and ("recompute", "none", "full") in changed
    times = [f.step_time_s for f in r.fixes]
    assert times == sorted(times)
    for f in r.fixes:          # each fix is exactly the prediction of the changed scenario, and fits
        p = pm.predict(f.scenario, profile=None)
        assert p.fits_in_memory and f.step_time_s == pytest.approx(p.step_time_s, rel=1e-12)
        assert f.memory_per_gpu_bytes <= r.usable_bytes


def test_405b_on_64_h100s_needs_more_gpus():
    # Model states alone: 16 bytes per parameter (bf16 weights, fp32 gradients, fp32 master, Adam m and v;
    # Rajbhandari et al. 2020) x 405.9e9 / 64 GPUs = 101.5 GB per GPU, more than an H100's 80 GB, however
    # the layout shards them: no fix keeps 64 GPUs.
    params = pm.predict(with_(model="llama3-405b"), profile=None).model_params_total
    assert 16 * params / 64 > 80e9
    r = pm.fit_fixes(with_(model="llama3-405b"), profile=None)
    assert not r.fits and r.memory_per_gpu_bytes / GIBI > 300
    assert r.fixes and all(any(c[0] == "num_gpus" and c[2] > 64 for c in f.changes) for f in r.fixes)


def test_a_layout_that_cannot_run_gets_fixes_with_the_rule_it_breaks():
    r = pm.fit_fixes(with_(num_gpus=60), profile=None)
    assert not r.fits and r.memory_per_gpu_bytes is None
    assert r.reason == "num_gpus: tp(4) * pp(4) * cp(2) = 32 does not divide num_gpus(60)"
    # 60 is between the multiples of tp4 x pp4 x cp2 = 32: 32 and 64 (the example) both run and fit
    assert {f.changes for f in r.fixes if len(f.changes) == 1} >= {(("num_gpus", 60, 32),), (("num_gpus", 60, 64),)}
    d = r.to_dict()
    assert d["fixes"] == [f.to_dict() for f in r.fixes]


# ------------------------------------------------------------------ memory per pipeline stage
def test_stage_memory_peak_is_the_prediction_and_the_weights_add_up():
    m = pm.stage_memory(EXAMPLE, profile=None)
    p = pm.predict(EXAMPLE, profile=None)
    assert len(m.stages) == 4                                            # pp 4
    assert max(m.totals) == pytest.approx(p.memory_per_gpu_bytes, rel=1e-12)
    assert m.totals[0] == max(m.totals)         # the first stage: the embedding and pp micro-batches in flight
    # bf16 weights, 2 bytes per parameter, split 4 ways by tp (norms are replicated, a ~0.01% error):
    # the stages' weights times tp add up to 2 bytes x every parameter.
    weights = sum(s["weights"] for s in m.stages) * 4
    assert weights == pytest.approx(2 * p.model_params_total, rel=1e-3)
    assert {r["component"] for r in m.rows()} == set(m.stages[0])
