"""Cluster sizing: the cheapest count meeting deadline and budget, and the reasons for none."""

from __future__ import annotations

import json

import pytest

from perfmodel.cli import main
from perfmodel.present.verdicts import sizing_reason_text
from perfmodel.spec.cost import CostModel
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.scenario import parse_scenario
from perfmodel.studies.search.search import SearchOptions
from perfmodel.studies.search.sizing import size_cluster

SMALL = dict(name="small", num_layers=8, hidden_size=1024, num_attention_heads=16, ffn_hidden_size=4096,
             vocab_size=32000)
COUNTS = [8, 16, 32, 64]
OPTS = SearchOptions(recompute=("none",), max_micro_batch_size=2)
TOKENS = 1e11
HW = ["h100-sxm", "b200"]


def scen(**over):
    base = dict(hardware="h100-sxm", num_gpus=8, model=dict(SMALL), seq_length=2048, global_batch_size=128)
    base.update(over)
    return parse_scenario(base)


def size(**kw):
    kw.setdefault("hardware_ids", HW)
    kw.setdefault("gpu_counts", COUNTS)
    return size_cluster(scen(), TOKENS, options=OPTS, **kw).rows


FREE = size()


def test_unconstrained_choice_is_the_cheapest_option_per_hardware():
    assert [r.hardware_id for r in FREE] == HW
    for r in FREE:
        assert r.choice is not None and len(r.options) == len(COUNTS)
        assert r.choice.cost_usd == min(o.cost_usd for o in r.options)
        price = load_hardware(r.hardware_id).price.cloud_usd_per_gpu_hour
        for o in r.options:
            assert o.cost_usd == pytest.approx(o.num_gpus * o.time_to_train_s / 3600 * price, rel=1e-12)
            assert o.gpu_hours == pytest.approx(o.num_gpus * o.time_to_train_s / 3600, rel=1e-12)
            assert 0 < o.goodput_frac <= o.candidate.mfu and 0 < o.training_time_frac <= 1
            assert o.time_to_train_s == pytest.approx(TOKENS / o.candidate.tokens_per_s / o.training_time_frac)
            assert o.probability_met is None       # no deadline, no budget


def test_deadline_picks_the_cheapest_count_that_meets_it():
    h100 = FREE[0]
    times = sorted(o.time_to_train_s for o in h100.options)
    deadline = times[1] * 1.0001          # the two fastest counts qualify
    r = size(deadline_s=deadline, hardware_ids=["h100-sxm"])[0]
    ok = [o for o in h100.options if o.time_to_train_s <= deadline]
    assert r.choice.num_gpus == min(ok, key=lambda o: o.cost_usd).num_gpus
    assert sizing_reason_text(r).startswith("cheapest count")


def test_reasons_when_nothing_qualifies():
    h100 = FREE[0]
    fastest = min(h100.options, key=lambda o: o.time_to_train_s)
    cheapest = min(h100.options, key=lambda o: o.cost_usd)
    r = size(deadline_s=1.0, hardware_ids=["h100-sxm"])[0]
    assert r.choice is None and sizing_reason_text(r).startswith("fastest found: ")
    assert f"on {fastest.num_gpus} GPUs > deadline" in sizing_reason_text(r)
    r = size(budget_usd=cheapest.cost_usd / 2, hardware_ids=["h100-sxm"])[0]
    assert r.choice is None and sizing_reason_text(r).startswith("cheapest found: ") and "> budget" in sizing_reason_text(r)
    r = size(deadline_s=fastest.time_to_train_s * 1.0001, budget_usd=cheapest.cost_usd * 1.0001,
             hardware_ids=["h100-sxm"])[0]
    if fastest is cheapest:
        assert r.choice.num_gpus == fastest.num_gpus
    else:
        assert r.choice is None and sizing_reason_text(r).startswith("meeting the ")


def test_probability_of_meeting_the_deadline_and_budget():
    """Time and cost both scale with e^r, r = log(predicted / measured) rate: P(on time and in
    budget) = P(r <= min(log(D / W), log(B / C))). A deadline exactly at the prediction is met when
    r <= 0; a budget at p90 of the cost band holds 90% of the time (deadline far away)."""
    from perfmodel.engine.band import band_for
    from perfmodel.spec.model import ModelSpec
    band = band_for(load_hardware("h100-sxm"), ModelSpec(**SMALL))
    h100 = FREE[0]
    c = h100.choice
    r = size(deadline_s=c.time_to_train_s, hardware_ids=["h100-sxm"])[0]
    assert r.choice.num_gpus == c.num_gpus and r.choice.probability_met == pytest.approx(band.cdf(0.0))
    p90 = c.band["cost_usd"]["p90"]
    r = size(deadline_s=1e3 * c.time_to_train_s, budget_usd=p90, hardware_ids=["h100-sxm"])[0]
    assert r.choice.num_gpus == c.num_gpus and r.choice.probability_met == pytest.approx(0.9, abs=1e-9)
    assert r.to_dict()["probability_met"] == r.choice.probability_met


def test_buy_or_rent_side_by_side():
    """Rent = N W p; own = N W (C (1 + o) / (Y 8766 u) + P a PUE e / 1000); buying breaks even after
    h = C (1 + o) / (p - P a PUE e / 1000) GPU-hours per GPU, at utilisation h / (Y 8766) over the
    life, or after h / (u 730.5) months. H100: C = $33,750, o = 0.23, p = $6.88, P = 1,275 W,
    a = 0.75, PUE 1.25, e = $0.08/kWh: energy 0.0956 $/h, h = 41,512.5 / 6.7844 = 6,118.8 GPU-hours,
    utilisation 6,118.8 / 35,064 = 17.5%, 6,118.8 / (0.8 x 730.5) = 10.47 months."""
    hw = load_hardware("h100-sxm")
    r = FREE[0]
    b, c = r.buy_vs_rent, r.choice
    assert b.num_gpus == c.num_gpus
    assert b.rent_usd == pytest.approx(c.num_gpus * c.time_to_train_s / 3600 * hw.price.cloud_usd_per_gpu_hour)
    C, p = hw.price.purchase_usd_per_gpu, hw.price.cloud_usd_per_gpu_hour
    energy = hw.power.power_per_gpu_w * 0.75 * 1.25 * 0.08 / 1000
    owned = C * 1.23 / (4 * 8766 * 0.8) + energy
    assert b.tco_usd == pytest.approx(c.num_gpus * c.time_to_train_s / 3600 * owned, rel=1e-12)
    h = C * 1.23 / (p - energy)
    assert b.break_even_gpu_hours == pytest.approx(h, rel=1e-12)
    assert b.break_even_utilisation_frac == pytest.approx(h / (4 * 8766), rel=1e-12)
    assert b.break_even_months == pytest.approx(h / (0.8 * 8766 / 12), rel=1e-12)
    if (C, p, hw.power.power_per_gpu_w) == (33750, 6.88, 1275):
        assert (round(h, 1), round(b.break_even_utilisation_frac, 3), round(b.break_even_months, 2)) == \
            (6118.8, 0.175, 10.47)


def test_the_scenario_purpose_is_the_default_target():
    import perfmodel as pm
    sc = scen(purpose={"deadline_days": 1e-5, "budget_usd": 1.0})
    r = pm.size(sc, TOKENS, hardware_ids=["h100-sxm"], gpu_counts=[8], options=OPTS, profile=None).rows[0]
    assert (r.rule, r.budget_usd) == ("deadline_missed", 1.0) and r.deadline_s == pytest.approx(0.864)
    r = pm.size(sc, TOKENS, hardware_ids=["h100-sxm"], gpu_counts=[8], options=OPTS, profile=None,
                deadline_s=1e9, budget_usd=1e9).rows[0]
    assert r.rule == "cheapest"


def test_unsupported_precision_says_why():
    r = size_cluster(scen(precision="fp4"), TOKENS, hardware_ids=["h100-sxm"], gpu_counts=[8], options=OPTS).rows[0]
    assert r.choice is None and "no dense fp4" in sizing_reason_text(r)


def test_tco_prices_apply():
    r = size(cost_model=CostModel(mode="tco"), hardware_ids=["h100-sxm"])[0]
    assert r.choice.cost_usd < FREE[0].choice.cost_usd * 10   # sane, and positive
    assert r.choice.cost_usd > 0


def test_input_errors():
    with pytest.raises(InputError, match="tokens"):
        size_cluster(scen(), 0)
    with pytest.raises(InputError, match="deadline"):
        size_cluster(scen(), TOKENS, deadline_s=-1)
    with pytest.raises(InputError, match="hardware"):
        size_cluster(scen(), TOKENS, hardware_ids=["nope"], gpu_counts=[8])


def test_cli_size(tmp_path, capsys):
    import yaml
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(json.loads(scen().model_dump_json(exclude_none=True))))
    base = ["size", str(path), "--tokens", "1e11", "--hardware", "h100-sxm,b200", "--gpus", "8,16",
            "--recompute", "none", "--no-profile"]
    assert main(base + ["--format", "json", "--deadline-days", "30"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [r["hardware"] for r in rows] == HW and all(r["num_gpus"] in (8, 16) for r in rows)
    assert all(r["buy_vs_rent"]["rent_usd"] > 0 and 0.05 <= r["probability_met"] <= 0.95 for r in rows)
    assert main(base + ["--budget-usd", "1"]) == 0
    assert "> budget $1.00" in capsys.readouterr().out
    assert main(["size", str(path), "--tokens", "-5", "--no-profile"]) == 2


def test_the_dense_100t_preset_gets_an_answer_or_a_reason_in_seconds(tmp_path, capsys):
    """issue 37: ``perfmodel size`` on gpt-100t (Chinchilla's 20 tokens per parameter, 2e15,
    a one-year deadline) at 65,536, 262,144 and 1,048,576 GPUs answers within 10 s: where
    nothing fits it says so, and where something runs it names the count that misses the
    deadline. By hand, the FLOPs alone make the year impossible: 6 * 99.693e12 * 2e15 = 1.196e30
    FLOP over 1,048,576 Rubin Ultra packages at their 17,361 TFLOP/s BF16 dense peak take
    6.57e7 s, 2.08 years, at 100% of peak; the model's fastest is slower than that bound."""
    import time
    scenario = tmp_path / "gpt100t.yaml"
    scenario.write_text("name: gpt-100t\nhardware: gb200-nvl72\nnum_gpus: 65536\nmodel: gpt-100t\n"
                        "seq_length: 8192\nglobal_batch_size: 65536\n")
    t0 = time.monotonic()
    code = main(["size", str(scenario), "--tokens", "2e15", "--deadline-days", "365", "--format", "json",
                 "--gpus", "65536,262144,1048576", "--hardware", "h100-sxm,gb200-nvl72,rubin-ultra-nvl576",
                 "--no-progress"])
    elapsed = time.monotonic() - t0
    assert code == 0 and elapsed < 10.0, elapsed
    rows = {r["hardware"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["h100-sxm"]["rule"] == "none_runs" and rows["h100-sxm"]["none_reason"] == "does not fit in memory"
    for hw in ("gb200-nvl72", "rubin-ultra-nvl576"):
        assert rows[hw]["rule"] == "deadline_missed" and rows[hw]["binding_num_gpus"] == 1_048_576
    import perfmodel as pm
    row = pm.size(pm.load_scenario(scenario), 2e15, deadline_s=365 * 86400, hardware_ids=["rubin-ultra-nvl576"],
                  gpu_counts=[1_048_576]).rows[0]
    flop_bound_s = 6 * 99.693e12 * 2e15 / (1_048_576 * 17_361e12)
    assert flop_bound_s == pytest.approx(6.57e7, rel=1e-3)
    assert row.binding.time_to_train_s > flop_bound_s > 365 * 86400


def test_processes_give_the_rows_of_one_process():
    """``workers`` sizes hardware types in processes of their own: the same rows in the same
    order, progress counted per hardware type; a worker count below 1 is an error."""
    hw = ["h100-sxm", "b200", "mi300x"]
    seen = []
    one = size_cluster(scen(), TOKENS, options=OPTS, hardware_ids=hw, gpu_counts=COUNTS, deadline_s=30 * 86400)
    two = size_cluster(scen(), TOKENS, options=OPTS, hardware_ids=hw, gpu_counts=COUNTS, deadline_s=30 * 86400,
                       workers=2, progress=lambda done, total: seen.append((done, total)))
    assert json.dumps(one.to_dict()) == json.dumps(two.to_dict())
    assert seen == [(4, 12), (8, 12), (12, 12)]
    # with another thread running (the app's server), the processes start afresh instead of forking
    import threading
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        fresh = size_cluster(scen(), TOKENS, options=OPTS, hardware_ids=hw, gpu_counts=COUNTS, deadline_s=30 * 86400,
                             workers=2)
    finally:
        stop.set()
        other.join()
    assert json.dumps(fresh.to_dict()) == json.dumps(one.to_dict())
    for bad in (0, -1, 1.5, True):
        with pytest.raises(InputError, match="workers"):
            size_cluster(scen(), TOKENS, options=OPTS, hardware_ids=hw, gpu_counts=COUNTS, workers=bad)


def test_cli_jobs_option(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(scen().model_dump(mode="json", exclude_none=True)))
    args = ["size", str(path), "--hardware", "h100-sxm,b200", "--gpus", "8,16", "--tokens", "1e11", "--format", "json"]
    assert main(args + ["--jobs", "1"]) == 0
    one = capsys.readouterr().out
    assert main(args + ["--jobs", "2"]) == 0
    assert capsys.readouterr().out == one
    assert main(args + ["--jobs", "0"]) == 2
    assert capsys.readouterr().err.strip() == "perfmodel: error: --jobs: must be a whole number of processes >= 1, got 0"
