"""scripts/stack_cases.py: the shared published runs with only a named stack added per case."""

import importlib.util
from pathlib import Path

import pytest
import yaml

from perfmodel.studies.observed.validation import load_cases

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("stack_cases", ROOT / "scripts" / "stack_cases.py")
stack_cases = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stack_cases)
COPY = ROOT / "perfmodel" / "data" / "published_runs.yaml"


def test_each_case_of_the_project_copy_names_the_stack_its_source_maps_to():
    """The copy and the script agree: the copy's per-case options are overrides of the very stack
    the script would add, so the two figures differ by those options only."""
    for case in yaml.safe_load(COPY.read_text())["cases"]:
        if case.get("scenario"):
            assert case["scenario"]["software"]["stack"] == stack_cases.stack_of(case), case["id"]


def test_with_stacks_adds_the_stack_and_nothing_else():
    cases = [{"id": "a", "source": "torchtitan benchmark by Trainy (June 2025) — x", "scenario": {"num_gpus": 8}},
             {"id": "b", "source": "PyTorch torchtitan benchmark report (end of 2024) — t", "scenario": {"x": 1}},
             {"id": "b_fsdp", "source": "PyTorch torchtitan benchmark report (end of 2024) — t", "scenario": {}},
             {"id": "c", "source": "anything", "scenario": None}]
    out = stack_cases.with_stacks(cases[:2] + cases[3:])
    assert out[0]["scenario"] == {"num_gpus": 8, "software": {"stack": "torchtitan-compile"}}
    assert out[1]["scenario"] == {"x": 1, "software": {"stack": "torchtitan-2412-compile"}}
    assert out[2]["scenario"] is None
    assert stack_cases.stack_of(cases[2]) == "torchtitan-2412-eager"
    assert "software" not in cases[0]["scenario"]          # the input is left as it was
    with pytest.raises(SystemExit):
        stack_cases.stack_of({"id": "d", "source": "a publication no rule covers"})


@pytest.mark.skipif(not stack_cases.SHARED.exists(), reason="the shared published runs are not beside the checkout")
def test_every_case_of_the_shared_file_maps_to_a_stack():
    cases = stack_cases.with_stacks(load_cases(stack_cases.SHARED))
    runnable = [c for c in cases if c.get("scenario")]
    assert len(runnable) > 200
    assert all(set(c["scenario"]["software"]) == {"stack"} for c in runnable)
