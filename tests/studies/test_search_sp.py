"""Sequence parallelism as a searched dimension: on and off on every layout with tp > 1, off
alone where tp = 1, each candidate the same as ``predict`` of its scenario, pinnable, and the
CLI's ``--sequence-parallel``."""

from __future__ import annotations

import json
from typing import get_args

import numpy as np
import pytest
from support import spec_predict as predict
from support import with_software

from perfmodel.cli import main
from perfmodel.engine.enumerate import enumerate_layouts, enumeration
from perfmodel.spec.hardware import load_hardware
from perfmodel.spec.scenario import Precision, Scenario, hardware_of, model_of, parse_scenario
from perfmodel.studies.bench import BENCH_SCENARIO, WIDE_OPTIONS
from perfmodel.studies.search.search import SearchOptions, bounds_for, search

TINY = dict(name="tiny", num_layers=4, hidden_size=256, num_attention_heads=8, num_query_groups=4,
            ffn_hidden_size=1024, gated_mlp=True, vocab_size=1000)


def scen(**over) -> Scenario:
    base = dict(hardware="h100-sxm", num_gpus=16, model=dict(TINY), seq_length=512, global_batch_size=32,
                training_tokens=1e9)
    base.update(over)
    return parse_scenario(with_software(base))


def _layouts(s: Scenario, options: SearchOptions) -> dict:
    return enumerate_layouts(model_of(s), hardware_of(s), s.num_gpus, s.global_batch_size, s.seq_length,
                             bounds_for(s, options))


def _keys(cols: dict, with_sp: bool) -> list:
    names = sorted(k for k in cols if k != "sp" or with_sp)
    return sorted(zip(*(cols[k].tolist() for k in names)))


def test_both_settings_on_every_tp_layout_and_off_alone_without_tp():
    s = scen()
    own, both = _layouts(s, SearchOptions()), _layouts(s, SearchOptions(sequence_parallel=(True, False)))
    assert np.array_equal(own["sp"], own["tp"] > 1)                     # the default: on wherever tp > 1
    tp_rows = int((own["tp"] > 1).sum())
    assert 0 < tp_rows < len(own["tp"])
    assert len(both["tp"]) == len(own["tp"]) + tp_rows                  # one more row per tp > 1 layout
    assert not both["sp"][both["tp"] == 1].any()
    # the same layouts, each tp > 1 one once with SP and once without
    on = {k: v[both["sp"] | (both["tp"] == 1)] for k, v in both.items()}
    off = {k: v[~both["sp"] & (both["tp"] > 1)] for k, v in both.items()}
    assert _keys(on, True) == _keys(own, True)
    assert _keys(off, False) == _keys({k: v[own["tp"] > 1] for k, v in own.items()}, False)
    only_off = _layouts(s, SearchOptions(sequence_parallel=(False,)))
    assert len(only_off["tp"]) == len(own["tp"]) and not only_off["sp"].any()


def test_blocks_are_the_enumeration_with_sp_searched():
    s = scen(num_gpus=32)
    bounds = bounds_for(s, SearchOptions(sequence_parallel=(True, False)))
    whole = enumerate_layouts(model_of(s), hardware_of(s), 32, 32, 512, bounds)
    parts = [c for c, _, _ in enumeration(model_of(s), hardware_of(s), 32, 32, 512, bounds).blocks(100)]
    assert len(parts) > 1
    assert all(np.array_equal(whole[k], np.concatenate([p[k] for p in parts])) for k in whole)


def test_sp_search_agrees_with_predict_and_pins():
    s = scen()
    res = search(s, SearchOptions(top_k=400, sequence_parallel=(True, False)))
    seen = {(c.scenario.parallelism.tp > 1, c.scenario.parallelism.sp) for c in res.candidates}
    assert (True, False) in seen and (True, True) in seen and (False, True) not in seen
    for c in [c for c in res.candidates if c.scenario.parallelism.tp > 1][:6]:
        p = predict(c.scenario)
        assert (p.step_time_s, p.memory_per_gpu_bytes) == (c.step_time_s, c.memory_per_gpu_bytes)
    plain = search(s, SearchOptions(top_k=5))
    pinned = search(s, SearchOptions(top_k=5, sequence_parallel=(True, False), pin=("sequence_parallel",)))
    assert pinned.num_enumerated < res.num_enumerated
    # the scenario's own setting (null: on with tp > 1) is the default's
    assert [c.to_dict() for c in pinned.candidates] != [] and pinned.best.step_time_s >= plain.best.step_time_s


def test_sp_off_costs_activation_memory_at_the_same_layout():
    """Without SP each TP rank keeps the whole sequence's layer-norm and dropout activations
    (Korthikanti et al. 2022, eq. 2 against eq. 4): more memory for the same layout."""
    base = scen(parallelism=dict(tp=4, sequence_parallel=True))
    off = scen(parallelism=dict(tp=4, sequence_parallel=False))
    assert predict(off).memory_per_gpu_bytes > predict(base).memory_per_gpu_bytes


def test_cli_sequence_parallel_option(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(scen().model_dump(mode="json", exclude_none=True)))
    assert main(["search", str(path), "--format", "json", "--sequence-parallel", "on,off", "--no-profile"]) == 0
    both = json.loads(capsys.readouterr().out)
    assert main(["search", str(path), "--format", "json", "--no-profile"]) == 0
    own = json.loads(capsys.readouterr().out)
    assert both["num_enumerated"] > own["num_enumerated"]
    assert main(["search", str(path), "--sequence-parallel", "sometimes", "--no-profile"]) == 2
    assert capsys.readouterr().err.strip() == "perfmodel: error: --sequence-parallel: 'sometimes' is not one of on, off"


def test_the_widened_bench_search_tries_every_precision_its_hardware_runs():
    hw = load_hardware(BENCH_SCENARIO["hardware"])
    runs = [p for p in get_args(Precision)
            if hw.gpu.supports(p)]
    assert sorted(WIDE_OPTIONS["precisions"]) == sorted(runs)
    assert WIDE_OPTIONS["sequence_parallel"] == (True, False)


@pytest.mark.parametrize("bad", [(), (True, False, True), ("on",)])
def test_search_option_is_checked(bad):
    from perfmodel.spec.errors import InputError
    from perfmodel.studies.search.search import parse_search_options
    with pytest.raises(InputError, match="sequence_parallel"):
        parse_search_options({"sequence_parallel": bad})


def test_moe_with_ep_and_tp_needs_sequence_parallelism():
    """Megatron-Core refuses ep > 1 with tp > 1 without SP (ModelParallelConfig.__post_init__), so
    predict names the field and the SP-off search offers no such layout."""
    from perfmodel.spec.errors import InputError
    moe = dict(TINY, name="tiny-moe", moe=dict(num_experts=4, top_k=2, expert_ffn_hidden_size=512))
    bad = scen(model=moe, parallelism=dict(tp=2, ep=2, sequence_parallel=False))
    with pytest.raises(InputError, match=r"parallelism.sequence_parallel.*ep\(2\) with tp\(2\) needs sequence"):
        predict(bad)
    predict(scen(model=moe, parallelism=dict(tp=2, ep=2)))          # SP on (null: on with tp > 1)
    predict(scen(model=moe, parallelism=dict(tp=2, ep=1, sequence_parallel=False)))
    res = search(scen(model=moe), SearchOptions(top_k=1000, sequence_parallel=(False,)))
    assert all(not (c.scenario.parallelism.tp > 1 and c.scenario.parallelism.ep > 1) for c in res.candidates)
    assert any("needs sequence parallelism" in r for r in res.rejected)


@pytest.mark.parametrize("par, overlap, expected", [
    (dict(tp=2, pp=1, cp=1, zero_stage=1), dict(tp=0.0, dp=1.0, cp=1.0), ["dp"]),     # no cp traffic at cp = 1
    (dict(tp=2, pp=2, cp=2, zero_stage=3), dict(tp=None, dp=0.0, pp=1.0, cp=1.0, fsdp=1.0),
     ["tp", "cp", "pp", "fsdp"]),
    (dict(tp=1, pp=1, cp=1, zero_stage=0), dict(tp=None, dp=0.0), []),                # tp = 1: nothing to hide
])
def test_a_candidate_names_the_traffic_it_overlaps(par, overlap, expected):
    from perfmodel.studies.search.search import PINNABLE
    s = scen(parallelism=par, software=dict(overlap=overlap))
    best = search(s, SearchOptions(top_k=1, pin=PINNABLE)).best
    assert best.overlapped() == expected and best.to_dict()["overlapped"] == expected
