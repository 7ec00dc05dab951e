"""Plausibility priors of the diagnosis (issue 49): a run whose GEMMs ran far off the tensor cores is
blamed on the kernels, not on a data loader thousands of times slower than modelled, unless a data
wait was measured."""

import pytest

import perfmodel as pm
from perfmodel.spec.observed.measured import MeasuredRun
from perfmodel.studies.observed.causes import (
    OFF_TENSOR_CORE_FRAC,
    ON_THE_FLY_TOKENS_PER_S_PER_GPU,
    input_floor,
    plausibility_penalty,
)
from perfmodel.studies.views.perturb import Speeds, perturbed

ONE_GPU = {"hardware": "h100-sxm", "model": "llama3-8b", "seq_length": 2048, "micro_batch_size": 1,
           "precision": "bf16", "num_gpus": 1, "global_batch_size": 8}


def _slow_kernels(speed: float, data_wait_s=None):
    sc = pm.parse_scenario(ONE_GPU)
    bd = perturbed(pm.resolve(sc, profile=None), Speeds().times("peak_flops", speed))
    return pm.observed_run(sc, MeasuredRun(step_time_s=sum(bd.values()), data_wait_s=data_wait_s), "one GPU")


@pytest.mark.parametrize("speed", [0.17, 0.1])
def test_slow_gemms_are_not_blamed_on_the_data_loader(speed):
    """One step time 5.8x (and 10x) slower than predicted, the kernels at 0.17x (0.1x). Every lever
    fits one step exactly; before the plausibility term the loader at ~1e-4 of its modelled rate
    won on its wide prior (the case of issue 49)."""
    d = pm.diagnose([_slow_kernels(speed)], profile=None)
    assert d.runs[0].gap_frac > 3.0          # measured step over predicted, - 1
    assert d.causes[0].lever == "peak_flops", [(c.lever, c.speed_factor, c.weight) for c in d.causes]
    loader = [c for c in d.causes if c.lever == "input_pipeline"]
    assert not loader or loader[0].weight < d.causes[0].weight / 10


def test_a_measured_data_wait_lifts_the_loader_floor():
    sc_runs = [_slow_kernels(0.5, data_wait_s=0.0)]
    from perfmodel.studies.observed.diagnose import run_data
    data = [run_data(r, pm.resolve(r.scenario, profile=None), pm.predict(r.scenario, profile=None)) for r in sc_runs]
    assert input_floor(data) is None
    assert plausibility_penalty(data, "input_pipeline", -20.0) == 0.0
    data = [run_data(r, pm.resolve(r.scenario, profile=None), pm.predict(r.scenario, profile=None))
            for r in [_slow_kernels(0.5)]]
    # default loader: 4 bytes per token at 250 MB/s per GPU, 62.5 M tokens/s; on the fly 1.6 M
    assert input_floor(data) == pytest.approx(ON_THE_FLY_TOKENS_PER_S_PER_GPU / 62.5e6)
    assert plausibility_penalty(data, "peak_flops", 0.0) == 0.0
    import math
    assert plausibility_penalty(data, "peak_flops", math.log(OFF_TENSOR_CORE_FRAC / 2)) == pytest.approx(1.0)


def test_one_step_time_says_it_cannot_separate_the_levers():
    from perfmodel.present.diagnosis import diagnosis_text
    d = pm.diagnose([_slow_kernels(0.5)], profile=None)
    assert "cannot separate the causes" in d.separation_note and "--trace" in d.separation_note
    assert "Note: one step time cannot separate" in diagnosis_text(d)
    assert d.to_dict()["separation_note"] == d.separation_note
    timed = pm.observed_run(pm.parse_scenario(ONE_GPU), MeasuredRun(step_time_s=2.0, timers_s={"optimizer": 0.1}))
    assert pm.diagnose([timed], profile=None).separation_note == ""
