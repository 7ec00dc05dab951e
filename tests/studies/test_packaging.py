"""The installed package is whole (issue 50): the wheel carries the hardware specs and the
calibration profiles, and nothing reads files beside the checkout. The build itself is checked by
scripts/wheel_check.sh (run by scripts/test.sh); these tests keep its inputs honest."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from perfmodel.spec import paths
from perfmodel.spec.hardware import HARDWARE_DIR
from perfmodel.spec.profile import PROFILE_DIR

REPO = Path(__file__).resolve().parents[2]


def test_a_checkout_reads_the_specs_people_edit():
    assert paths.IN_CHECKOUT
    assert HARDWARE_DIR == REPO / "hardware" and PROFILE_DIR == REPO / "calibration" / "profiles"


def test_the_build_carries_hardware_and_profiles():
    setup = (REPO / "setup.py").read_text()
    assert '"hardware"' in setup and '"perfmodel" / "data" / "hardware"' in setup
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "profiles/*.yaml" in data["calibration"]
    manifest = (REPO / "MANIFEST.in").read_text()
    assert "recursive-include hardware *.yaml" in manifest and "calibration/profiles" in manifest


def test_no_code_falls_back_to_a_shared_folder_beside_the_checkout():
    pattern = re.compile(r"""(parent|PROJECT_DIR|REPO|REPO_ROOT)\S*\s*/\s*["']shared["']""")
    offenders = [str(p.relative_to(REPO)) for d in ("perfmodel", "calibration", "app")
                 for p in (REPO / d).rglob("*.py") if pattern.search(p.read_text())]
    assert offenders == []


def test_the_ci_script_runs_the_wheel_check():
    assert "scripts/wheel_check.sh" in (REPO / "scripts" / "test.sh").read_text()
    check = (REPO / "scripts" / "wheel_check.sh").read_text()
    assert "perfmodel predict" in check.replace('/bin/perfmodel" predict', " perfmodel predict")
    assert "pm.predict(" in check


def test_the_build_ships_bytecode_checked_against_its_source(tmp_path):
    """setup.py compiles every module of the wheel (issue 54), hash-checked (PEP 552): valid
    whatever file times the installer writes, so no process compiles perfmodel's modules."""
    import importlib.util
    import shutil
    import subprocess
    import sys

    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("perfmodel", "calibration", "hardware"):
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    for name in ("setup.py", "pyproject.toml", "MANIFEST.in", "README.md"):
        shutil.copy(REPO / name, src / name)
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(tmp_path / "out")], cwd=src,
                   check=True, capture_output=True, timeout=300)
    modules = sorted((tmp_path / "out").rglob("*.py"))
    assert len(modules) > 100 and any(p.name == "evaluate.py" for p in modules)
    for module in modules:
        pyc = Path(importlib.util.cache_from_source(str(module))).read_bytes()
        assert int.from_bytes(pyc[4:8], "little") == 0b11, module          # hash-based, checked
        assert pyc[8:16] == importlib.util.source_hash(module.read_bytes()), module
