"""Sizing and scaling that grow the global batch (issue 35): the batch rungs, the fixed batch that
misses a deadline the grown batch meets, and the words that say the batch was what limited it."""

from __future__ import annotations

import pytest

import perfmodel as pm
from perfmodel.present.verdicts import sizing_reason_text
from perfmodel.spec.errors import InputError
from perfmodel.spec.studies import LLAMA3_BATCH_TOKENS
from perfmodel.studies.search.batch import MAX_BATCH_DOUBLINGS, batch_rungs, grown_batch
from perfmodel.studies.search.sizing import size_cluster

EXAMPLE = "perfmodel/data/example_scenario.yaml"   # Llama 3 70B, seq 8192, global batch 128 (1M tokens)
DAY = 86400.0


@pytest.fixture(scope="module")
def example():
    return pm.load_scenario(EXAMPLE)


def test_batch_rungs_double_up_to_the_limit(example):
    # 128 x 8192 = 1,048,576 tokens; doubling four times reaches 2048 x 8192 = 16,777,216 = Llama 3's 16M.
    assert LLAMA3_BATCH_TOKENS == 2048 * 8192
    assert batch_rungs(example, LLAMA3_BATCH_TOKENS) == (128, 256, 512, 1024, 2048)
    assert batch_rungs(example, LLAMA3_BATCH_TOKENS - 1) == (128, 256, 512, 1024)
    assert batch_rungs(example, None) == (128,)
    assert batch_rungs(example, 1000.0) == (128,)          # a limit below the scenario's batch never shrinks it
    with pytest.raises(InputError, match="max_batch_tokens: .*more than 12 doublings"):
        batch_rungs(example, 128 * 8192 * 2.0 ** (MAX_BATCH_DOUBLINGS + 1))


def test_grown_batch_doubles_with_the_gpus(example):
    # 64 GPUs in the scenario: 128 at 64 and below, 256 at 128, 512 at 256..511, capped at 2048.
    assert [grown_batch(example, n, LLAMA3_BATCH_TOKENS) for n in (8, 64, 127, 128, 256, 511, 1024, 65536)] == \
        [128, 128, 128, 256, 512, 512, 2048, 2048]


@pytest.fixture(scope="module")
def b200_rows(example):
    kw = dict(tokens=15e12, deadline_s=30 * DAY, budget_usd=None, hardware_ids=["b200"],
              gpu_counts=[2048, 4096, 8192, 16384])
    fixed = size_cluster(example, **kw).rows[0]
    grown = size_cluster(example, **kw, max_batch_tokens=LLAMA3_BATCH_TOKENS).rows[0]
    return fixed, grown


def test_fixed_batch_misses_the_deadline_the_grown_batch_meets(b200_rows):
    fixed, grown = b200_rows
    # At 1M tokens per step no count of B200s trains 15T tokens in 30 days ...
    assert fixed.choice is None and fixed.rule == "deadline_missed"
    assert all(o.global_batch_size == 128 for o in fixed.options)
    assert min(o.time_to_train_s for o in fixed.options) > 30 * DAY
    assert fixed.limited_by == "gpu_counts" and fixed.binding.num_gpus == 16384
    assert "try more GPUs, or let the global batch grow" in sizing_reason_text(fixed)
    # ... with the batch free to double up to 16M tokens, one does, and the row says the batch limited it.
    c = grown.choice
    assert grown.rule == "cheapest" and grown.batch_grown
    assert c.global_batch_size in (256, 512, 1024, 2048) and c.time_to_train_s <= 30 * DAY
    assert grown.fixed_rule == "deadline_missed" and grown.fixed_binding.global_batch_size == 128
    text = sizing_reason_text(grown)
    assert "the global batch grown to" in text and "from 1.05M tokens (128 x 8,192)" in text
    assert "the batch, not the hardware, limited it" in text
    assert "fastest found" in text and "> deadline 30.0 d" in text
    # Cost is GPUs x wall time x the listed price (B200 $7.00 per GPU-hour): the choice is the
    # cheapest option on time, at any batch.
    for o in grown.options:
        assert o.cost_usd == pytest.approx(o.num_gpus * o.time_to_train_s / 3600 * 7.0, rel=1e-12)
    on_time = [o for o in grown.options if o.time_to_train_s <= 30 * DAY]
    assert c.cost_usd == min(o.cost_usd for o in on_time)
    d = grown.to_dict()
    assert d["batch_grown"] and d["global_batch_size"] == c.global_batch_size and d["fixed_rule"] == "deadline_missed"


def test_the_batch_grows_only_where_the_scenarios_batch_misses(example):
    # A deadline the scenario's batch meets: nothing grows, and the options are all at 128.
    row = size_cluster(example, 1e12, deadline_s=400 * DAY, hardware_ids=["h100-sxm"], gpu_counts=[64, 128],
                       max_batch_tokens=LLAMA3_BATCH_TOKENS).rows[0]
    assert row.rule == "cheapest" and not row.batch_grown
    assert {o.global_batch_size for o in row.options} == {128}
    assert "grown" not in sizing_reason_text(row)


def test_api_size_grows_by_default_and_keeps_the_batch_when_asked(example):
    kw = dict(deadline_s=30 * DAY, hardware_ids=["b200"], gpu_counts=[4096, 8192], profile=None)
    assert pm.size(example, 15e12, **kw).rows[0].batch_grown
    assert pm.size(example, 15e12, grow_batch=False, **kw).rows[0].choice is None
    sc = pm.parse_scenario({**pm.scenario_to_dict(example), "studies": {"grow_batch": False}})
    assert pm.size(sc, 15e12, **kw).rows[0].choice is None


def test_scale_grow_mode_doubles_the_batch(example):
    res = pm.scale(example, [64, 256], mode="grow", profile=None)
    assert [p.global_batch_size for p in res.points] == [128, 512]
    with pytest.raises(InputError, match="mode: must be 'strong', 'weak' or 'grow'"):
        pm.scale(example, [64], mode="bigger", profile=None)
