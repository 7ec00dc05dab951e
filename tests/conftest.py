"""Tiers: each test is marked with its folder (formulas, anchors, properties, studies, app,
browser), so ``pytest -m formulas`` runs the formula tests alone, in seconds; a hypothesis test
is marked ``properties`` too, wherever it sits (``-m "formulas and not properties"``: the
hand-computed cases only)."""

from pathlib import Path

import pytest

TIERS = ("formulas", "anchors", "properties", "studies", "app", "browser")


def pytest_collection_modifyitems(config, items):
    for item in items:
        parts = Path(str(item.fspath)).parts
        for tier in TIERS:
            if tier in parts:
                item.add_marker(getattr(pytest.mark, tier))
        if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
            item.add_marker(pytest.mark.properties)
