"""A pipeline schedule is one record (``perfmodel.spec.schedules``): a schedule registered in a
test fixture, touching that record alone, is a choice of the scenario, the CLI and the app, and
the engine prices it with the record's closed forms."""

from __future__ import annotations

from dataclasses import replace

import pytest

import perfmodel as pm
from perfmodel.cli import build_parser
from perfmodel.formulas import pipeline as pl
from perfmodel.spec import schedules
from perfmodel.spec.errors import InputError
from perfmodel.spec.scenario import parse_scenario

SLOW = "fixture-slow-1f1b"
SLOWDOWN = 3
"""The fixture's bubble: 1F1B's, three times over."""


@pytest.fixture
def slow_schedule(monkeypatch):
    record = replace(schedules.SCHEDULES["zb-h1"], name=SLOW, source="test fixture",
                     bubble=lambda p, v, F, B, W: SLOWDOWN * (p - 1) * (F + B + W))
    monkeypatch.setitem(schedules.SCHEDULES, SLOW, record)
    return record


def gpt3(schedule):
    return parse_scenario(dict(name="gpt3", hardware="h100-sxm", num_gpus=128, model="gpt3-175b", seq_length=2048,
                               global_batch_size=256, recompute="selective",
                               parallelism=dict(tp=8, pp=8, pipeline_schedule=schedule)))


def test_a_registered_schedule_is_a_choice_everywhere(slow_schedule):
    assert SLOW in schedules.schedule_names()
    assert gpt3(SLOW).parallelism.schedule == SLOW                  # the scenario accepts it
    sub = build_parser(with_external=False)._subparsers._group_actions[0].choices["search"]
    assert SLOW in sub.format_help().replace("\n", "").replace(" ", "")   # the CLI's --schedules help
    assert pl.schedule_name(pl.schedule_code(SLOW)) == SLOW


def test_the_engine_prices_a_registered_schedule(slow_schedule):
    slow, zb = pm.predict(gpt3(SLOW)), pm.predict(gpt3("zb-h1"))
    code, p, F, B, W = pl.schedule_code(SLOW), 8, 1.0, 2.0, 0.5
    assert float(pl.bubble_closed_form_s(code, p, 1, F, B, W)) == SLOWDOWN * 7 * 3.5
    # everything but the bubble as ZB-H1 (the record it was copied from)
    assert slow.breakdown_s["compute"] == pytest.approx(zb.breakdown_s["compute"])
    assert slow.breakdown_s["pipeline_bubble"] > 2 * zb.breakdown_s["pipeline_bubble"] > 0
    assert slow.memory_breakdown_bytes == zb.memory_breakdown_bytes


def test_an_unknown_schedule_is_a_one_line_error():
    with pytest.raises(InputError, match="not one of 1f1b, interleaved"):
        gpt3("2f2b")
