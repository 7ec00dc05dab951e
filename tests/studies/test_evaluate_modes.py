"""The recompute modes of a job evaluated in one call (``perfmodel.engine.evaluate_modes``, what the
streaming search does with one overlap setting) give each mode's rows exactly what evaluating
each mode alone gives: the same bits, every component, schedules default or not, MoE and MTP
included; where one call would not (the modes' schedules choose differently, the jobs differ in
more than their mode) it evaluates each mode alone, and it takes no more than ``MAX_ROWS`` rows
in one call."""

from __future__ import annotations

import numpy as np
import pytest
from support import with_software

import perfmodel.engine.evaluate_modes as evaluate_modes_module
from perfmodel.engine.enumerate import enumerate_layouts
from perfmodel.engine.evaluate import evaluate
from perfmodel.engine.evaluate_modes import evaluate_modes
from perfmodel.engine.job import bind
from perfmodel.engine.job_memory import job_memory
from perfmodel.engine.rules import layout_rule_fields, layout_violation, with_recompute
from perfmodel.formulas.layouts import Layouts, layouts_from_arrays
from perfmodel.formulas.pipeline import only_defaults
from perfmodel.spec.scenario import PIPELINE_SCHEDULES, Scenario, hardware_of, model_of, parse_scenario
from perfmodel.studies.search.search import SearchOptions, bounds_for


def scen(model: str, **over) -> Scenario:
    base = {"hardware": "h100-sxm", "model": model, "training_tokens": 1e9}
    base.update(over)
    return parse_scenario(with_software(base))


def _valid_layouts(s: Scenario, options: SearchOptions) -> Layouts:
    m, hw = model_of(s), hardware_of(s)
    c = enumerate_layouts(m, hw, s.num_gpus, s.global_batch_size, s.seq_length, bounds_for(s, options))
    ok = layout_violation(m, hw, s.seq_length, s.global_batch_size, s.num_gpus, s.precision, tp=c["tp"], pp=c["pp"],
                          vpp=c["vpp"], cp=c["cp"], ep=c["ep"], etp=c["etp"], sp=c["sp"], micro_batch_size=c["mbs"],
                          schedule=c["schedule"], **layout_rule_fields(s)) == ""
    c = {k: v[ok] for k, v in c.items()}
    dp = s.num_gpus // (c["tp"] * c["pp"] * c["cp"])
    return layouts_from_arrays(**{k: c[k] for k in ("tp", "pp", "vpp", "cp", "ep", "etp", "sp", "zero_stage", "mbs",
                                                    "schedule")},
                               dp=dp, num_mb=s.global_batch_size // (c["mbs"] * dp))


CASES = [
    ("gpt3-175b", {"num_gpus": 256, "seq_length": 2048, "global_batch_size": 512}, ()),
    ("deepseek-v3", {"hardware": "gb200-nvl72", "num_gpus": 512, "seq_length": 4096, "global_batch_size": 1024},
     ("1f1b", "interleaved", "dualpipe-v")),
    ("mixtral-8x7b", {"num_gpus": 64, "seq_length": 4096, "global_batch_size": 256, "selective_recompute": ["moe"]},
     PIPELINE_SCHEDULES),
    ("llama3-8b", {"num_gpus": 64, "seq_length": 8192, "global_batch_size": 128, "elementwise_kernels": "eager",
                   "attention_backend": "unfused", "fsdp_collectives_per_layer": 12}, ()),
]


def _same(got, want) -> None:
    assert got.breakdown.keys() == want.breakdown.keys()
    assert all(np.array_equal(got.breakdown[k], want.breakdown[k]) for k in want.breakdown)
    assert np.array_equal(got.memory.total, want.memory.total) and np.array_equal(got.fits, want.fits)
    assert all(np.array_equal(getattr(got, f), getattr(want, f)) for f in ("gemm_s", "attention_s", "memory_bound_s"))
    assert all(np.array_equal(getattr(got.stage_s, f), getattr(want.stage_s, f))
               for f in ("first_s", "middle_s", "last_s"))
    assert got.flop_per_token == want.flop_per_token


def _runs(s: Scenario, schedules: tuple, seed: int) -> list:
    """The three modes over rows as the search gives them: none and selective the same Layouts object,
    full other rows; memory given for two of them."""
    L = _valid_layouts(s, SearchOptions(schedules=schedules) if schedules else SearchOptions())
    rng = np.random.default_rng(seed)
    some, other = L.take(np.sort(rng.permutation(len(L))[: len(L) // 2])), L.take(rng.random(len(L)) < 0.6)
    m, hw = model_of(s), hardware_of(s)
    jobs = [bind(with_recompute(s, rc), m, hw, hw.efficiency) for rc in ("none", "selective", "full")]
    return [(jobs[0], some, job_memory(jobs[0], some)), (jobs[1], some, None),
            (jobs[2], other, job_memory(jobs[2], other))]


@pytest.mark.parametrize("model, kw, schedules", CASES, ids=[c[0] for c in CASES])
def test_modes_in_one_call_are_each_mode_alone(model, kw, schedules, monkeypatch):
    runs = _runs(scen(model, **kw), schedules, seed=len(model))
    monkeypatch.setattr(evaluate_modes_module, "MAX_ROWS", 10**9)
    calls = []
    real = evaluate_modes_module.evaluate_runs
    monkeypatch.setattr(evaluate_modes_module, "evaluate_runs", lambda *a: calls.append(a) or real(*a))
    got = list(evaluate_modes(runs))
    assert len(calls) == 1                       # one call for the three modes
    assert len({only_defaults(L.schedule) for _, L, _ in runs}) == 1
    for g, (job, L, mem) in zip(got, runs):
        _same(g, evaluate(job, L, mem))
        assert len(g.step_time_s) == len(L)


def test_modes_whose_schedules_choose_otherwise_are_evaluated_alone(monkeypatch):
    """A mode whose rows hold only default schedules beside one whose do not: evaluated alone."""
    s = scen("mixtral-8x7b", num_gpus=64, seq_length=4096, global_batch_size=256)
    runs = _runs(s, PIPELINE_SCHEDULES, seed=3)
    job, L, _ = runs[2]
    runs[2] = (job, L.take(np.flatnonzero(L.schedule == L.schedule.min())), None)
    assert len({only_defaults(L.schedule) for _, L, _ in runs}) == 2
    monkeypatch.setattr(evaluate_modes_module, "evaluate_runs", None)   # never called
    for g, (job, L, mem) in zip(evaluate_modes(runs), runs):
        _same(g, evaluate(job, L, mem))


def test_jobs_that_differ_in_more_than_their_mode_are_evaluated_alone(monkeypatch):
    """Full recompute's block method changes the software stack: each mode alone."""
    s = scen("mixtral-8x7b", num_gpus=64, seq_length=4096, global_batch_size=256, recompute_num_layers=2)
    runs = _runs(s, (), seed=5)
    monkeypatch.setattr(evaluate_modes_module, "evaluate_runs", None)
    for g, (job, L, mem) in zip(evaluate_modes(runs), runs):
        _same(g, evaluate(job, L, mem))


def test_runs_are_taken_in_turn_up_to_max_rows(monkeypatch):
    """Runs of more rows than ``MAX_ROWS`` together: as many in one call as fit, the rest after."""
    runs = _runs(scen("gpt3-175b", num_gpus=256, seq_length=2048, global_batch_size=512), (), seed=7)
    monkeypatch.setattr(evaluate_modes_module, "MAX_ROWS", len(runs[0][1]) + len(runs[1][1]))
    calls = []
    real = evaluate_modes_module.evaluate_runs
    monkeypatch.setattr(evaluate_modes_module, "evaluate_runs", lambda *a: calls.append(len(a[1])) or real(*a))
    for g, (job, L, mem) in zip(evaluate_modes(runs), runs):
        _same(g, evaluate(job, L, mem))
    assert calls == [len(runs[0][1]) + len(runs[1][1])]     # none and selective together, full alone
