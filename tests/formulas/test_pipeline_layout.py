"""Explicit pipeline layouts (Megatron-Core pipeline_model_parallel_layout), checked by hand:
the parser, the rank each virtual stage runs on, Megatron-Core's validity rules, and the
stage times, bubble and memory that follow from moving layers between ranks."""

from dataclasses import fields

import numpy as np
import pytest
from support import spec_predict as predict
from support import with_software

from perfmodel.engine.evaluate import evaluate
from perfmodel.engine.job_memory import job_memory
from perfmodel.engine.rules import resolve
from perfmodel.formulas.counts import layer_params
from perfmodel.formulas.layouts import Layouts
from perfmodel.formulas.model_states import state_bytes_per_param
from perfmodel.formulas.workload import LayerKind
from perfmodel.spec.errors import InputError
from perfmodel.spec.model import ModelSpec, MoeSpec
from perfmodel.spec.pipeline_layout import parse, rank_load, validate
from perfmodel.spec.scenario import parse_scenario
from perfmodel.studies.search.search import SearchOptions, search

DENSE = ModelSpec(name="dense", num_layers=4, hidden_size=1024, num_attention_heads=8, num_query_groups=8,
                  ffn_hidden_size=4096, gated_mlp=True, vocab_size=32000)
DEEPSEEK_16 = "Et*4|(t*4|)*14tmL"     # Megatron-Bridge's DeepSeek-V3 layout for 16 virtual stages


def _scenario(layout=None, pp=2, vpp=1, model=DENSE, **kw):
    base = dict(hardware="h100-sxm", num_gpus=8, model=model.model_dump(), seq_length=4096,
                global_batch_size=32, micro_batch_size=1, parallelism=dict(pp=pp, vpp=vpp),
                pipeline_layout=layout)
    base.update(kw)
    return parse_scenario(with_software(base))


def _arrays(sc):
    job = resolve(sc)
    return evaluate(job.job, job.layouts)


# ------------------------------------------------------------------------------- parser
def test_parse_unrolls_groups_and_repeats_as_megatron_core():
    stages = parse(DEEPSEEK_16)
    assert len(stages) == 16 and stages[0] == "Etttt" and stages[-1] == "tmL"
    assert all(st == "tttt" for st in stages[1:-1])
    assert sum(st.count("t") for st in stages) == 61
    # Megatron-Core's own docstring example: [E t t t] + [t t] * 29 + [m], [L]
    doc = parse("Ettt|(tt|)*29,m|L")
    assert doc == ("Ettt",) + ("tt",) * 29 + ("m", "L")


def test_virtual_stage_k_runs_on_rank_k_mod_pp():
    load = rank_load(parse(DEEPSEEK_16), 8)      # ranks hold stages r and r + 8
    assert load.decoder.tolist() == [8] * 7 + [5]
    assert load.mtp.tolist() == [0] * 7 + [1] and load.loss.tolist() == [0] * 7 + [1]
    load4 = rank_load(parse(DEEPSEEK_16), 4)     # stages r, r + 4, r + 8, r + 12
    assert load4.decoder.tolist() == [16, 16, 16, 13]


@pytest.mark.parametrize("text, reason", [
    ("Et*4|(t*4|)*14tL", "0 MTP modules m; the model has mtp_layers(1)"),
    ("Et*4|(t*4|)*14tmL|L", "the loss L must appear exactly once"),
    ("t*4|E(t*4|)*14tmL", "the embedding E must appear exactly once, as the first layer"),
    ("Et*4|(t*4|)*14mL", "60 decoder layers t; the model has num_layers(61)"),
    ("Et*3|(t*4|)*14tmtL", "decoder layers t must come before the MTP modules m"),
])
def test_megatron_core_rules_are_one_line_errors(text, reason):
    with pytest.raises(InputError) as e:
        validate(parse(text), 61, 1)
    assert e.value.field == "pipeline_layout" and reason in str(e.value) and "\n" not in str(e.value)


def test_unknown_symbols_and_a_stage_count_that_does_not_match_pp_are_refused():
    with pytest.raises(InputError, match="unknown symbol 'x'"):
        parse("Ext|tL")
    with pytest.raises(InputError) as e:
        resolve(_scenario("Et*2|t*2L", pp=4))
    assert e.value.field == "parallelism.pp" and "pipeline_layout has 2 virtual stages; pp(4) * vpp(1) = 4" in str(e.value)


# ------------------------------------------------------------------------- step, by hand
def test_the_even_layout_spelled_out_predicts_what_no_layout_predicts():
    a, b = predict(_scenario(None)), predict(_scenario("Et*2|t*2L"))
    assert b.step_time_s == pytest.approx(a.step_time_s, rel=1e-12)
    assert b.breakdown_s == pytest.approx(a.breakdown_s, rel=1e-12)


def test_moving_a_layer_to_the_first_rank_sets_stage_times_and_bubble():
    even = _arrays(_scenario(None))
    t_layer = float(even.stage_s.first_s[0]) / 2             # 2 layers on the first rank
    t_head = float(even.stage_s.last_s[0]) - 2 * t_layer      # the last rank adds the output layer
    uneven = _arrays(_scenario("Et*3|tL"))
    first, last = 3 * t_layer, t_layer + t_head
    assert float(uneven.stage_s.first_s[0]) == pytest.approx(first, rel=1e-12)
    assert float(uneven.stage_s.last_s[0]) == pytest.approx(last, rel=1e-12)
    # 1F1B: the slowest rank paces every micro-batch, the other fills and drains once
    assert float(uneven.breakdown["pipeline_bubble"][0]) == pytest.approx(first + last - max(first, last), rel=1e-12)
    num_mb = 32 // 4                                        # dp = 8 / pp = 4
    pace = sum(float(uneven.breakdown[k][0]) for k in ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm"))
    assert pace == pytest.approx(num_mb * max(first, last), rel=1e-12)


def test_interleaved_layout_bubble_is_divided_by_vpp():
    arr = _arrays(_scenario("Et|t|t|tL", pp=2, vpp=2))        # rank 0: stages 0, 2; rank 1: 1, 3
    even = _arrays(_scenario(None, pp=2, vpp=2))
    assert float(arr.step_time_s[0]) == pytest.approx(float(even.step_time_s[0]), rel=1e-12)
    first, last = float(arr.stage_s.first_s[0]), float(arr.stage_s.last_s[0])
    assert float(arr.breakdown["pipeline_bubble"][0]) == pytest.approx((first + last - max(first, last)) / 2,
                                                                       rel=1e-12)


def test_search_with_a_layout_tries_only_layouts_with_its_stage_count():
    res = search(_scenario("Et|t|t|tL", pp=2, vpp=2), SearchOptions(top_k=50))
    pp, vpp = res.table.layouts.pp, res.table.layouts.vpp
    assert len(res.table) > 0 and (pp * vpp == 4).all()


# ------------------------------------------------------------------------ memory, by hand
def test_the_even_layout_spelled_out_holds_the_memory_no_layout_holds():
    a, b = predict(_scenario(None)), predict(_scenario("Et*2|t*2L"))
    assert b.memory_breakdown_bytes == pytest.approx(a.memory_breakdown_bytes, rel=1e-12)


def test_a_middle_rank_with_the_most_layers_sets_the_peak():
    six = DENSE.model_copy(update={"num_layers": 6})
    even = predict(_scenario(None, pp=3, model=six, num_gpus=3)).memory_breakdown_bytes
    uneven = predict(_scenario("Et|t*4|tL", pp=3, model=six, num_gpus=3)).memory_breakdown_bytes
    # no recompute: a rank stores (micro-batches in flight) x (its layers) layer activations.
    # Even split: rank 0 holds 3 in flight x 2 layers = 6; the layout's rank 1 holds 2 x 4 = 8.
    assert uneven["activations"] == pytest.approx(even["activations"] * 8 / 6, rel=1e-12)
    w_bytes = state_bytes_per_param("bf16", True)[0]
    assert uneven["weights"] == pytest.approx(4 * layer_params(six, LayerKind.DENSE) * w_bytes, rel=1e-12)


def test_moe_without_a_layout_weighs_the_first_rank_past_the_dense_layers():
    # two dense-MLP layers on ranks 0 and 1, MoE layers on 2 and 3: rank 2 holds a MoE layer with
    # 2 micro-batches in flight, and the even split must find it as the layout spelled out does
    moe = DENSE.model_copy(update={"moe": MoeSpec(num_experts=8, top_k=8, expert_ffn_hidden_size=16384,
                                                   num_dense_layers=2)})
    a = predict(_scenario(None, pp=4, model=moe, num_gpus=4)).memory_breakdown_bytes
    b = predict(_scenario("Et|t|t|tL", pp=4, model=moe, num_gpus=4)).memory_breakdown_bytes
    assert b == pytest.approx(a, rel=1e-12)


def test_layout_memory_over_layouts_of_several_pp_is_each_layouts_own():
    # a layout with 4 virtual stages runs as pp 4 or as pp 2 x vpp 2; evaluated together, each
    # row must get the memory it gets alone (the search evaluates them together)
    four = _arrays(_scenario("Et|t|t|tL", pp=4, vpp=1, num_gpus=4))
    two = _arrays(_scenario("Et|t|t|tL", pp=2, vpp=2, num_gpus=4))
    job = resolve(_scenario("Et|t|t|tL", pp=4, vpp=1, num_gpus=4))
    both = Layouts(**{f.name: np.concatenate([getattr(resolve(_scenario("Et|t|t|tL", pp=p, vpp=v,
                                                                                         num_gpus=4)).layouts, f.name)
                                              for p, v in ((2, 2), (4, 1))]) for f in fields(Layouts)})
    mem = job_memory(job.job, both)
    assert float(mem.total[0]) == pytest.approx(float(two.memory.total[0]), rel=1e-12)
    assert float(mem.total[1]) == pytest.approx(float(four.memory.total[0]), rel=1e-12)


def test_layout_with_interleaved_moe_layers_is_refused():
    moe = DENSE.model_copy(update={"moe": MoeSpec(num_experts=4, top_k=1, expert_ffn_hidden_size=512,
                                                  interleave_step=2)})
    with pytest.raises(InputError) as e:
        resolve(_scenario("Et*2|t*2L", model=moe))
    assert e.value.field == "software.pipeline_layout" and "interleave_step (2)" in str(e.value)
    resolve(_scenario(None, model=moe))      # the even split is accepted
