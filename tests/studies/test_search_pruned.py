"""The best-only search that prunes before it expands (``perfmodel.studies.search.pruned``) finds
what the streaming search finds: the same top k, the same counts of broken rules, layouts
enumerated and valid, and, where no layout fits, the same count of those that do not; counts
searched together (``best_by_count``) give what each gives alone; and where the floor reads a
column the module does not key it by, the search streams instead, with the same results."""

from __future__ import annotations

import pytest
from support import with_software

import perfmodel.studies.search.pruned as pruned
import perfmodel.studies.search.pruned_timing as pruned_timing
import perfmodel.studies.search.search as search_module
from perfmodel.spec.scenario import Scenario, parse_scenario
from perfmodel.studies.search.search import DOES_NOT_FIT, SearchOptions, best_by_count, search

TINY = dict(name="tiny", num_layers=4, hidden_size=256, num_attention_heads=8, num_query_groups=4,
            ffn_hidden_size=1024, gated_mlp=True, vocab_size=1000)
TINY_MOE = dict(TINY, name="tiny-moe", num_layers=6, moe=dict(num_experts=8, top_k=2, expert_ffn_hidden_size=512,
                                                             num_dense_layers=1), mtp_layers=1)


def scen(model=TINY, **over) -> Scenario:
    base = dict(hardware="h100-sxm", num_gpus=16, model=model if isinstance(model, str) else dict(model),
                seq_length=512, global_batch_size=32, training_tokens=1e9)
    base.update(over)
    return parse_scenario(with_software(base))


def streamed(s: Scenario, options: SearchOptions, monkeypatch):
    """The streaming search's answer (``search_module._stream``)."""
    with monkeypatch.context() as m:
        m.setattr(search_module, "_prunable", lambda plan: False)
        return search(s, options, best_only=True)


def same(a, b) -> None:
    assert [c.to_dict() for c in a.candidates] == [c.to_dict() for c in b.candidates]
    assert (a.num_enumerated, a.num_valid) == (b.num_enumerated, b.num_valid)
    rules = lambda r: {k: v for k, v in r.rejected.items() if k != DOES_NOT_FIT}   # noqa: E731
    assert rules(a) == rules(b)
    if a.best is None:     # nothing fits: every valid layout was checked, by both
        assert a.rejected == b.rejected and a.top_reason() == b.top_reason()


CASES = [
    (TINY, dict(num_gpus=16), dict(top_k=3)),
    (TINY_MOE, dict(num_gpus=16), dict(top_k=1, precisions=("bf16", "fp8"))),
    (TINY_MOE, dict(num_gpus=32, global_batch_size=64), dict(top_k=5, schedules=("1f1b", "interleaved", "zb-v",
                                                                                 "dualpipe"),
                                                           sequence_parallel=(True, False))),
    (TINY_MOE, dict(hardware="a100-sxm-80gb", num_gpus=16), dict(top_k=2, precisions=("bf16", "fp8"))),
    (TINY, dict(num_gpus=16, pipeline_layout="Et*2|t*2L"), dict(top_k=2, zero_stages=(1, 3), max_micro_batch_size=4)),
    (TINY, dict(num_gpus=8, recompute_num_layers=1), dict(top_k=1, pin=("zero_stage", "tp"))),
    ("deepseek-v3", dict(hardware="h100-sxm", num_gpus=64, seq_length=4096, global_batch_size=512), dict(top_k=1)),
    ("deepseek-v3", dict(hardware="gb200-nvl72", num_gpus=256, seq_length=4096, global_batch_size=1024),
     dict(top_k=2)),
]


@pytest.mark.parametrize("model, over, options", CASES)
def test_pruned_finds_what_the_stream_finds(model, over, options, monkeypatch):
    s, opts = scen(model, **over), SearchOptions(**options)
    same(search(s, opts, best_only=True), streamed(s, opts, monkeypatch))


@pytest.mark.parametrize("model, over, counts", [
    (TINY_MOE, dict(), (4, 8, 16, 32)),
    ("deepseek-v3", dict(hardware="gb200-nvl72", seq_length=4096, global_batch_size=1024), (8, 64, 128, 256)),
])
def test_counts_searched_together_give_what_each_gives(model, over, counts, monkeypatch):
    s, opts = scen(model, **over), SearchOptions(top_k=2)
    together = best_by_count(s, counts, opts)
    for n, res in zip(counts, together):
        alone = s.model_copy(update={"num_gpus": n})
        assert res.scenario.num_gpus == n
        same(res, search(alone, opts, best_only=True))
        same(res, streamed(alone, opts, monkeypatch))


def test_a_floor_that_reads_outside_the_key_streams(monkeypatch):
    s, opts = scen(TINY_MOE), SearchOptions(top_k=2)
    want = streamed(s, opts, monkeypatch)
    parts = pruned.floor_parts

    def reading_pp(job, L, memo=True):
        L.pp       # a floor that would read the pipeline degree: not a function of the layer shape
        return parts(job, L, memo)

    monkeypatch.setattr(pruned, "floor_parts", reading_pp)
    with pytest.raises(pruned.Unprunable):
        plan = search_module._plan(s, opts, s.cost, None, True)
        pruned_timing.best_per_count([plan], [search_module._tally(s)])
    same(search(s, opts, best_only=True), want)
    assert [r.best.to_dict() for r in best_by_count(s, (16,), opts)] == [want.best.to_dict()]


@pytest.mark.parametrize("model, over", [
    (TINY_MOE, dict(num_gpus=32, global_batch_size=64)),
    ("deepseek-v3", dict(hardware="gb200-nvl72", num_gpus=256, seq_length=4096, global_batch_size=1024)),
])
def test_batch_level_ep_overlap_still_prunes(model, over, monkeypatch):
    """Only the steady 1F1B passes pair their all-to-alls (``pipeline.combined_1f1b_paired_frac``,
    a function of pp, vpp and the micro-batches), but the floor takes every pass as paired (a
    lower bound), so its parts stay a function of the layer shape and the search prunes."""
    s = scen(model, **over, software={"overlap": {"ep": 1.0}})
    opts = SearchOptions(top_k=2)
    plan = search_module._plan(s, opts, s.cost, None, True)
    pruned_timing.best_per_count([plan], [search_module._tally(s)])   # raises Unprunable if not
    same(search(s, opts, best_only=True), streamed(s, opts, monkeypatch))
