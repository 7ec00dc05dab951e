"""The one-layout path (issue 54): ``predict``'s batch of one is worked out on its ``one_row`` (the
layout's columns as Python numbers), every formula by the same lines that a search runs on arrays
(``perfmodel.formulas.scalars``). ``test_one_layout`` compares every figure of ``evaluate`` alone
and among many; here each part the engine combines (every operation of every layer kind and of
the output head, each layer's times, the data-parallel parts, the peak memory) is compared on its
own, to the last bit, on every published run and on layouts drawn at random from the enumeration,
and the one_row's parts are checked to be numbers, not arrays (the path's whole point)."""


import numpy as np
import pytest
from support.published import runnable_published_cases

from perfmodel.engine.block import BLOCK_TOTALS, OP_TIMES
from perfmodel.engine.data_parallel import _parts
from perfmodel.engine.enumerate import enumerate_layouts, keep
from perfmodel.engine.evaluate import COMPONENTS, LAYER_TIMES, _layer_totals
from perfmodel.engine.job import bind
from perfmodel.engine.prediction import bottleneck
from perfmodel.engine.rules import layout_rule_fields, layout_violations
from perfmodel.formulas import pipeline
from perfmodel.formulas.compute import op_time
from perfmodel.formulas.layouts import Layouts, is_row, layouts_from_arrays, one_row
from perfmodel.formulas.memory import COMPONENTS as MEMORY_COMPONENTS
from perfmodel.formulas.memory import memory_per_gpu
from perfmodel.formulas.scalars import maximum, minimum
from perfmodel.formulas.workload import head_ops, layer_kinds, layer_ops, mtp_extra_ops, mtp_layer_kind
from perfmodel.spec.profile import AUTO, efficiencies_for
from perfmodel.spec.scenario import hardware_of, model_of, parse_scenario
from perfmodel.studies.search.search import SearchOptions, bounds_for


def _bits(x) -> bytes:
    return np.asarray(x, dtype=float).reshape(-1).tobytes()


def _is_number(x) -> bool:
    return not isinstance(x, np.ndarray) or x.ndim == 0


def _assert_parts_equal(c, L: Layouts) -> int:
    """Every part of the job under the one layout ``L`` on its one_row against the same layout
    twice as a batch (arrays, run directly); returns the number of values compared."""
    row, batch = one_row(L), L.take(np.zeros(2, dtype=np.int64))
    assert is_row(row) and not is_row(batch)
    m, sw, checked = c.model, c.software, 0
    kinds = set(layer_kinds(m)) | ({mtp_layer_kind(m)} if m.mtp_layers else set())
    blocks = [layer_ops(m, k, sw) for k in kinds] + [head_ops(m, sw)] + ([mtp_extra_ops(m)] if m.mtp_layers else [])
    for op in {op for ops in blocks for op in ops}:
        one = op_time(op, m, row, c.seq_length, c.precision, c.hardware, c.efficiency, sw)
        many = op_time(op, m, batch, c.seq_length, c.precision, c.hardware, c.efficiency, sw)
        for name in OP_TIMES:
            assert _is_number(getattr(one, name)), (op.name, name)
            assert _bits(getattr(one, name)) == _bits(getattr(many, name)[:1]), (op.name, name)
            checked += 1
    for kind in kinds:
        one, many = _layer_totals(kind, c, row), _layer_totals(kind, c, batch)
        for name in LAYER_TIMES:
            assert _bits(getattr(one, name)) == _bits(np.broadcast_to(getattr(many, name), 2)[:1]), (kind, name)
            checked += 1
        for name in BLOCK_TOTALS:
            assert _is_number(getattr(one.block, name)), (kind, name)
            assert _bits(getattr(one.block, name)) == _bits(getattr(many.block, name)[:1]), (kind, name)
            checked += 1
    by_schedule = not pipeline.only_defaults(L.schedule)
    dense, expert, dp = _parts(c, row, by_schedule)
    dense_b, expert_b, dp_b = _parts(c, batch, by_schedule)
    for name, one, many in [("dense", dense, dense_b), ("expert", expert, expert_b)] + [
            (f, getattr(dp, f), getattr(dp_b, f)) for f in dp.__dataclass_fields__]:
        assert _is_number(one), name
        assert _bits(one) == _bits(np.broadcast_to(many, 2)[:1]), name
        checked += 1
    mem_one = memory_per_gpu(m, c.seq_length, c.recompute, c.precision, L, sw)   # on its one_row inside
    mem_many = memory_per_gpu(m, c.seq_length, c.recompute, c.precision, batch, sw)
    for name in MEMORY_COMPONENTS:
        assert _bits(getattr(mem_one, name)) == _bits(getattr(mem_many, name)[:1]), name
        checked += 1
    return checked


def _runnable_cases():
    return [pytest.param(r, id=case_id) for case_id, sc, r in runnable_published_cases()]


@pytest.mark.parametrize("r", _runnable_cases())
def test_a_published_run_on_numbers_equals_it_on_arrays(r):
    assert _assert_parts_equal(r.job, r.layouts) > 20


@pytest.mark.parametrize("scenario", [
    dict(hardware="h100-sxm", num_gpus=1024, model="gpt3-175b", seq_length=2048, global_batch_size=1536),
    dict(hardware="gb200-nvl72", num_gpus=256, model="deepseek-v3", seq_length=4096, global_batch_size=512,
         precision="fp8", recompute="selective"),
    dict(hardware="h100-sxm", num_gpus=64, model="mixtral-8x7b", seq_length=4096, global_batch_size=256,
         recompute="full"),
])
def test_random_layouts_on_numbers_equal_them_on_arrays(scenario):
    """Layouts drawn at random from every layout the rules let the job run (all zero stages,
    micro-batch sizes, schedules and sequence parallelism the search enumerates)."""
    sc = parse_scenario({"name": "one-row", "training_tokens": 1e9, **scenario})
    m, hw = model_of(sc), hardware_of(sc)
    cols = enumerate_layouts(m, hw, sc.num_gpus, sc.global_batch_size, sc.seq_length, bounds_for(sc, SearchOptions()))
    ok = layout_violations(m, hw, sc.seq_length, sc.global_batch_size, sc.num_gpus, sc.precision, tp=cols["tp"],
                           pp=cols["pp"], vpp=cols["vpp"], cp=cols["cp"], ep=cols["ep"], etp=cols["etp"],
                           sp=cols["sp"], micro_batch_size=cols["mbs"], schedule=cols["schedule"],
                           **layout_rule_fields(sc)).ok
    cols = keep(cols, ok)
    dp = sc.num_gpus // (cols["tp"] * cols["pp"] * cols["cp"])
    L = layouts_from_arrays(**{k: cols[k] for k in ("tp", "pp", "vpp", "cp", "ep", "etp", "sp", "zero_stage", "mbs",
                                                    "schedule")}, dp=dp, num_mb=sc.global_batch_size // (cols["mbs"] * dp))
    job = bind(sc, m, hw, efficiencies_for(hw, AUTO)[0])
    rng = np.random.default_rng(54)
    for i in rng.choice(len(L), size=min(25, len(L)), replace=False):
        _assert_parts_equal(job, L.take(np.array([i])))


@pytest.mark.parametrize("a, b", [(1.5, 2.5), (2.5, 1.5), (0.0, -0.0), (-0.0, 0.0), (1.0, 1.0), (float("nan"), 1.0),
                                  (1.0, float("nan")), (3, 2.5), (2, 2.5), (2.5, 2), (3, 7), (7, 3), (4, 4), (-1, 0)])
def test_maximum_and_minimum_on_numbers_pick_what_numpy_picks(a, b):
    """``scalars.maximum``/``minimum`` on Python numbers give numpy's number to the last bit (-0.0 on
    ties, NaN where either is), a float where either is one and an int where both are."""
    for ours, theirs in ((maximum, np.maximum), (minimum, np.minimum)):
        got, want = ours(a, b), theirs(a, b)
        assert type(got) is (int if isinstance(want, np.integer) else float), (ours.__name__, a, b)
        assert _bits(got) == _bits(want), (ours.__name__, a, b)
        assert _bits(ours(np.array([a]), np.array([b]))) == _bits(want)   # arrays: numpy's own


@pytest.mark.parametrize("scenario", [
    {"hardware": "h100-sxm", "num_gpus": 96, "model": "gpt3-175b", "seq_length": 2048, "global_batch_size": 1536},
    {"hardware": "gb200-nvl72", "num_gpus": 256, "model": "deepseek-v3", "seq_length": 4096, "global_batch_size": 512,
     "precision": "fp8"},
])
def test_layout_rules_on_numbers_equal_them_on_arrays(scenario):
    """``layout_violations`` of one layout given as Python numbers (``check_layout``'s way) breaks the
    same rule with the same words as the layout given as one-element arrays: every layout the search
    enumerates, broken ones included (a sample of them, drawn at random)."""
    sc = parse_scenario({"name": "one-row", **scenario})
    m, hw = model_of(sc), hardware_of(sc)
    cols = enumerate_layouts(m, hw, sc.num_gpus, sc.global_batch_size, sc.seq_length, bounds_for(sc, SearchOptions()))
    names = {"tp": "tp", "pp": "pp", "vpp": "vpp", "cp": "cp", "ep": "ep", "etp": "etp", "micro_batch_size": "mbs",
             "schedule": "schedule"}
    rng, broken = np.random.default_rng(54), 0
    for i in rng.choice(len(cols["tp"]), size=min(300, len(cols["tp"])), replace=False):
        on = {k: cols[c][i] for k, c in names.items()}
        args = (m, hw, sc.seq_length, sc.global_batch_size, sc.num_gpus, sc.precision)
        one = layout_violations(*args, sp=bool(cols["sp"][i]), **{k: int(v) for k, v in on.items()},
                                **layout_rule_fields(sc))
        many = layout_violations(*args, sp=np.array([cols["sp"][i]]), **{k: np.array([v]) for k, v in on.items()},
                                 **layout_rule_fields(sc))
        assert (one.code.tolist(), one.fields, one.reasons) == (many.code.tolist(), many.fields, many.reasons)
        broken += int(one.code[0] >= 0)
    assert broken > 10


def test_bottleneck_of_one_layout_on_floats_is_the_arrays_one():
    """``bottleneck`` on one layout's floats (``prediction_row``) names what it names on arrays: ties
    (the first), NaN (the first NaN, as np.argmax), the HBM-bound compute, random breakdowns."""
    rng = np.random.default_rng(54)
    cases = [(np.zeros(len(COMPONENTS)), 1.0, 1.0, 3.0), (np.ones(len(COMPONENTS)), 1.0, 1.0, 1.0)]
    for j in range(len(COMPONENTS)):
        v = rng.random(len(COMPONENTS))
        v[j] = np.nan
        cases.append((v, 1.0, 2.0, 0.5))
        w = rng.random(len(COMPONENTS))
        w[j] = w[(j + 3) % len(COMPONENTS)] = 2.0   # a tie at the top
        cases += [(w, 1.0, 0.5, 2.0), (w, 1.0, 0.5, 1.5), (-w * 0.0, 0.0, 0.0, 0.0)]
    for _ in range(200):
        cases.append((rng.random(len(COMPONENTS)) * rng.integers(1, 3, len(COMPONENTS)), *rng.random(3)))
    for values, gemm, attn, mem in cases:
        one = bottleneck({k: float(v) for k, v in zip(COMPONENTS, values)}, float(gemm), float(attn), float(mem))
        many = bottleneck({k: np.array([v]) for k, v in zip(COMPONENTS, values)}, np.array([gemm]),
                          np.array([attn]), np.array([mem]))
        assert type(one) is str and one == many[0], (values, gemm, attn, mem)
