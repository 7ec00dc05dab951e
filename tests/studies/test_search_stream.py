"""The streaming search and the work it shares: what it keeps equals ranking every row at once,
chunk boundaries change nothing, once-per-shape evaluation is bit for bit the evaluation of
every row, the compute floor never exceeds a step, the overlap dimension is pinnable and never
duplicates a candidate, and ``perfmodel bench`` reports what it says."""

from __future__ import annotations

import json

import numpy as np
import pytest
from support import spec_predict as predict
from support import with_software

import perfmodel.engine.distinct as distinct
import perfmodel.studies.search.layout_table as layout_table
import perfmodel.studies.search.search as search_module
from perfmodel.cli import main
from perfmodel.engine.block import block_time
from perfmodel.engine.distinct import once_per_shape
from perfmodel.engine.enumerate import enumerate_layouts, enumeration
from perfmodel.engine.evaluate import evaluate
from perfmodel.engine.floor import compute_floor_s
from perfmodel.engine.job import bind
from perfmodel.engine.job_memory import job_memory
from perfmodel.engine.rules import layout_rule_fields, layout_violation, with_recompute
from perfmodel.formulas.layouts import Layouts, layouts_from_arrays
from perfmodel.formulas.workload import LayerKind, layer_kinds, layer_ops
from perfmodel.spec.scenario import Scenario, hardware_of, model_of, parse_scenario
from perfmodel.studies import bench as bench_module
from perfmodel.studies.search.job_variants import OVERLAP_KINDS, has_traffic, variants
from perfmodel.studies.search.layout_table import concat, pareto_front
from perfmodel.studies.search.search import SearchOptions, bounds_for, search

TINY = dict(name="tiny", num_layers=4, hidden_size=256, num_attention_heads=8, num_query_groups=4,
            ffn_hidden_size=1024, gated_mlp=True, vocab_size=1000)
TINY_MOE = dict(TINY, name="tiny-moe", moe=dict(num_experts=4, top_k=2, expert_ffn_hidden_size=512))


def scen(model=TINY, **over) -> Scenario:
    base = dict(hardware="h100-sxm", num_gpus=16, model=model if isinstance(model, str) else dict(model),
                seq_length=512, global_batch_size=32, training_tokens=1e9)
    base.update(over)
    return parse_scenario(with_software(base))


def _every_row(s: Scenario, options: SearchOptions, monkeypatch) -> tuple:
    """(the search, a table of every layout that fit): the sample holds them all when it may."""
    monkeypatch.setattr(layout_table, "SAMPLE_ROWS", 10**9)
    res = search(s, options)
    assert len(res.table) == res.num_fit
    return res, res.table


# ------------------------------------------------------------------ what the stream keeps
@pytest.mark.parametrize("model, options, front", [
    (TINY, dict(objective="time", top_k=40, gpu_counts=(4, 8, 16)), 2),
    (TINY, dict(objective="cost", top_k=500, gpu_counts=(4, 8, 16), overlap=("tp", "dp")), 2),
    (TINY_MOE, dict(objective="tokens_per_usd", top_k=25, precisions=("bf16", "fp8"), gpu_counts=(4, 8),
                    overlap=("ep", "dp")), 1),
])
def test_kept_rows_equal_ranking_every_row_at_once(model, options, front, monkeypatch):
    """Chunks of 256 layouts, so the top-k and the front are merged many times over; they must
    be the rows a ranking of the whole table gives, ties and order included (the table is in the
    search's order, (group, position), as the search used to build it)."""
    monkeypatch.setattr(search_module, "CHUNK", 256)
    res, table = _every_row(scen(model, num_gpus=8), SearchOptions(**options), monkeypatch)
    table = table.take(table.in_search_order())
    top = table.ranking(options["objective"])[: options["top_k"]]
    assert [c.to_dict() for c in res.candidates] == [table.candidate(int(i)).to_dict() for i in top]
    rows = pareto_front(table.time_basis_s, table.cost_usd)
    assert [c.to_dict() for c in res.pareto] == [table.candidate(int(i)).to_dict() for i in rows]
    assert len(res.pareto) >= front                 # with several GPU counts, a real front


def test_chunk_size_changes_nothing(monkeypatch):
    s = scen(TINY_MOE)
    options = SearchOptions(top_k=30, gpu_counts=(8, 16), precisions=("bf16", "fp8"), overlap=("ep",))
    whole = search(s, options).to_dict()
    monkeypatch.setattr(search_module, "CHUNK", 300)
    pieces = search(s, options).to_dict()
    whole.pop("elapsed_s"), pieces.pop("elapsed_s")
    assert pieces == whole


def test_sample_is_bounded_and_evenly_spaced(monkeypatch):
    """With room for 50 rows the sample keeps every stride-th fitting row, stride a power of two,
    between 25 and 50 of them (it halves when it would pass 50)."""
    s = scen(num_gpus=16)
    res_all, table = _every_row(s, SearchOptions(gpu_counts=(8, 16)), monkeypatch)
    monkeypatch.setattr(search_module, "CHUNK", 256)
    monkeypatch.setattr(layout_table, "SAMPLE_ROWS", 50)
    res = search(s, SearchOptions(gpu_counts=(8, 16)))
    assert res.num_fit == res_all.num_fit > 400
    assert 25 <= len(res.table) <= 50
    stride = 2 ** int(np.ceil(np.log2(res.num_fit / len(res.table))))
    assert len(res.table) == -(-res.num_fit // stride)
    assert res.table.fits.all()


@pytest.mark.parametrize("room", [7, 50, 333])
def test_sample_is_every_stride_th_fitting_row_seen(room, monkeypatch):
    """The sample is every stride-th of the fitting rows in the order the search saw them (each
    chunk's candidates thinned before they are made a table: ``layout_table.sample_thinned``)."""
    s = scen(TINY_MOE)
    options = SearchOptions(gpu_counts=(8, 16), precisions=("bf16", "fp8"), overlap=("ep",))
    monkeypatch.setattr(search_module, "CHUNK", 256)      # the order seen: chunk by chunk
    res_all, table = _every_row(s, options, monkeypatch)
    monkeypatch.setattr(layout_table, "SAMPLE_ROWS", room)
    res = search(s, options)
    stride = 2 ** int(np.ceil(np.log2(res.num_fit / len(res.table))))
    every = table.take(slice(0, None, stride))
    assert res.num_fit == res_all.num_fit > 4 * room
    for name in ("group", "position", "step_time_s", "memory_per_gpu_bytes", "cost_usd"):
        assert np.array_equal(getattr(res.table, name), getattr(every, name))


def test_enumeration_blocks_are_the_enumeration():
    s = scen(TINY_MOE, num_gpus=32)
    m, hw = model_of(s), hardware_of(s)
    for pin in ((), ("tp", "micro_batch_size"), ("zero_stage",)):
        bounds = bounds_for(s, SearchOptions(pin=pin))
        whole = enumerate_layouts(m, hw, 32, 32, 512, bounds)
        parts = [cols for cols, _, _ in enumeration(m, hw, 32, 32, 512, bounds).blocks(100)]
        assert len(parts) > 1 or pin
        assert all(np.array_equal(whole[k], np.concatenate([p[k] for p in parts])) for k in whole)


# ------------------------------------------------------------- work once per distinct shape
def _valid_layouts(s: Scenario) -> Layouts:
    m, hw = model_of(s), hardware_of(s)
    c = enumerate_layouts(m, hw, s.num_gpus, s.global_batch_size, s.seq_length, bounds_for(s, SearchOptions()))
    ok = layout_violation(m, hw, s.seq_length, s.global_batch_size, s.num_gpus, s.precision, tp=c["tp"], pp=c["pp"],
                          vpp=c["vpp"], cp=c["cp"], ep=c["ep"], etp=c["etp"], sp=c["sp"], micro_batch_size=c["mbs"],
                          **layout_rule_fields(s)) == ""
    c = {k: v[ok] for k, v in c.items()}
    dp = s.num_gpus // (c["tp"] * c["pp"] * c["cp"])
    return layouts_from_arrays(**{k: c[k] for k in ("tp", "pp", "vpp", "cp", "ep", "etp", "sp", "zero_stage", "mbs")},
                               dp=dp, num_mb=s.global_batch_size // (c["mbs"] * dp))


SHARED = [
    ("gpt3-175b", dict(num_gpus=256, seq_length=2048, global_batch_size=512), "selective"),
    ("deepseek-v3", dict(hardware="gb200-nvl72", num_gpus=512, seq_length=4096, global_batch_size=1024), "full"),
    ("mixtral-8x7b", dict(num_gpus=64, seq_length=4096, global_batch_size=256, recompute_num_layers=2,
                          selective_recompute=["moe"]), "full"),
    ("llama3-8b", dict(num_gpus=64, seq_length=8192, global_batch_size=128, elementwise_kernels="eager",
                       attention_backend="unfused", fsdp_collectives_per_layer=12), "none"),
]


@pytest.mark.parametrize("model, kw, recompute", SHARED, ids=[s[0] for s in SHARED])
def test_once_per_shape_is_the_evaluation_of_every_row(model, kw, recompute, monkeypatch):
    """The engine run once per distinct shape (and again, from what it kept) gives every row
    exactly what running it on every row gives: the same bits, every component."""
    s = scen(model, **kw)
    L = _valid_layouts(s)
    assert len(L) > 4 * distinct.MIN_ROWS
    m, hw = model_of(s), hardware_of(s)
    job = bind(with_recompute(s, recompute), m, hw, hw.efficiency)
    shared, again = evaluate(job, L), evaluate(job, L)
    monkeypatch.setattr(distinct, "MIN_ROWS", 10**9)   # no sharing at all
    alone = evaluate(job, L)
    for got in (shared, again):
        assert all(np.array_equal(got.breakdown[k], alone.breakdown[k]) for k in alone.breakdown)
        assert np.array_equal(got.memory.total, alone.memory.total)
        assert all(np.array_equal(getattr(got, f), getattr(alone, f))
                   for f in ("gemm_s", "attention_s", "memory_bound_s"))


def test_once_per_shape_follows_the_columns_a_function_reads():
    """A function that reads a column the first guess leaves out (dp), or branches on one,
    still gets every row right; one that reads only the guess is called on far fewer rows."""
    rng = np.random.default_rng(3)
    n = 4000
    L = layouts_from_arrays(tp=rng.choice([1, 2, 4], n), pp=rng.choice([1, 2], n), vpp=1, cp=1, ep=1, etp=1,
                            sp=False, zero_stage=rng.choice([0, 3], n), mbs=rng.choice([1, 2], n),
                            dp=rng.choice([1, 2, 4, 8], n), num_mb=1)
    seen = []

    def reads_dp(L):
        seen.append(len(L))
        return L.tp * 10.0 + L.dp

    def branches(L):
        return np.where(L.zero_stage == 3, L.mbs * 1.0, 0.0) if (L.zero_stage == 3).any() else np.zeros(len(L))

    assert np.array_equal(once_per_shape(reads_dp, L), L.tp * 10.0 + L.dp)
    assert np.array_equal(once_per_shape(branches, L, guess=("mbs",)), branches(L))
    seen.clear()
    assert np.array_equal(once_per_shape(lambda L: L.tp * 2.0, L), L.tp * 2.0)
    assert np.array_equal(once_per_shape(reads_dp, L), L.tp * 10.0 + L.dp)
    assert max(seen) <= 12                            # 3 tp x 4 dp distinct rows, not 4,000


def test_memory_does_not_depend_on_overlap():
    """The search checks memory once for every overlap setting of a layout."""
    s = scen("deepseek-v3", hardware="gb200-nvl72", num_gpus=256, seq_length=4096, global_batch_size=512)
    L = _valid_layouts(s)
    job = bind(s, model_of(s), hardware_of(s), hardware_of(s).efficiency)
    for v in variants(s.software.overlap, OVERLAP_KINDS)[::7]:
        other = bind(s.model_copy(update={"software": s.software.model_copy(update={"overlap": v.overlap})}),
                     model_of(s), hardware_of(s), hardware_of(s).efficiency)
        assert np.array_equal(job_memory(other, L).total, job_memory(job, L).total)


# --------------------------------------------------------------------------- compute floor
@pytest.mark.parametrize("model, kw, recompute", SHARED + [
    ("gpt3-175b", dict(num_gpus=64, seq_length=2048, global_batch_size=64, pipeline_layout="Et*3|(t*4|)*22t*5L"),
     "none")], ids=[s[0] for s in SHARED] + ["gpt3-layout"])
def test_compute_floor_never_exceeds_the_step(model, kw, recompute):
    """floor = (1 - 1e-9) x micro-batches x (l / pp) x one layer's compute: the busiest rank
    computes at least its share of the layers every micro-batch. Checked on every valid layout;
    and it is that product, from block_time called directly."""
    s = scen(model, **kw)
    L = _valid_layouts(s)                             # with a pipeline_layout: pp * vpp = its 24 stages
    m, hw = model_of(s), hardware_of(s)
    job = bind(with_recompute(s, recompute), m, hw, hw.efficiency)
    floor, step = compute_floor_s(job, L), evaluate(job, L).step_time_s
    assert len(L) and (floor <= step).all() and (floor > 0.2 * step).any()
    kinds = layer_kinds(m)
    compute = sum((b.fwd_s + b.bwd_s) * sum(k is kind for k in kinds) / len(kinds)
                  for kind in (LayerKind.DENSE, LayerKind.MOE) if kind in kinds
                  for b in [block_time(layer_ops(m, kind, s.software), m, L, s.seq_length, s.precision, job.hardware,
                                       hw.efficiency, s.software)])
    expected = L.num_mb * len(kinds) / L.pp * compute
    assert np.allclose(floor, expected, rtol=1e-8, atol=0) and (floor < expected).all()


@pytest.mark.parametrize("model, kw", [
    ("gpt3-175b", dict(num_gpus=512, seq_length=2048, global_batch_size=1536)),
    ("deepseek-v3", dict(hardware="gb200-nvl72", num_gpus=1024, seq_length=4096, global_batch_size=4096)),
    (TINY_MOE, dict(num_gpus=16)),
])
def test_best_only_finds_the_same_best_and_skips_most(model, kw):
    s = scen(model, **kw)
    for top_k in (1, 7):
        full = search(s, SearchOptions(top_k=top_k))
        fast = search(s, SearchOptions(top_k=top_k), best_only=True)
        assert [c.to_dict() for c in fast.candidates] == [c.to_dict() for c in full.candidates]
        assert (fast.num_enumerated, fast.num_valid) == (full.num_enumerated, full.num_valid)
        assert fast.pareto == () and len(fast.table) == 0
        assert fast.num_evaluated <= full.num_evaluated


# ------------------------------------------------------------------------ overlap dimension
@pytest.mark.parametrize("model", [TINY, TINY_MOE])
def test_an_overlap_switch_without_its_traffic_changes_nothing(model):
    """Variants that change only the overlap of traffic a layout does not have are not
    candidates (they would be the same job twice); check that they really are the same."""
    s = scen(model, num_gpus=16)
    m, hw = model_of(s), hardware_of(s)
    L = _valid_layouts(s)
    cols = {"tp": L.tp, "pp": L.pp, "cp": L.cp, "ep": L.ep, "etp": L.etp, "zero_stage": L.zero_stage}
    base = evaluate(bind(s, m, hw, hw.efficiency), L).step_time_s
    checked = 0
    for kind in OVERLAP_KINDS:
        quiet = ~has_traffic(kind, cols, m, 16)
        for value in (0.0, 1.0, None if kind == "tp" else 0.5):
            sw = s.software.model_copy(update={"overlap": s.software.overlap.model_copy(update={kind: value})})
            other = evaluate(bind(s.model_copy(update={"software": sw}), m, hw, hw.efficiency), L).step_time_s
            assert np.array_equal(other[quiet], base[quiet])
            checked += int(quiet.sum())
    assert checked > 0


def test_overlap_search_counts_pins_and_agrees_with_predict():
    s = scen(TINY_MOE, num_gpus=16)
    plain = search(s, SearchOptions(top_k=5))
    wide = search(s, SearchOptions(top_k=50, overlap=("tp", "dp")))
    # Each layout stands for 1, 2 or 4 candidates: the overlap of tp (3 values: 0, None; 0 is own)
    # and of dp, each only where the layout has that traffic.
    L = _valid_layouts(s)
    cols = {"tp": L.tp, "pp": L.pp, "cp": L.cp, "ep": L.ep, "etp": L.etp, "zero_stage": L.zero_stage}
    per = (1 + has_traffic("tp", cols, model_of(s), 16)) * (1 + has_traffic("dp", cols, model_of(s), 16))
    assert plain.num_valid == len(L) * 3 and wide.num_valid == int(per.sum()) * 3   # 3 recompute modes
    assert wide.num_enumerated == wide.num_valid + sum(v for k, v in wide.rejected.items()
                                                       if k != search_module.DOES_NOT_FIT)
    assert wide.best.step_time_s <= plain.best.step_time_s
    assert any(c.scenario.software.overlap != s.software.overlap for c in wide.candidates)
    for c in wide.candidates[:10]:
        p = predict(c.scenario)
        assert (p.step_time_s, p.memory_per_gpu_bytes, p.cost_usd) == (c.step_time_s, c.memory_per_gpu_bytes,
                                                                     c.cost_usd)
    pinned = search(s, SearchOptions(top_k=5, overlap=("tp", "dp"), precisions=("bf16", "fp8"),
                                     pin=("overlap", "precision")))
    assert [c.to_dict() for c in pinned.candidates] == [c.to_dict() for c in plain.candidates]


def test_cli_overlap_option(tmp_path, capsys):
    import yaml
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(json.loads(scen(TINY_MOE).model_dump_json(exclude_none=True))))
    assert main(["search", str(path), "--format", "json", "--top", "3", "--overlap", "all", "--no-profile"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["num_fit"] > 0 and set(out["candidates"][0]["overlap"]) == set(OVERLAP_KINDS)
    assert main(["search", str(path), "--overlap", "tp,nvlink", "--no-profile"]) == 2
    assert capsys.readouterr().err.startswith("perfmodel: error: search: overlap")


# ----------------------------------------------------------------------------------- bench
def test_bench_reports_its_figures(monkeypatch):
    """One repeat, no subprocess: the figures are those of the searches it runs."""
    res = bench_module.bench(1, predict_runs=0, large=False)
    d = res.to_dict()
    assert res.layouts_fit <= res.layouts_valid <= res.layouts_enumerated
    assert res.wide_candidates > 10 * res.layouts_enumerated          # 3 precisions, SP, every overlap switch
    assert res.evaluations_per_s == pytest.approx(res.layouts_fit / res.full_search_wall_s_median)
    assert d["predict_wall_s"] is None and d["large_search_peak_rss_bytes"] is None
    assert d["import_floor_wall_s"] is None and d["predict_over_import_floor"] is None
    assert res.search_over_raw_rate == pytest.approx(res.evaluations_per_s / res.raw_evaluations_per_s)
    assert 0 < res.warm_predict_s < 1
    assert bench_module.peak_rss_bytes() > 10 * 2**20


def test_bench_times_predict_beside_the_import_floor():
    """Issue 54: each predict process runs in turn with one that only imports the libraries."""
    predict_s, floor_s, ratio = bench_module.predict_wall_s(3)
    assert 0 < floor_s and 0 < predict_s
    assert ratio > 1     # a predict imports the same libraries and then works


def test_concat_keeps_order():
    s = scen()
    t = search(s, SearchOptions(top_k=3)).table
    both = concat([t.take(slice(0, 5)), t.take(slice(5, 9))])
    assert [both.candidate(i).to_dict() for i in range(9)] == [t.candidate(i).to_dict() for i in range(9)]
