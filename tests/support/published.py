"""The published runs perfmodel can resolve, for tests that run every one of them."""

from __future__ import annotations

from pathlib import Path

from perfmodel.engine.rules import resolve
from perfmodel.spec.errors import InputError
from perfmodel.spec.profile import AUTO, efficiencies_for
from perfmodel.spec.scenario import hardware_of, parse_scenario
from perfmodel.studies.observed.validation import load_cases

CASES = Path(__file__).resolve().parents[2] / "perfmodel" / "data" / "published_runs.yaml"


def runnable_published_cases() -> list[tuple[str, object, object]]:
    """(id, scenario, resolved job with the calibration profile) of every published run that
    has a scenario perfmodel accepts."""
    out = []
    for case in load_cases(CASES):
        if not case.get("scenario"):
            continue
        try:
            sc = parse_scenario(case["scenario"])
            r = resolve(sc, efficiencies_for(hardware_of(sc), AUTO)[0])
        except InputError:
            continue
        out.append((case["id"], sc, r))
    return out
