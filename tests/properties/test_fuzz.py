"""Bounded fuzzing of every entry point (issue 31): the Python API, the CLI, hostile files and
the physical invariants. ``scripts/fuzz.py`` runs the same checks longer and prints the counts.

Every input must end as an answer that passes the physical checks or as the one-line error;
none may end in a traceback, a wrong exit status, an invariant violation or a hang.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import fuzz as harness
from support import fuzz_more

SETTINGS = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
SEEDS = st.integers(0, 2**32 - 1)
"""Seeds of ``random.Random`` for the issue-48 checks: varied inputs from the first example (a
Hypothesis ``randoms()`` starts from its simplest draws, which a few seconds of CI never leave)."""


def _assert_no_defect(outcome: harness.Outcome) -> None:
    assert not outcome.defect, f"{outcome.kind}: {outcome.detail}"


@settings(max_examples=150, **SETTINGS)
@given(rng=st.randoms(use_true_random=False))
def test_api_answers_or_one_line_error(rng):
    _assert_no_defect(harness.check_api(harness.scenario_input(rng)))


@settings(max_examples=60, **SETTINGS)
@given(rng=st.randoms(use_true_random=False))
def test_cli_exit_status_and_output(rng, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    _assert_no_defect(harness.check_cli_scenario(harness.scenario_input(rng), tmp, rng))


@pytest.mark.parametrize("content", harness.HOSTILE_TEXTS, ids=range(len(harness.HOSTILE_TEXTS)))
def test_hostile_files(content, tmp_path):
    rng = random.Random(len(content))
    for _ in range(2):
        _assert_no_defect(harness.check_file(content, tmp_path, rng))


@settings(max_examples=60, **SETTINGS)
@given(rng=st.randoms(use_true_random=False))
def test_faster_hardware_is_never_slower(rng):
    """With the default calibration profile, which the edited, faster spec keeps (issue 48)."""
    _assert_no_defect(harness.check_faster_hardware(harness.valid_scenario(rng), rng))


@settings(max_examples=80, **SETTINGS)
@given(seed=SEEDS)
def test_faster_hardware_is_never_slower_with_software_options(seed):
    """Activation offload, ZeRO-3, CUDA graphs, overlap, kernels and MoE options among them."""
    rng = random.Random(seed)
    _assert_no_defect(harness.check_faster_hardware(harness.valid_scenario(rng, software=True), rng))


@settings(max_examples=80, **SETTINGS)
@given(seed=SEEDS)
def test_software_options_answer_or_one_line_error(seed):
    rng = random.Random(seed)
    d = harness.valid_scenario(rng, software=True)
    _assert_no_defect(harness.check_api(d if rng.random() < 0.7 else harness.mutate(d, rng)))


@settings(max_examples=60, **SETTINGS)
@given(seed=SEEDS)
def test_log_readers_read_or_refuse_in_one_line(seed, tmp_path_factory):
    rng = random.Random(seed)
    _assert_no_defect(fuzz_more.check_log(fuzz_more.log_text(rng), tmp_path_factory.mktemp("log"), rng))


@settings(max_examples=20, **SETTINGS)
@given(seed=SEEDS)
def test_studies_section(seed, tmp_path_factory):
    rng = random.Random(seed)
    tmp = tmp_path_factory.mktemp("studies")
    _assert_no_defect(fuzz_more.check_studies(harness.valid_scenario(rng, software=True), tmp, rng))


@settings(max_examples=5, **SETTINGS)
@given(seed=SEEDS)
def test_size_in_worker_processes(seed, tmp_path_factory):
    rng = random.Random(seed)
    tmp = tmp_path_factory.mktemp("size")
    _assert_no_defect(fuzz_more.check_size_processes(harness.valid_scenario(rng), tmp, rng))


@settings(max_examples=60, **SETTINGS)
@given(rng=st.randoms(use_true_random=False))
def test_goodput_in_unit_interval_and_monotone(rng):
    _assert_no_defect(harness.check_goodput(rng))


@settings(max_examples=12, **SETTINGS)
@given(rng=st.randoms(use_true_random=False))
def test_app_on_crafted_links(rng):
    pytest.importorskip("streamlit")
    _assert_no_defect(harness.check_app(harness.hostile_link(rng)))
