"""Pipeline schedules end to end: ``pm.predict`` on every schedule, the rules that state each
one's preconditions, the schedule as a searched (and pinnable) layout dimension that gives
``predict``'s numbers, the scenario round trip and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support import spec_predict as predict
from support import with_software

import perfmodel as pm
from perfmodel.cli import main
from perfmodel.engine.rules import check_layout
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.scenario import PIPELINE_SCHEDULES, model_of, parse_scenario, scenario_to_dict
from perfmodel.studies.bench import BENCH_SCENARIO, WIDE_OPTIONS
from perfmodel.studies.search.search import SearchOptions, search

H100 = load_hardware("h100-sxm")
VPP = {"1f1b": 1, "interleaved": 2, "zb-h1": 1, "zb-h2": 1, "zb-v": 2, "dualpipe": 1, "dualpipe-v": 2}
TINY_MOE = dict(name="tiny-moe", num_layers=8, hidden_size=256, num_attention_heads=8, num_query_groups=4,
                ffn_hidden_size=1024, gated_mlp=True, vocab_size=1000,
                moe=dict(num_experts=8, top_k=2, expert_ffn_hidden_size=512))


def gpt3(schedule=None, **par):
    p = dict(tp=8, pp=8, vpp=VPP.get(schedule, 1)) | par
    if schedule:
        p["pipeline_schedule"] = schedule
    return parse_scenario(dict(name="gpt3", hardware="h100-sxm", num_gpus=128, model="gpt3-175b", seq_length=2048,
                               global_batch_size=256, recompute="selective", parallelism=p))


def moe(num_gpus=16, **over):
    base = dict(hardware="h100-sxm", num_gpus=num_gpus, model=dict(TINY_MOE), seq_length=512, global_batch_size=64,
                training_tokens=1e9)
    return parse_scenario(with_software(base | over))


# ------------------------------------------------------------------------- predict
def test_predict_every_schedule():
    runs = {s: pm.predict(gpt3(s)) for s in PIPELINE_SCHEDULES}
    bubble = {s: r.breakdown_s["pipeline_bubble"] for s, r in runs.items()}
    # the zero-bubble family and DualPipe shrink 1F1B's bubble; zb-h1 keeps 1F1B's memory
    assert bubble["zb-h2"] < bubble["zb-h1"] < bubble["1f1b"]
    assert bubble["zb-v"] < bubble["interleaved"] and bubble["dualpipe"] < bubble["1f1b"]
    assert runs["zb-h1"].memory_per_gpu_bytes == runs["1f1b"].memory_per_gpu_bytes
    assert runs["zb-h2"].memory_per_gpu_bytes > runs["1f1b"].memory_per_gpu_bytes
    # DualPipe holds two stages of parameters per rank
    w1 = runs["1f1b"].memory_breakdown_bytes["weights"]
    w2 = runs["dualpipe"].memory_breakdown_bytes["weights"]
    assert 1.9 < w2 / w1 <= 2.1
    for r in runs.values():
        assert sum(r.breakdown_s.values()) == pytest.approx(r.step_time_s)


@pytest.mark.parametrize("vpp", [1, 2])
def test_omitted_schedule_is_the_default_to_the_last_bit(vpp):
    named = pm.predict(gpt3("1f1b" if vpp == 1 else "interleaved", vpp=vpp))
    omitted = pm.predict(gpt3(None, vpp=vpp))
    assert named.step_time_s == omitted.step_time_s
    assert named.breakdown_s == omitted.breakdown_s
    assert named.memory_per_gpu_bytes == omitted.memory_per_gpu_bytes


def test_dualpipe_hides_expert_all_to_all():
    """DualPipe pairs a forward chunk with another micro-batch's backward: the EP all-to-all
    hides whatever ``overlap.ep`` says (the default, 0, leaves it exposed under 1F1B)."""
    par = dict(tp=1, pp=2, ep=8)
    plain = predict(moe(parallelism=par))
    paired = predict(moe(parallelism=par | dict(pipeline_schedule="dualpipe")))
    assert paired.breakdown_s["ep_comm"] < plain.breakdown_s["ep_comm"]


# --------------------------------------------------------------------------- rules
@pytest.mark.parametrize("schedule, par, extra, field, reason", [
    ("zb-h1", dict(pp=1, tp=8), {}, "parallelism.pipeline_schedule",
     "zb-h1 is a pipeline schedule: it needs pp > 1 (pp = 1)"),
    ("zb-h2", dict(vpp=2), {}, "parallelism.pipeline_schedule",
     "zb-h2 runs one model chunk per rank: it needs vpp = 1 (vpp = 2)"),
    ("interleaved", dict(vpp=1), {}, "parallelism.pipeline_schedule",
     "interleaved runs several model chunks per rank: it needs vpp > 1 (vpp = 1)"),
    ("zb-v", dict(vpp=3), {}, "parallelism.pipeline_schedule",
     "zb-v runs two model chunks per rank in a V: it needs vpp = 2 (vpp = 3)"),
    ("dualpipe", dict(pp=4, tp=4), {"num_gpus": 48}, "parallelism.pipeline_schedule",
     None),
    ("zb-h1", dict(), {"global_batch_size": 12}, "global_batch_size", "zb-h1 needs micro-batches(6) >= pp(8)"),
    ("zb-v", dict(), {"global_batch_size": 28}, "global_batch_size",
     "zb-v needs micro-batches(14) >= 2 * pp(8) - 1 = 15"),
    ("dualpipe", dict(), {"global_batch_size": 30}, "global_batch_size",
     "dualpipe needs an even number of micro-batches >= 2 * pp(8) = 16; micro-batches = 15"),
    ("dualpipe-v", dict(), {"global_batch_size": 30}, "global_batch_size",
     "dualpipe-v needs micro-batches(15) >= 2 * pp(8) = 16"),
])
def test_schedule_preconditions_show_the_arithmetic(schedule, par, extra, field, reason):
    s = gpt3(schedule, **par)
    s = s.model_copy(update=extra)
    if reason is None:   # odd pp for dualpipe
        s = s.model_copy(update={"num_gpus": 24, "parallelism": s.parallelism.model_copy(update={"pp": 3, "tp": 8})})
        reason = "dualpipe feeds micro-batches in from both ends: it needs an even pp (pp = 3)"
    with pytest.raises(InputError) as err:
        check_layout(s, model_of(s), H100)
    assert (err.value.field, err.value.reason) == (field, reason)


def test_v_and_dualpipe_schedules_refuse_an_explicit_layout():
    s = gpt3("zb-v").model_copy(update={"num_gpus": 16})
    s = s.model_copy(update={"parallelism": s.parallelism.model_copy(update={"pp": 2, "tp": 8}),
                             "software": s.software.model_copy(update={"pipeline_layout": "Et*24|t*24|t*24|t*24L"})})
    with pytest.raises(InputError, match="pipeline_layout places virtual stage k on rank k mod pp"):
        pm.predict(s)


# -------------------------------------------------------------------------- search
def _same(p, c):
    assert (p.step_time_s, p.mfu, p.memory_per_gpu_bytes, p.cost_usd, p.bottleneck) == (
        c.step_time_s, c.mfu, c.memory_per_gpu_bytes, c.cost_usd, c.bottleneck)
    assert p.breakdown_s == c.breakdown_s


@pytest.mark.parametrize("schedule", PIPELINE_SCHEDULES)
def test_search_row_of_each_schedule_is_predict(schedule):
    s = moe(num_gpus=16, global_batch_size=64, parallelism=dict(pp=2))
    res = search(s, SearchOptions(schedules=(schedule,), top_k=5, pin=("pp",)))
    assert res.candidates
    for c in res.candidates:
        _same(predict(c.scenario), c)
        assert c.scenario.parallelism.schedule == schedule
        assert c.layout()["pipeline_schedule"] == schedule


def test_sampled_rows_of_a_search_over_every_schedule_are_predict():
    res = search(moe(num_gpus=16), SearchOptions(schedules=PIPELINE_SCHEDULES, precisions=("bf16", "fp8"),
                                                 overlap=("ep", "pp")))
    t = res.table
    seen = {t.scenario(i).parallelism.schedule for i in range(len(t))}
    assert {"zb-h1", "zb-h2", "zb-v", "dualpipe", "dualpipe-v"} <= seen
    rng = np.random.default_rng(1)
    for i in rng.choice(len(t), size=min(40, len(t)), replace=False):
        _same(predict(t.scenario(i)), t.candidate(i))


def test_default_search_is_the_one_of_the_two_default_schedules():
    """Naming 1f1b and interleaved pairs each pipelined layout with the one of them that runs its
    chunks per rank (1f1b at vpp = 1, interleaved above): exactly the default search."""
    s = moe(num_gpus=16)
    default = search(s, SearchOptions())
    both = search(s, SearchOptions(schedules=("1f1b", "interleaved")))
    assert (both.num_valid, both.num_fit) == (default.num_valid, default.num_fit)
    assert both.num_enumerated == default.num_enumerated
    assert both.best.layout() == default.best.layout() and both.best.step_time_s == default.best.step_time_s
    assert both.best.scenario.parallelism.pipeline_schedule is None   # the default, left out as the base does


def test_schedule_is_pinnable():
    s = moe(num_gpus=16, parallelism=dict(pp=2, pipeline_schedule="zb-h1"))
    res = search(s, SearchOptions(schedules=PIPELINE_SCHEDULES, pin=("pipeline_schedule", "pp")))
    assert res.candidates and {c.scenario.parallelism.pipeline_schedule for c in res.candidates} == {"zb-h1"}
    own = search(s, SearchOptions(pin=("pp",)))   # not pinned, no list: the scenario's own schedule
    assert {c.scenario.parallelism.pipeline_schedule for c in own.candidates} == {"zb-h1"}


def test_dualpipe_rows_have_no_pp_or_ep_overlap_variants():
    from perfmodel.studies.search.job_variants import has_traffic
    cols = dict(tp=np.array([1, 1]), pp=np.array([2, 2]), cp=np.array([1, 1]), ep=np.array([8, 8]),
                etp=np.array([1, 1]), zero_stage=np.array([0, 0]), schedule=np.array([0, 5]))
    m = model_of(moe())
    assert list(has_traffic("pp", cols, m, 16)) == [True, False]
    assert list(has_traffic("ep", cols, m, 16)) == [True, False]


def test_widened_search_pairs_each_schedule_only_with_the_chunks_it_runs():
    """Every schedule is tried on every pipelined layout whose vpp it can run (one chunk per
    rank, two in a V, several interleaved); a pair it cannot run is no candidate, so no search
    reports it as rejected, and every schedule still leads somewhere."""
    res = search(parse_scenario(BENCH_SCENARIO), SearchOptions(schedules=WIDE_OPTIONS["schedules"], top_k=200))
    assert set(WIDE_OPTIONS["schedules"]) == set(PIPELINE_SCHEDULES)
    assert not [r for r in res.rejected if "model chunk" in r or "needs vpp" in r]
    seen = {res.table.scenario(i).parallelism.schedule for i in range(len(res.table))}
    assert seen == set(PIPELINE_SCHEDULES)


def test_a_pinned_vpp_keeps_every_schedule_for_the_rules_to_judge():
    s = moe(num_gpus=16, parallelism=dict(pp=2, vpp=1))
    res = search(s, SearchOptions(schedules=("zb-v",), pin=("vpp", "pp")))
    assert not res.candidates
    assert any("zb-v runs two model chunks per rank in a V: it needs vpp = 2 (vpp = 1)" in r for r in res.rejected)


# ---------------------------------------------------------- round trip and the CLI
@pytest.mark.parametrize("schedule", [None, "zb-v"])
def test_scenario_round_trip_keeps_the_schedule(schedule):
    s = gpt3(schedule)
    d = scenario_to_dict(s)
    assert ("pipeline_schedule" in d["parallelism"]) is (schedule is not None)
    assert parse_scenario(d) == s


def test_cli_unknown_schedule_is_one_line_naming_the_field(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(scenario_to_dict(gpt3()) | {"parallelism": {"tp": 8, "pp": 8,
                                                                            "pipeline_schedule": "zb-h3"}}))
    assert main(["predict", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "parallelism.pipeline_schedule" in err and "Traceback" not in err


def test_cli_search_schedules_option(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(scenario_to_dict(moe())))
    assert main(["search", str(path), "--schedules", "zb-h1,dualpipe", "--format", "json", "--top", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {c["pipeline_schedule"] for c in out["candidates"] if c["pp"] > 1} <= {"zb-h1", "dualpipe"}
    assert main(["search", str(path), "--schedules", "zb-h9"]) == 2
    assert "schedules" in capsys.readouterr().err
