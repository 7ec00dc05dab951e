"""One layout against many (issue 54): ``predict`` evaluates a batch of one, which runs every
formula directly (``perfmodel.engine.distinct.MIN_ROWS``; ``comm.FEW_ROWS`` groups the measured
collectives in Python), while the search evaluates batches of thousands, grouped once per
distinct layer shape and scattered back. Every figure must be the same to the last bit, on every
published run and on layouts drawn at random from searches."""


import numpy as np
import pytest
from support.published import runnable_published_cases

from perfmodel.engine.distinct import MIN_ROWS, forget
from perfmodel.engine.enumerate import enumerate_layouts, keep
from perfmodel.engine.evaluate import COMPONENTS, evaluate
from perfmodel.engine.job import bind
from perfmodel.engine.prediction import measure
from perfmodel.engine.rules import layout_rule_fields, layout_violations, resolve
from perfmodel.formulas.comm import FEW_ROWS
from perfmodel.formulas.layouts import Layouts, layouts_from_arrays
from perfmodel.formulas.memory import COMPONENTS as MEMORY_COMPONENTS
from perfmodel.spec.profile import AUTO, efficiencies_for
from perfmodel.spec.scenario import hardware_of, model_of, parse_scenario
from perfmodel.studies.search.search import SearchOptions, bounds_for, search

BATCH = 2 * MIN_ROWS
"""Rows of the large batch: past both MIN_ROWS and FEW_ROWS, so that the grouped paths run."""
assert BATCH > FEW_ROWS
TINY_MOE = dict(name="tiny-moe", num_layers=4, hidden_size=256, num_attention_heads=8, num_query_groups=4,
                ffn_hidden_size=1024, gated_mlp=True, vocab_size=1000,
                moe=dict(num_experts=4, top_k=2, expert_ffn_hidden_size=512))


def scen(model, **over):
    base = dict(hardware="h100-sxm", num_gpus=8, model=model if isinstance(model, str) else dict(model),
                seq_length=512, global_batch_size=16, training_tokens=1e9)
    return parse_scenario({**base, **over})


def _figures(job, L: Layouts, cost_model) -> dict:
    """Every array the engine gives for the batch, by name."""
    arrays = evaluate(job, L)
    ev = measure(job, L, arrays, cost_model)
    out = {f"breakdown.{k}": arrays.breakdown[k] for k in COMPONENTS}
    out |= {f"memory.{k}": getattr(arrays.memory, k) for k in MEMORY_COMPONENTS}
    out |= {k: np.broadcast_to(getattr(arrays, k), len(L)) for k in ("gemm_s", "attention_s", "memory_bound_s")}
    out |= {k: getattr(ev, k) for k in ("step_time_s", "tokens_per_s", "mfu", "hfu", "training_time_frac", "gpu_hours",
                                        "cost_usd", "energy_kwh")}
    out["bottleneck"] = ev.bottleneck_of(np.arange(len(L)))
    out["fits"] = arrays.fits
    if ev.time_to_train_s is not None:
        out["time_to_train_s"] = ev.time_to_train_s
    return out


def _assert_rows_equal(one: dict, many: dict, rows) -> None:
    """Row 0 of ``one`` is row ``r`` of ``many`` for each ``r`` in ``rows``, bit for bit."""
    assert one.keys() == many.keys()
    for name, value in one.items():
        got = np.asarray(many[name])[rows]
        assert np.array_equal(np.broadcast_to(np.asarray(value)[:1], got.shape), got), name


def _runnable_cases():
    return [pytest.param(sc, r, id=case_id) for case_id, sc, r in runnable_published_cases()]


@pytest.mark.parametrize("sc, r", _runnable_cases())
def test_a_published_run_alone_equals_it_among_many(sc, r):
    """The run's own layout, alone and as every row of a batch past the grouping thresholds."""
    one = _figures(r.job, r.layouts, sc.cost)
    many = _figures(r.job, r.layouts.take(np.zeros(BATCH, dtype=np.int64)), sc.cost)
    _assert_rows_equal(one, many, np.arange(BATCH))


@pytest.mark.parametrize("model, kw, options", [
    ("gpt3-175b", dict(num_gpus=1024, seq_length=2048, global_batch_size=1536), {}),
    ("mixtral-8x7b", dict(num_gpus=64, seq_length=4096, global_batch_size=256), {"max_micro_batch_size": 2}),
    (TINY_MOE, dict(num_gpus=16, global_batch_size=32), {"precisions": ("bf16", "fp8"), "overlap": ("tp", "ep")}),
])
def test_random_layouts_alone_equal_them_among_many(model, kw, options):
    """Layouts the search kept (a sample of every layout that fits, of every job it tried), each
    evaluated alone and within the whole sample of its job, which is grouped by layer shape."""
    sc = scen(model, **kw)
    eff = efficiencies_for(hardware_of(sc), AUTO)[0]    # the calibration profile: measured collectives too
    res = search(sc, SearchOptions(**options), efficiency=eff)
    t = res.table
    rng = np.random.default_rng(54)
    checked = 0
    for i in rng.choice(len(t), size=min(30, len(t)), replace=False):
        r = resolve(t.scenario(i), eff)
        same_job = np.flatnonzero(t.group == t.group[i])
        if len(same_job) < BATCH:     # too few rows of this job to be grouped: repeat them
            same_job = np.resize(same_job, BATCH)
        L_many = t.layouts.take(same_job)
        at = np.flatnonzero(same_job == i)
        one = _figures(r.job, r.layouts, res.scenario.cost)
        many = _figures(r.job, L_many, res.scenario.cost)
        _assert_rows_equal(one, many, at)
        checked += 1
    assert checked >= 10


def _valid_layouts(s) -> Layouts:
    """Every layout of the search's enumeration that passes the rules."""
    m, hw = model_of(s), hardware_of(s)
    c = enumerate_layouts(m, hw, s.num_gpus, s.global_batch_size, s.seq_length, bounds_for(s, SearchOptions()))
    ok = layout_violations(m, hw, s.seq_length, s.global_batch_size, s.num_gpus, s.precision, tp=c["tp"], pp=c["pp"],
                           vpp=c["vpp"], cp=c["cp"], ep=c["ep"], etp=c["etp"], sp=c["sp"], micro_batch_size=c["mbs"],
                           schedule=c["schedule"], **layout_rule_fields(s)).ok
    c = keep(c, ok)
    dp = s.num_gpus // (c["tp"] * c["pp"] * c["cp"])
    return layouts_from_arrays(**{k: c[k] for k in ("tp", "pp", "vpp", "cp", "ep", "etp", "sp", "zero_stage", "mbs",
                                                    "schedule")}, dp=dp, num_mb=s.global_batch_size // (c["mbs"] * dp))


@pytest.mark.parametrize("hardware", ["h100-sxm", "gb200-nvl72"])
def test_what_a_study_keeps_of_its_layer_shapes_is_what_each_batch_computes(hardware, monkeypatch):
    """The layer shapes a study's batches share (``evaluate._per_shape``: one memo per
    ``shared_job``, whatever the batch's size, across GPU counts): every figure of a batch
    evaluated after others of the study, against the same batch worked out alone."""
    import perfmodel.engine.evaluate as evaluate_module

    kept = []
    for n in (128, 256, 512):
        sc = scen("deepseek-v3", hardware=hardware, num_gpus=n, seq_length=4096, global_batch_size=2 * n,
                  recompute="selective")
        job = bind(sc, model_of(sc), hardware_of(sc), hardware_of(sc).efficiency)
        L = _valid_layouts(sc)
        rng = np.random.default_rng(n)
        for rows in (np.sort(rng.choice(len(L), size=40, replace=False)), np.arange(len(L))):   # small, then all
            kept.append((job, L.take(rows), sc.cost))
    shared = [_figures(job, L, cost) for job, L, cost in kept]
    monkeypatch.setattr(evaluate_module, "_per_shape", lambda fn, first, c, L, recompute: fn(first, c, L))
    for (job, L, cost), figures in zip(kept, shared):
        forget()                              # the data-parallel parts: from this batch alone
        alone = _figures(job, L, cost)
        assert alone.keys() == figures.keys()
        for name in alone:
            assert np.array_equal(np.asarray(alone[name]), np.asarray(figures[name])), name
