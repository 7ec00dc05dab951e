"""Start-up, the share of a run that trains, and the goodput waterfall: hand-computed cases, the
Llama 3 interruption rate through a whole prediction, and properties."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import scenario
from support import spec_predict as predict

from perfmodel.formulas.goodput import (
    WATERFALL_STAGES,
    checkpoint_state_bytes,
    expected_interruptions,
    goodput_fraction,
    job_goodput,
    startup_s,
    training_time_frac,
    waterfall,
)
from perfmodel.spec.reliability import FailureModel

DAY = 86400.0


def test_startup_and_training_share_hand_computed():
    """S = 300 s launch + 600 s compile + 10 x 5 s warm-up = 950 s. A run of T = 10 days (864,000 s)
    at failure goodput g = 0.95 lasts W = 864,000 / 0.95 + 950 = 910,423.7 s, so
    T / W = 864,000 / 910,423.7 = 0.949008."""
    s = startup_s(300.0, 600.0, 10, 5.0)
    assert s == 950.0
    frac = training_time_frac(10 * DAY, 0.95, s)
    assert frac == pytest.approx(864_000 / (864_000 / 0.95 + 950), rel=1e-12)
    assert frac == pytest.approx(0.949008, rel=1e-6)
    # no run to amortise over (no training tokens): the failure goodput alone
    assert training_time_frac(0.0, 0.95, s) == 0.95


def test_waterfall_hand_computed_and_its_parts_multiply_to_the_whole():
    """8 GPUs at 989 TFLOP/s: peak 7.912 PFLOP/s. One step of F = 4e16 FLOP takes 8 s of kernels,
    1.5 s of bubble and communication, 0.5 s of other overheads: achieved 4e16 / 8 = 5e15,
    after stalls 4e16 / 9.5 = 4.2105e15, after overheads 4e16 / 10 = 4e15 (MFU 0.50556); failure
    goodput 0.95 leaves 3.8e15, start-up share 0.99 leaves 3.762e15 = 0.47548 of peak."""
    levels = waterfall(8 * 989e12, 4e16, 8.0, 1.5, 0.5, 0.95, 0.99)
    assert tuple(levels) == WATERFALL_STAGES
    want = (7.912e15, 5e15, 4e16 / 9.5, 4e15, 3.8e15, 3.762e15)
    assert [levels[s] for s in WATERFALL_STAGES] == pytest.approx(want, rel=1e-12)
    kept = [levels[b] / levels[a] for a, b in zip(WATERFALL_STAGES, WATERFALL_STAGES[1:])]
    assert math.prod(kept) == pytest.approx(levels["useful"] / levels["peak"], rel=1e-12)
    assert levels["useful"] / levels["peak"] == pytest.approx(0.475480, rel=1e-5)


LLAMA3 = dict(hardware="h100-sxm", num_gpus=16_384, model="llama3-405b", seq_length=8192, global_batch_size=2048,
              micro_batch_size=1, parallelism=dict(tp=8, pp=16, vpp=1, cp=1, zero_stage=1), recompute="none",
              training_tokens=15.6e12)


def test_llama3_interruption_rate_through_a_prediction():
    """Llama 3 405B on 16,384 H100s (Llama Team 2024, sec. 3.3.4: 419 unexpected interruptions in
    54 days). The default rate gives 419 interruptions in those 54 days; with 405.85e9 parameters
    the checkpoint is 5.682 TB, delta = 5.682 TB / 2 TB/s = 2.841 s, M = 1 / (16,384 x 1.9733e-5 / h)
    = 11,135 s, tau = sqrt(2 x 2.841 x 11,135) = 251.5 s, R = 300 + 2.841 s; overheads
    0.011296 + 0.011293 + 0.027197 = 0.049786, goodput 1 / 1.049786 = 0.95258. The waterfall's
    failure stage keeps exactly that share of the MFU stage, and the stages multiply to goodput_frac."""
    assert expected_interruptions(16_384, 54 * DAY, FailureModel()) == pytest.approx(419.0, rel=1e-9)
    p = predict(predict_scenario := scenario_of(LLAMA3))
    g = goodput_fraction(16_384, checkpoint_state_bytes(p.model_params_total)).fraction
    assert g == pytest.approx(0.95258, abs=2e-5)
    levels = {s["stage"]: s["flop_per_s"] for s in p.goodput_waterfall}
    assert levels["after_failures_and_checkpoints"] / levels["after_step_overheads"] == pytest.approx(g, rel=1e-12)
    assert levels["after_step_overheads"] == pytest.approx(p.mfu * levels["peak"], rel=1e-12)
    assert levels["peak"] == pytest.approx(16_384 * 989.4e12, rel=1e-3)
    kept = [levels[b] / levels[a] for a, b in zip(WATERFALL_STAGES, WATERFALL_STAGES[1:])]
    assert math.prod(kept) == pytest.approx(p.goodput_frac, rel=1e-12)
    # start-up: 300 s launch and 10 warm-up steps, once in the run
    ideal = 15.6e12 / p.tokens_per_s
    assert p.time_to_train_s == pytest.approx(ideal / g + 300 + 10 * p.step_time_s, rel=1e-12)
    assert predict_scenario.reliability == FailureModel()


def scenario_of(data):
    from perfmodel.spec.scenario import parse_scenario
    return parse_scenario(data)


def test_every_stage_is_a_loss():
    p = predict(scenario(training_tokens=1e10))
    flops = [s["flop_per_s"] for s in p.goodput_waterfall]
    assert [s["stage"] for s in p.goodput_waterfall] == list(WATERFALL_STAGES)
    assert all(b <= a for a, b in zip(flops, flops[1:]))
    assert flops[-1] / flops[0] == pytest.approx(p.goodput_frac, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(rate=st.floats(0.0, 1e-2), factor=st.floats(1.0, 100.0), restart=st.floats(0.0, 7200.0),
       n=st.sampled_from([8, 64, 1024, 16_384]), launch=st.floats(0.0, 1e5), tokens=st.floats(1e6, 1e13))
def test_goodput_in_unit_interval_and_higher_failure_rates_never_raise_it(rate, factor, restart, n, launch, tokens):
    """For any failure rate, restart and start-up: goodput in [0, 1], and a higher failure rate
    (per GPU) never raises goodput, failure goodput or the share of the run that trains."""
    base = dict(num_gpus=n, global_batch_size=64 * max(1, n // 16), parallelism=dict(tp=2, pp=2, vpp=1),
                training_tokens=tokens, startup={"launch_s": launch})
    a = predict(scenario(**base, reliability={"gpu_failures_per_gpu_hour": rate, "restart_s": restart}))
    b = predict(scenario(**base, reliability={"gpu_failures_per_gpu_hour": min(rate * factor, 1e3) or 1e-9,
                                              "restart_s": restart}))
    for p in (a, b):
        assert 0.0 <= p.goodput_frac <= p.mfu <= 1.0
        assert 0.0 < p.training_time_frac <= 1.0
    assert b.goodput_frac <= a.goodput_frac and b.training_time_frac <= a.training_time_frac
    ga = job_goodput(n, a.model_params_total, FailureModel(gpu_failures_per_gpu_hour=rate, restart_s=restart))
    assert a.training_time_frac <= ga.fraction
