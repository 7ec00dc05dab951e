"""Scaling sweeps: per-point identities, strong and weak batches, the knee, and verdicts on sweeps
whose right answer is computed by hand."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import spec_predict as predict

from perfmodel.cli import main
from perfmodel.formulas.cost import marginal_usd_per_hour_saved
from perfmodel.present.verdicts import knee_text, scale_verdict_text
from perfmodel.spec.cost import CostModel
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.reliability import FailureModel
from perfmodel.spec.scenario import parse_scenario
from perfmodel.studies.search.scaling import ScalingPoint, find_knee, recommend, scale_sweep
from perfmodel.studies.search.search import SearchOptions, search

SMALL = dict(name="small", num_layers=8, hidden_size=1024, num_attention_heads=16, ffn_hidden_size=4096,
             vocab_size=32000)
COUNTS = [8, 16, 32, 64, 128]
OPTS = SearchOptions(recompute=("none", "selective"), max_micro_batch_size=2)
PRICE = load_hardware("h100-sxm").price.cloud_usd_per_gpu_hour


def scen(**over):
    base = dict(hardware="h100-sxm", num_gpus=8, model=dict(SMALL), seq_length=2048, global_batch_size=128,
                training_tokens=1e11)
    base.update(over)
    return parse_scenario(base)


STRONG = scale_sweep(scen(), COUNTS, "strong", OPTS)


def test_each_point_is_the_best_layouts_prediction():
    """Every figure of a point is ``predict`` of the best layout the search finds at that count;
    parallel efficiency is against the best goodput-adjusted tokens/s per GPU of the sweep."""
    s = scen()
    best_goodput = max(p.tokens_per_s_per_gpu * p.training_time_frac for p in STRONG.points)
    assert max(p.parallel_efficiency for p in STRONG.points) == 1.0
    for p in STRONG.points:
        assert p.ok and p.global_batch_size == 128
        best = search(s.model_copy(update={"num_gpus": p.num_gpus}), OPTS).best
        assert p.candidate.step_time_s == best.step_time_s
        want = predict(best.scenario)
        assert p.time_to_solution_s == want.time_to_train_s == best.time_to_train_s
        assert p.goodput_frac == want.goodput_frac and 0 < p.goodput_frac <= p.candidate.mfu
        assert p.band == want.band
        assert p.ideal_time_s == pytest.approx(1e11 / p.tokens_per_s, rel=1e-12)
        assert p.time_to_solution_s == pytest.approx(p.ideal_time_s / p.training_time_frac, rel=1e-12)
        assert p.cost_usd == pytest.approx(p.num_gpus * p.time_to_solution_s / 3600 * PRICE, rel=1e-12)
        assert p.useful_tokens_per_usd == pytest.approx(1e11 / p.cost_usd, rel=1e-12)
        assert p.parallel_efficiency == pytest.approx(p.tokens_per_s_per_gpu * p.training_time_frac / best_goodput)


def test_efficiency_is_useful_tokens_per_dollar_relative_to_the_best():
    """For one hardware and price, cost = N W p = tokens p / (goodput tokens/s per GPU), so the
    two ratios are one number."""
    best = max(p.useful_tokens_per_usd for p in STRONG.points)
    for p in STRONG.points:
        assert p.useful_tokens_per_usd / best == pytest.approx(p.parallel_efficiency, rel=1e-9)


def test_marginal_cost_between_consecutive_counts():
    pts = STRONG.points
    assert pts[0].marginal_usd_per_hour_saved is None
    for a, b in zip(pts, pts[1:]):
        want = marginal_usd_per_hour_saved(a.cost_usd, a.time_to_solution_s, b.cost_usd, b.time_to_solution_s)
        assert b.marginal_usd_per_hour_saved == pytest.approx(want)


def test_weak_scaling_grows_the_batch_and_skips_fractions():
    res = scale_sweep(scen(num_gpus=64, global_batch_size=96), [1, 2, 8, 16], "weak", OPTS)
    by_n = {p.num_gpus: p for p in res.points}
    assert by_n[2].global_batch_size == 3 and by_n[16].global_batch_size == 24
    assert not by_n[1].ok and "= 1.5 is not a whole number" in by_n[1].skipped_reason
    assert max(p.parallel_efficiency for p in res.runnable()) == 1.0
    assert all(0 < p.parallel_efficiency <= 1 for p in res.runnable())


def test_strong_scaling_skips_counts_where_the_batch_cannot_split():
    res = scale_sweep(scen(global_batch_size=8), [8, 1024], "strong", OPTS.model_copy(update={"max_cp": 1}))
    assert res.points[0].ok and not res.points[1].ok
    assert "does not divide global_batch_size(8)" in res.points[1].skipped_reason


# --- hand-computed sweeps ----------------------------------------------------------------------
P = 2.0
"""USD per GPU-hour of the hand-computed sweeps."""
H = 3600.0


def point(n: int, hours: float, tokens: float = 1e9) -> ScalingPoint:
    """A runnable point of N GPUs that trains ``tokens`` in ``hours``: cost N W p, goodput-adjusted
    tokens/s per GPU tokens / (N W)."""
    w = hours * H
    cost = n * hours * P
    return ScalingPoint(n, 1024, candidate=object(), tokens_per_s=tokens / w, tokens_per_s_per_gpu=tokens / w / n,
                        training_time_frac=1.0, goodput_tokens_per_s_per_gpu=tokens / w / n, goodput_frac=0.4,
                        time_to_solution_s=w, cost_usd=cost, useful_tokens_per_usd=tokens / cost)


def sweep(*pairs) -> list[ScalingPoint]:
    """Points with efficiency against the best and marginal costs, as ``scale_sweep`` fills them."""
    pts = [point(n, h) for n, h in pairs]
    best = max(p.goodput_tokens_per_s_per_gpu for p in pts)
    out, prev = [], None
    for p in pts:
        m = None if prev is None else float(marginal_usd_per_hour_saved(prev.cost_usd, prev.time_to_solution_s,
                                                                           p.cost_usd, p.time_to_solution_s))
        p = ScalingPoint(**{**p.__dict__, "parallel_efficiency": p.goodput_tokens_per_s_per_gpu / best,
                            "marginal_usd_per_hour_saved": m})
        out.append(prev := p)
    return out


# 64 GPUs for 100 h = $12,800; 128 for 80 h = $20,480; 256 for 75 h = $38,400.
# Marginal $/h saved: 64 -> 128: (20,480 - 12,800) / 20 h = $384/h; 128 -> 256: 17,920 / 5 h = $3,584/h;
# 64 -> 256: 25,600 / 25 h = $1,024/h. Efficiency (tokens / (N W), best at 64): 1, 6,400 / 10,240 = 0.625,
# 6,400 / 19,200 = 0.333.
DIMINISHING = sweep((64, 100.0), (128, 80.0), (256, 75.0))


def test_adding_gpus_never_pays_at_a_low_value_of_time():
    """V = $100/h: C + V W is 12,800 + 10,000 = 22,800 at 64 GPUs, 28,480 at 128, 45,900 at 256:
    64 GPUs, and the cheapest hour the next count would buy costs $384 > $100."""
    v = recommend(DIMINISHING, 0.8, 100.0, None)
    assert (v.num_gpus, v.rule, v.next_point.num_gpus) == (64, "value_of_time", 128)
    assert v.marginal_usd_per_hour_saved == pytest.approx(384.0)
    assert v.previous_point is None
    assert scale_verdict_text(v).startswith("64 GPUs: ") and "$384.00 > $100.00/h" in scale_verdict_text(v)


def test_the_value_of_time_moves_the_recommendation():
    """V = $1,000/h: 112,800 at 64, 100,480 at 128, 113,400 at 256: 128 GPUs. Each hour it saves over
    64 GPUs costs $384 <= $1,000; the hours 256 GPUs would save cost $3,584 each."""
    v = recommend(DIMINISHING, 0.8, 1000.0, None)
    assert (v.num_gpus, v.previous_point.num_gpus, v.next_point.num_gpus) == (128, 64, 256)
    assert v.marginal_from_previous_usd_per_hour == pytest.approx(384.0)
    assert v.marginal_usd_per_hour_saved == pytest.approx(3584.0)
    assert "each hour saved over 64 GPUs costs $384.00 <= your $1.0k/h" in scale_verdict_text(v)
    # V = $5,000/h: 512,800 / 420,480 / 413,400: 256 GPUs, the fastest in the sweep
    v = recommend(DIMINISHING, 0.8, 5000.0, None)
    assert (v.num_gpus, v.next_point) == (256, None) and "try larger ones" in scale_verdict_text(v)


def test_more_gpus_that_are_no_faster_are_never_recommended():
    """128 and 256 GPUs take as long as 64 (100 h) and cost 2x and 4x: whatever the value of time,
    64 GPUs; the knee is at 128 (useful tokens per dollar 0.5 of the best)."""
    flat = sweep((64, 100.0), (128, 100.0), (256, 100.0))
    for vot in (1.0, 1e3, 1e6):
        v = recommend(flat, 0.8, vot, None)
        assert (v.num_gpus, v.next_point.num_gpus, v.marginal_usd_per_hour_saved) == (64, 128, None)
        assert scale_verdict_text(v).endswith("128 GPUs are no faster")
    knee = find_knee(flat, 0.8)
    assert (knee.num_gpus, knee.rule, knee.best.num_gpus) == (128, "tokens_per_usd", 64)
    assert "0.50 of the best (64 GPUs) < threshold 0.80" in knee_text(knee)


def test_efficiency_against_the_best_count_not_the_smallest():
    """Without a value of time or a deadline: the largest count at >= 0.8 of the best goodput per
    GPU. Here 16 GPUs are the best (1.0); 8 GPUs reach 0.5, 32 reach 0.9, 64 reach 0.6. Measured
    against the smallest count (8), 64 GPUs would be at 1.2 and recommended."""
    pts = sweep((8, 100.0), (16, 25.0), (32, 50.0 / 3.6), (64, 25.0 / 2.4))
    assert [round(p.parallel_efficiency, 3) for p in pts] == [0.5, 1.0, 0.9, 0.6]
    v = recommend(pts, 0.8, None, None)
    assert (v.num_gpus, v.rule, v.reference.num_gpus, v.next_point.num_gpus) == (32, "efficiency", 16, 64)
    assert "0.90 >= 0.80 of the best (16 GPUs)" in scale_verdict_text(v)
    knee = find_knee(pts, 0.8)
    assert (knee.num_gpus, knee.rule) == (64, "tokens_per_usd")


def test_deadlines():
    """Deadline 90 h: 128 (80 h, $20,480) and 256 (75 h) are on time; the cheapest is 128. With
    V = $100/h as well, 128's hours over 64 cost $384 each > $100: no count serves both. With
    V = $1,000/h, 128 serves both. Deadline 50 h: no count meets it; the fastest is 256."""
    v = recommend(DIMINISHING, 0.8, None, 90 * H)
    assert (v.num_gpus, v.rule) == (128, "cheapest_on_time")
    v = recommend(DIMINISHING, 0.8, 100.0, 90 * H)
    assert (v.num_gpus, v.rule, v.chosen.num_gpus, v.previous_point.num_gpus) == (None, "deadline_not_worth", 128, 64)
    assert v.marginal_from_previous_usd_per_hour == pytest.approx(384.0)
    assert scale_verdict_text(v).startswith("no count serves both the deadline and the value of time")
    v = recommend(DIMINISHING, 0.8, 1000.0, 90 * H)
    assert (v.num_gpus, v.rule) == (128, "value_of_time")
    v = recommend(DIMINISHING, 0.8, 1000.0, 50 * H)
    assert (v.num_gpus, v.rule, v.chosen.num_gpus) == (None, "deadline_missed", 256)
    assert scale_verdict_text(v).startswith("no count serves: none meets the 2.1 d deadline")


def test_no_count_runs():
    v = recommend([ScalingPoint(8, 8, None, "no layout")], 0.8, 100.0, None)
    assert (v.num_gpus, v.rule) == (None, "none_runs")


def test_knee_by_value_of_time():
    """V = $1,000/h: 64 -> 128 costs $384/h, 128 -> 256 $3,584/h > V: the knee is 256."""
    knee = find_knee(DIMINISHING, 0.1, 1000.0)
    assert (knee.num_gpus, knee.rule, knee.previous.num_gpus) == (256, "value_of_time", 128)
    assert "each hour saved costs $3.6k > value of time $1.0k/h" in knee_text(knee)


hours = st.lists(st.floats(0.1, 1e4), min_size=1, max_size=7)


@settings(max_examples=200, deadline=None)
@given(hours=hours, v1=st.floats(0.0, 1e7), v2=st.floats(0.0, 1e7), deadline_h=st.none() | st.floats(0.1, 1e4))
def test_a_larger_value_of_time_never_recommends_fewer_gpus(hours, v1, v2, deadline_h):
    """Any sweep (counts 8, 16, 32, ...; any times; cost N W p): the count recommended never has a
    marginal $/hour saved over any slower count above the value of time, and a larger value of
    time never recommends fewer GPUs."""
    pts = sweep(*((8 * 2 ** k, h) for k, h in enumerate(hours)))
    lo, hi = sorted((v1, v2))
    deadline = None if deadline_h is None else deadline_h * H
    a, b = recommend(pts, 0.8, lo, deadline), recommend(pts, 0.8, hi, deadline)
    for v, vot in ((a, lo), (b, hi)):
        if v.num_gpus is None:
            continue
        for q in pts:
            if q.time_to_solution_s > v.chosen.time_to_solution_s:
                m = (v.chosen.cost_usd - q.cost_usd) / ((q.time_to_solution_s - v.chosen.time_to_solution_s) / H)
                assert m <= vot * (1 + 1e-9) + 1e-9
    if a.num_gpus is not None and b.num_gpus is not None:
        assert b.num_gpus >= a.num_gpus


@settings(max_examples=8, deadline=None)
@given(rate=st.floats(0.0, 1e-3), restart=st.floats(0.0, 3600.0))
def test_goodput_in_unit_interval_and_time_never_below_ideal(rate, restart):
    fm = FailureModel(gpu_failures_per_gpu_hour=rate, restart_s=restart)
    res = scale_sweep(scen(), [8, 64], "strong", OPTS, failure_model=fm)
    for p in res.points:
        assert 0 < p.goodput_frac <= 1 and 0 < p.training_time_frac <= 1
        assert p.time_to_solution_s >= p.ideal_time_s


def test_tco_mode_costs_more_than_energy_alone():
    res = scale_sweep(scen(), [8, 16], "strong", OPTS, CostModel(mode="tco"))
    assert all(p.cost_usd > 0 and p.energy_kwh > 0 for p in res.points)


def test_the_scenario_sections_apply_unless_overridden():
    """The scenario's reliability and cost sections are the sweep's defaults; arguments override them."""
    sc = scen(reliability={"restart_s": 3600.0, "gpu_failures_per_gpu_hour": 1e-3}, cost={"usd_per_gpu_hour": 1.0})
    own = scale_sweep(sc, [64], "strong", OPTS).points[0]
    assert own.cost_usd == pytest.approx(64 * own.time_to_solution_s / 3600 * 1.0, rel=1e-12)
    free = scale_sweep(sc, [64], "strong", OPTS, failure_model=FailureModel(gpu_failures_per_gpu_hour=0.0)).points[0]
    assert free.time_to_solution_s < own.time_to_solution_s


def test_the_scenario_purpose_is_the_default_target():
    """purpose.deadline_days and purpose.value_of_time_usd_per_day are pm.scale's defaults; the
    arguments override them."""
    import perfmodel as pm
    sc = scen(purpose={"deadline_days": 1e-3})
    v = pm.scale(sc, [8, 16], options=OPTS, profile=None).verdict
    assert v.rule == "deadline_missed" and v.deadline_s == pytest.approx(86.4)
    v = pm.scale(sc, [8, 16], options=OPTS, profile=None, deadline_s=1e9).verdict
    assert v.rule == "cheapest_on_time"
    v = pm.scale(scen(purpose={"value_of_time_usd_per_day": 2400.0}), [8, 16], options=OPTS, profile=None).verdict
    assert v.rule == "value_of_time" and v.value_of_time_usd_per_hour == pytest.approx(100.0)


def test_input_errors():
    with pytest.raises(InputError, match="training_tokens"):
        scale_sweep(scen(training_tokens=None), [8])
    with pytest.raises(InputError, match="mode"):
        scale_sweep(scen(), [8], "medium")
    with pytest.raises(InputError, match="gpus"):
        scale_sweep(scen(), [])


def test_cli_scale(tmp_path, capsys):
    import yaml
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(json.loads(scen().model_dump_json(exclude_none=True))))
    args = ["scale", str(path), "--gpus", "8,16,32", "--no-profile", "--max-micro-batch-size", "2"]
    assert main(args + ["--format", "json", "--value-of-time", "10000"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [p["num_gpus"] for p in out["points"]] == [8, 16, 32] and out["verdict"]["num_gpus"] in (8, 16, 32)
    assert set(out["points"][0]["band"]) == {"tokens_per_s_per_gpu", "step_time_s", "time_to_train_s", "cost_usd"}
    assert main(args + ["--deadline-days", "1000"]) == 0
    assert "verdict:" in capsys.readouterr().out
    assert main(args + ["--format", "json", "--set", "reliability.restart_s=7200", "--set", "cost.usd_per_gpu_hour=1"]) == 0
    out = json.loads(capsys.readouterr().out)
    p = out["points"][0]
    assert p["cost_usd"] == pytest.approx(8 * p["time_to_solution_s"] / 3600, rel=1e-12)
    assert main(["scale", str(path), "--gpus", "8,x", "--no-profile"]) == 2
