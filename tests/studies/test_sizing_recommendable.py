"""Sizing recommends only hardware a buyer can get at a sourced price: announced systems and
placeholder prices stay out unless named, and when named they are flagged (issue 50)."""

from __future__ import annotations

import json

import yaml

from perfmodel.cli import main
from perfmodel.spec.cost import CostModel
from perfmodel.spec.hardware import list_hardware_ids, load_hardware
from perfmodel.spec.scenario import parse_scenario
from perfmodel.studies.search.recommendable import recommendable
from perfmodel.studies.search.search import SearchOptions
from perfmodel.studies.search.sizing import size_cluster

SCENARIO = dict(hardware="h100-sxm", num_gpus=8, seq_length=2048, global_batch_size=128,
                model=dict(name="small", num_layers=8, hidden_size=1024, num_attention_heads=16,
                           ffn_hidden_size=4096, vocab_size=32000))
OPTS = SearchOptions(recompute=("none",), max_micro_batch_size=2)
ANNOUNCED = {"gb200-nvl576", "vera-rubin-nvl72", "rubin-ultra-nvl576"}


def test_the_announced_systems_say_so_and_no_shipped_one_does():
    assert {i for i in list_hardware_ids() if load_hardware(i).availability == "announced"} == ANNOUNCED


def test_by_default_no_announced_hardware_and_no_placeholder_price_is_sized():
    res = size_cluster(parse_scenario(SCENARIO), 1e11, gpu_counts=[8], options=OPTS)
    sized = {r.hardware_id for r in res.rows}
    left = dict(res.left_out)
    assert not sized & ANNOUNCED and ANNOUNCED <= set(left)
    assert all("announced" in left[i] for i in ANNOUNCED)
    placeholders = {i for i in list_hardware_ids() if load_hardware(i).price.listed_class == "placeholder"}
    assert placeholders - ANNOUNCED and not sized & placeholders
    assert all("placeholder price" in left[i] for i in placeholders)
    assert sized and sized | set(left) == set(list_hardware_ids())
    assert not any(r.announced or r.placeholder_price for r in res.rows)


def test_your_own_price_is_no_placeholder_but_announced_hardware_stays_out():
    ids, left = recommendable(list_hardware_ids(), CostModel(usd_per_gpu_hour=3.0))
    assert "gb300-nvl72" in ids and set(left) == ANNOUNCED


def test_named_announced_hardware_is_sized_and_flagged_in_the_cli_json(tmp_path, capsys):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    code = main(["size", str(path), "--tokens", "1e11", "--gpus", "8,16", "--hardware", "vera-rubin-nvl72,h100-sxm",
                 "--format", "json", "--jobs", "1"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["hardware"]: r for r in out["rows"]}
    assert rows["vera-rubin-nvl72"]["announced"] is True and rows["vera-rubin-nvl72"]["placeholder_price"] is True
    assert rows["h100-sxm"]["announced"] is False and rows["h100-sxm"]["placeholder_price"] is False
    assert out["left_out"] == {}


def test_the_cli_table_names_what_it_left_out(tmp_path, capsys):
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(SCENARIO))
    assert main(["size", str(path), "--tokens", "1e11", "--gpus", "8", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert "Left out (name them with --hardware to size them)" in out
    assert "rubin-ultra-nvl576 (announced, not shipped, placeholder price)" in out
    table = out.split("Left out")[0]
    assert "rubin-ultra" not in table and "vera-rubin" not in table
