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
from perfmodel.engine.evaluate import LAYER_TIMES, _layer_totals
from perfmodel.engine.job import bind
from perfmodel.engine.rules import layout_rule_fields, layout_violations
from perfmodel.formulas import pipeline
from perfmodel.formulas.compute import op_time
from perfmodel.formulas.layouts import Layouts, is_row, layouts_from_arrays, one_row
from perfmodel.formulas.memory import COMPONENTS as MEMORY_COMPONENTS
from perfmodel.formulas.memory import memory_per_gpu
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
