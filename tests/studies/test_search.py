"""Layout search: the vectorised rules, agreement with ``predict``, an exhaustive cross-check,
cost and Pareto properties, and the CLI."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import spec_predict as predict
from support import with_software

from perfmodel.cli import main
from perfmodel.engine.rules import check_layout, layout_violation, layout_violation_fields
from perfmodel.spec.cost import CostModel
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.scenario import Parallelism, Scenario, parse_scenario
from perfmodel.studies.search.search import DOES_NOT_FIT, SearchOptions, pareto_front, parse_search_options, search

H100 = load_hardware("h100-sxm")
TINY = dict(name="tiny", num_layers=4, hidden_size=256, num_attention_heads=8, num_query_groups=4,
            ffn_hidden_size=1024, gated_mlp=True, vocab_size=1000)
TINY_MOE = dict(TINY, name="tiny-moe", moe=dict(num_experts=4, top_k=2, expert_ffn_hidden_size=512))


def scen(model=TINY, **over) -> Scenario:
    base = dict(hardware="h100-sxm", num_gpus=8, model=model if isinstance(model, str) else dict(model),
                seq_length=512, global_batch_size=16, training_tokens=1e9)
    base.update(over)
    return parse_scenario(with_software(base))


def close(a, b, rel=1e-9):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


# ------------------------------------------------------------------ vectorised layout rules
@pytest.mark.parametrize("par, extra, field, reason", [
    (dict(tp=3), {}, "num_gpus", "tp(3) * pp(1) * cp(1) = 3 does not divide num_gpus(8)"),
    (dict(tp=8, pp=1), {"model": dict(TINY, num_attention_heads=12, num_query_groups=12, hidden_size=384)},
     "parallelism.tp", "tp(8) does not divide num_attention_heads(12)"),
    (dict(cp=8), {"seq_length": 500}, "parallelism.cp", "cp(8) does not divide seq_length(500)"),
    (dict(tp=4, cp=2), {"seq_length": 6}, "parallelism.sequence_parallel",
     "seq_length(6) / cp(2) = 3 is not divisible by tp(4)"),
    (dict(vpp=2), {}, "parallelism.vpp", "vpp(2) > 1 needs pp > 1 (pp = 1)"),
    (dict(pp=8), {}, "parallelism.pp", "pp(8) * vpp(1) = 8 exceeds num_layers(4) + embedding + loss = 6 pipeline units"),
    (dict(ep=2), {}, "parallelism.ep", "ep(2) and etp(1) need an MoE model"),
    (dict(), {"global_batch_size": 12}, "global_batch_size",
     "micro_batch_size(1) * dp(8) = 8 does not divide global_batch_size(12)"),
    (dict(pp=2, vpp=2), {"global_batch_size": 12}, "global_batch_size",
     "interleaved schedule needs micro-batches(3) to be a multiple of pp(2)"),
    (dict(), {"precision": "fp4"}, "precision", "H100 SXM5 80GB has no dense fp4 tensor-core peak"),
])
def test_check_layout_messages_show_the_arithmetic(par, extra, field, reason):
    s = scen(parallelism=par, **extra)
    with pytest.raises(InputError) as err:
        check_layout(s, s.model, H100)
    assert (err.value.field, err.value.reason) == (field, reason)


def test_moe_rules():
    s = scen(TINY_MOE, parallelism=dict(ep=3))
    with pytest.raises(InputError, match=r"ep\(3\) does not divide moe.num_experts\(4\)"):
        check_layout(s, s.model, H100)
    s = scen(TINY_MOE, num_gpus=4, parallelism=dict(tp=1, pp=2, ep=4, etp=1))
    with pytest.raises(InputError, match=r"ep\(4\) \* etp\(1\) = 4 does not divide dp\(2\) \* cp\(1\) \* tp\(1\) = 2"):
        check_layout(s, s.model, H100)


def test_vectorised_rules_match_the_scalar_check_row_by_row():
    rng = np.random.default_rng(7)
    n = 400
    cols = dict(tp=rng.choice([1, 2, 3, 4, 8], n), pp=rng.choice([1, 2, 4, 8], n), vpp=rng.choice([1, 2], n),
                cp=rng.choice([1, 2, 4], n), ep=rng.choice([1, 2, 4], n), etp=rng.choice([1, 2], n),
                micro_batch_size=rng.choice([1, 2, 3], n))
    sp = cols["tp"] > 1
    for model in (TINY, TINY_MOE):
        base = scen(model, num_gpus=16, global_batch_size=32)
        fields, reasons = layout_violation_fields(base.model, H100, 512, 32, 16, "bf16", sp=sp, **cols)
        assert np.array_equal(reasons, layout_violation(base.model, H100, 512, 32, 16, "bf16", sp=sp, **cols))
        for i in range(n):
            s = base.model_copy(update=dict(
                micro_batch_size=int(cols["micro_batch_size"][i]),
                parallelism=base.parallelism.model_copy(update={k: int(cols[k][i]) for k in
                                                                ("tp", "pp", "vpp", "cp", "ep", "etp")})))
            try:
                check_layout(s, s.model, H100)
                got = ("", "")
            except InputError as exc:
                got = (exc.field, exc.reason)
            assert got == (fields[i], reasons[i])


# ------------------------------------------------------------ agreement with predict
@pytest.mark.parametrize("model, kw, options", [
    ("gpt3-175b", dict(num_gpus=1024, seq_length=2048, global_batch_size=1536), {}),
    ("mixtral-8x7b", dict(num_gpus=64, seq_length=4096, global_batch_size=256), {"max_micro_batch_size": 2}),
    (TINY_MOE, dict(num_gpus=16, global_batch_size=32), {"precisions": ("bf16", "fp8")}),
])
def test_every_searched_layout_equals_predict(model, kw, options):
    s = scen(model, **kw)
    res = search(s, SearchOptions(**options))
    t = res.table
    rng = np.random.default_rng(0)
    for i in rng.choice(len(t), size=min(25, len(t)), replace=False):
        p, c = predict(t.scenario(i)), t.candidate(i)
        for a, b in [(p.step_time_s, c.step_time_s), (p.mfu, c.mfu), (p.tokens_per_s_per_gpu, c.tokens_per_s_per_gpu),
                     (p.memory_per_gpu_bytes, c.memory_per_gpu_bytes), (p.cost_usd, c.cost_usd),
                     (p.energy_kwh, c.energy_kwh), (p.time_to_train_s, c.time_to_train_s)]:
            assert close(a, b)
        for k, v in p.breakdown_s.items():
            assert close(v, c.breakdown_s[k])
        assert (p.bottleneck, p.dp, p.num_microbatches) == (c.bottleneck, c.dp, c.num_microbatches)
        assert p.fits_in_memory and c.fits


def test_search_refuses_what_predict_refuses():
    """One rule set: a pipeline layout that does not fit the model is refused by both (search
    used to skip the check and rank layouts of a job predict refuses)."""
    bad = scen(pipeline_layout="Et*3|t*3L", recompute="none")   # 6 decoder layers; the model has 4
    with pytest.raises(InputError, match="pipeline_layout") as by_predict:
        predict(bad.model_copy(update={"parallelism": Parallelism(pp=2)}))
    with pytest.raises(InputError, match="pipeline_layout") as by_search:
        search(bad)
    assert str(by_predict.value) == str(by_search.value)


@pytest.mark.parametrize("extra", [
    dict(recompute="full", recompute_num_layers=1),
    dict(recompute="none", activation_offload_layers=1),
    dict(pipeline_layout="Et*2|t*2L"),
])
def test_every_candidate_search_returns_is_accepted_by_predict_with_the_same_numbers(extra):
    """Search varies recompute; the fields scoped to one recompute mode follow it
    (``recompute_num_layers`` goes with full, offload only without recompute), so each
    returned layout is one predict accepts, with the same numbers. Before, the top candidates
    with recompute none or selective carried recompute_num_layers and predict refused them."""
    res = search(scen(**extra), SearchOptions(top_k=50))
    assert res.candidates
    for c in res.candidates + res.pareto:
        p = predict(c.scenario)
        assert (p.step_time_s, p.mfu, p.memory_per_gpu_bytes, p.cost_usd) == (
            c.step_time_s, c.mfu, c.memory_per_gpu_bytes, c.cost_usd)
        if c.scenario.recompute != "full":
            assert c.scenario.software.recompute_num_layers is None
    if "activation_offload_layers" in extra:
        assert {c.scenario.recompute for c in res.candidates} == {"none"}
        assert any("activation_offload_layers" in r for r in res.rejected)


def _exhaustive_best(s: Scenario, options: SearchOptions):
    """A plain loop over predict: every degree dividing num_gpus, every option."""
    m = s.model
    divs = [d for d in range(1, s.num_gpus + 1) if s.num_gpus % d == 0]
    eps = [d for d in divs if m.moe and m.moe.num_experts % d == 0] if m.moe else [1]
    best = None
    for tp, pp, cp, vpp, ep, etp, z, mbs, rc in itertools.product(
            divs, divs, divs, range(1, m.num_layers + 1), eps, divs if m.moe else [1], options.zero_stages,
            range(1, options.max_micro_batch_size + 1), options.recompute):
        if vpp > 1 and m.num_layers % (pp * vpp):
            continue   # the search's definition: interleaving uses whole chunks
        x = s.model_copy(update=dict(micro_batch_size=mbs, recompute=rc, parallelism=Parallelism(
            tp=tp, pp=pp, vpp=vpp, cp=cp, ep=ep, etp=etp, zero_stage=z)))
        try:
            check_layout(x, m, H100)
        except InputError:
            continue
        p = predict(x)
        if p.fits_in_memory and (best is None or p.step_time_s < best.step_time_s):
            best = p
    return best


@pytest.mark.parametrize("model", [TINY, TINY_MOE])
def test_search_best_equals_an_exhaustive_predict_loop(model):
    s = scen(model, num_gpus=4, global_batch_size=8)
    opts = SearchOptions(zero_stages=(0, 3), recompute=("none", "full"), max_micro_batch_size=2)
    res = search(s, opts)
    ref = _exhaustive_best(s, opts)
    assert close(res.best.step_time_s, ref.step_time_s)


def test_memory_filter_and_reason_counts_add_up():
    s = scen("gpt3-175b", num_gpus=64, seq_length=2048, global_batch_size=64)
    res = search(s, SearchOptions(max_micro_batch_size=2))
    assert res.rejected[DOES_NOT_FIT] > 0
    rule_rejections = sum(v for k, v in res.rejected.items() if k != DOES_NOT_FIT)
    assert res.num_enumerated == res.num_valid + rule_rejections
    assert res.num_valid == res.num_fit + res.rejected[DOES_NOT_FIT]
    assert res.table.fits.all() and all(c.fits for c in res.candidates)


def test_full_gpt3_search_on_1024_h100_is_fast():
    s = scen("gpt3-175b", num_gpus=1024, seq_length=2048, global_batch_size=1536)
    res = search(s)
    assert res.elapsed_s < 10.0
    assert res.num_evaluated > 10_000


def test_scenario_layout_is_ignored_and_precision_opt_in():
    a = search(scen(parallelism=dict(tp=2, pp=2)))
    b = search(scen(parallelism=dict(tp=1, cp=2), micro_batch_size=4))
    assert a.best.layout() == b.best.layout()
    assert set(a.table.precision) == {"bf16"}
    both = search(scen(), SearchOptions(precisions=("bf16", "fp8")))
    assert set(both.table.precision) == {"bf16", "fp8"}


def test_ranking_and_objectives():
    s = scen(num_gpus=16, global_batch_size=32)
    for objective in ("time", "cost", "tokens_per_usd"):
        res = search(s, SearchOptions(objective=objective, top_k=5))
        assert len(res.candidates) == 5
        key = {"time": lambda c: c.step_time_s, "cost": lambda c: c.cost_usd,
               "tokens_per_usd": lambda c: -c.tokens_per_usd}[objective]
        vals = [key(c) for c in res.candidates]
        assert vals == sorted(vals)
        assert all(c.scenario.num_gpus == 16 for c in res.candidates)


def test_progress_reaches_the_total():
    seen = []
    search(scen(), progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1][0] == seen[-1][1] and all(d <= t for d, t in seen)


def test_per_step_cost_without_training_tokens():
    s = scen(training_tokens=None)
    res = search(s)
    c = res.best
    assert res.cost_basis == "step" and c.time_to_train_s is None
    price = H100.price.cloud_usd_per_gpu_hour
    assert close(c.cost_usd, c.step_time_s * 8 * price / 3600)


def test_bad_options_are_input_errors():
    with pytest.raises(InputError, match="top_k"):
        parse_search_options({"top_k": 0})
    with pytest.raises(InputError, match="objective"):
        parse_search_options({"objective": "speed"})
    with pytest.raises(InputError, match="hardware"):
        search(scen(hardware="no-such-gpu"))


# ------------------------------------------------------------ properties (hypothesis)
_SMALL = search(scen(num_gpus=16, global_batch_size=32), SearchOptions(gpu_counts=(4, 8, 16)))


@settings(max_examples=10, deadline=None)
@given(price=st.floats(0.5, 20.0))
def test_cloud_cost_is_gpu_hours_times_price(price):
    res = search(scen(), SearchOptions(top_k=3), CostModel(usd_per_gpu_hour=price))
    for c in res.candidates:
        gpu_hours = c.scenario.num_gpus * c.time_to_train_s / 3600
        assert close(c.cost_usd, gpu_hours * price)
        assert close(c.tokens_per_usd, 1e9 / c.cost_usd)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 20), st.integers(1, 20)), min_size=1, max_size=30))
def test_pareto_front_is_exactly_the_non_dominated_points(points):
    t = np.array([p[0] for p in points], float)
    c = np.array([p[1] for p in points], float)
    front = set(pareto_front(t, c).tolist())

    def dominated(i):
        return np.any((t <= t[i]) & (c <= c[i]) & ((t < t[i]) | (c < c[i])))

    assert all(not dominated(i) for i in front)
    for i in set(range(len(points))) - front:   # dominated, or a duplicate of a front point
        assert dominated(i) or any(t[j] == t[i] and c[j] == c[i] for j in front)


def test_search_over_gpu_counts_gives_a_real_front():
    front = _SMALL.pareto
    assert len({c.scenario.num_gpus for c in front}) >= 2   # more GPUs: faster but dearer
    times = [c.time_to_train_s for c in front]
    costs = [c.cost_usd for c in front]
    assert times == sorted(times) and costs == sorted(costs, reverse=True)
    t, c = _SMALL.table.time_to_train_s, _SMALL.table.cost_usd
    for f in front:
        assert not np.any((t <= f.time_to_train_s) & (c <= f.cost_usd)
                          & ((t < f.time_to_train_s) | (c < f.cost_usd)))


# ---------------------------------------------------------------------------------- CLI
def _write(tmp_path, s: Scenario):
    import yaml
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(json.loads(s.model_dump_json(exclude_none=True))))
    return str(path)


def test_cli_search_json_and_csv(tmp_path, capsys):
    path = _write(tmp_path, scen())
    assert main(["search", path, "--format", "json", "--top", "3", "--no-profile"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert len(out["candidates"]) == 3 and out["candidates"][0]["step_time_s"] > 0
    assert main(["search", path, "--format", "csv", "--top", "2", "--no-profile"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and lines[0].startswith("num_gpus,tp,pp")


def test_cli_search_errors_exit_2(tmp_path, capsys):
    path = _write(tmp_path, scen())
    assert main(["search", path, "--top", "0", "--no-profile"]) == 2
    assert main(["search", path, "--precisions", "bf17", "--no-profile"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(e.startswith("perfmodel: error: search:") for e in err)
