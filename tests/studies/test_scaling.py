"""Scaling sweeps: per-point identities, strong and weak batches, knee, verdict, CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cli import main
from perfmodel.formulas.cost import marginal_usd_per_hour_saved
from perfmodel.formulas.counts import param_count
from perfmodel.formulas.goodput import checkpoint_state_bytes, goodput_fraction
from perfmodel.present.verdicts import knee_text, scale_verdict_text
from perfmodel.spec.cost import CostModel
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.reliability import FailureModel
from perfmodel.spec.scenario import parse_scenario
from perfmodel.studies.scaling import find_knee, recommend, scale_sweep
from perfmodel.studies.search import SearchOptions, search

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


def test_each_point_is_the_best_search_result_with_goodput_and_cost():
    s = scen()
    state = checkpoint_state_bytes(param_count(s.model).total)
    base = STRONG.points[0]
    assert base.parallel_efficiency == 1.0
    for p in STRONG.points:
        assert p.ok and p.global_batch_size == 128
        best = search(s.model_copy(update={"num_gpus": p.num_gpus}), OPTS).best
        assert p.candidate.step_time_s == best.step_time_s
        g = goodput_fraction(p.num_gpus, state, FailureModel()).fraction
        assert 0 < p.goodput_frac <= 1 and p.goodput_frac == pytest.approx(g, rel=1e-12)
        assert p.ideal_time_s == pytest.approx(1e11 / p.tokens_per_s, rel=1e-12)
        assert p.time_to_solution_s == pytest.approx(p.ideal_time_s / p.goodput_frac, rel=1e-12)
        assert p.cost_usd == pytest.approx(p.num_gpus * p.time_to_solution_s / 3600 * PRICE, rel=1e-12)
        assert p.parallel_efficiency == pytest.approx(p.tokens_per_s_per_gpu / base.tokens_per_s_per_gpu)


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
    assert by_n[2].parallel_efficiency == 1.0 and by_n[16].parallel_efficiency > 0.5


def test_strong_scaling_skips_counts_where_the_batch_cannot_split():
    res = scale_sweep(scen(global_batch_size=8), [8, 1024], "strong", OPTS.model_copy(update={"max_cp": 1}))
    assert res.points[0].ok and not res.points[1].ok
    assert "does not divide global_batch_size(8)" in res.points[1].skipped_reason


def test_knee_is_the_first_count_below_the_threshold():
    eff = [p.parallel_efficiency for p in STRONG.points]
    thr = float(np.median(eff))
    knee = find_knee(STRONG.points, thr)
    first = next(p for p in STRONG.points if p.parallel_efficiency < thr)
    assert knee.num_gpus == first.num_gpus and knee.rule == "efficiency" and "parallel efficiency" in knee_text(knee)
    none = find_knee(STRONG.points, 1e-6)
    assert (none.num_gpus, none.rule, knee_text(none)) == (None, None, "")


def test_knee_by_value_of_time():
    mcs = [p.marginal_usd_per_hour_saved for p in STRONG.points[1:]]
    vot = float(np.median(mcs))
    knee = find_knee(STRONG.points, 1e-6, vot)
    i = next(i for i, p in enumerate(STRONG.points[1:], 1) if p.marginal_usd_per_hour_saved > vot)
    assert knee.num_gpus == STRONG.points[i].num_gpus and knee.rule == "value_of_time"
    assert "each hour saved costs" in knee_text(knee)


def test_verdicts():
    pts = STRONG.points
    v = recommend(pts, 0.8, None, deadline_s=pts[2].time_to_solution_s * 1.0001)
    meets = [p for p in pts if p.time_to_solution_s <= pts[2].time_to_solution_s * 1.0001]
    assert v.num_gpus == min(meets, key=lambda p: p.cost_usd).num_gpus and "deadline" in scale_verdict_text(v)
    v = recommend(pts, 0.8, None, deadline_s=1.0)
    assert v.num_gpus == pts[-1].num_gpus and scale_verdict_text(v).startswith("no count meets")
    vot_h = 500.0
    v = recommend(pts, 0.8, vot_h, None)
    want = min(pts, key=lambda p: p.cost_usd + vot_h / 3600 * p.time_to_solution_s)
    assert v.num_gpus == want.num_gpus and scale_verdict_text(v).startswith(
        f"{want.num_gpus} GPUs minimise cost + time")
    v = recommend(pts, 0.8, None, None)
    assert v.num_gpus == [p for p in pts if p.parallel_efficiency >= 0.8][-1].num_gpus


@settings(max_examples=8, deadline=None)
@given(rate=st.floats(0.0, 1e-3), restart=st.floats(0.0, 3600.0))
def test_goodput_in_unit_interval_and_time_never_below_ideal(rate, restart):
    fm = FailureModel(gpu_failures_per_gpu_hour=rate, restart_s=restart)
    res = scale_sweep(scen(), [8, 64], "strong", OPTS, failure_model=fm)
    for p in res.points:
        assert 0 < p.goodput_frac <= 1
        assert p.time_to_solution_s >= p.ideal_time_s


def test_tco_mode_costs_more_than_energy_alone():
    res = scale_sweep(scen(), [8, 16], "strong", OPTS, CostModel(mode="tco"))
    assert all(p.cost_usd > 0 and p.energy_kwh > 0 for p in res.points)


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
    assert main(args + ["--deadline-days", "1000"]) == 0
    assert "verdict:" in capsys.readouterr().out
    assert main(["scale", str(path), "--gpus", "8,x", "--no-profile"]) == 2
