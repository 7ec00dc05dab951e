"""Start-up of the ``perfmodel`` program (issue 54): it exits without tearing down its objects
once its output is flushed, and looks for no pydantic plugins, with the same output and exit
status as ``main`` in-process."""

import io
import json
import subprocess
import sys
import tomllib
from contextlib import redirect_stdout
from pathlib import Path

from perfmodel.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _program(*args, **kw):
    return subprocess.run([sys.executable, "-m", "perfmodel.cli", *args], cwd=ROOT, timeout=120, **kw)


def test_the_console_script_is_run():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["perfmodel"] == "perfmodel.cli:run"


def test_the_program_prints_what_main_prints_to_a_file(tmp_path):
    """A file is block-buffered: what the program leaves in its buffer is lost unless flushed
    before the exit that skips the interpreter's teardown."""
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["predict", "--format", "json"]) == 0
    path = tmp_path / "out.json"
    with open(path, "w") as f:
        r = _program("predict", "--format", "json", stdout=f, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 0, r.stderr
    assert path.read_text() == out.getvalue()
    assert json.loads(path.read_text())["step_time_s"] > 0


def test_the_program_keeps_the_exit_status_of_an_input_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("num_gpus: -1\n")
    r = _program("predict", str(bad), capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.startswith("perfmodel: error:") and r.stderr.count("\n") == 1


def test_a_core_command_looks_for_no_pydantic_plugin():
    """pydantic reads every installed package's entry points for plugins when it builds the first
    validator (``pydantic.plugin._loader``), unless PYDANTIC_DISABLE_PLUGINS says not to."""
    code = ("import io, contextlib\nfrom perfmodel.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    rc = main(['predict'])\n"
            "import pydantic.plugin._loader as loader\nprint(rc, loader._plugins)\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env=env).stdout.split()
    assert out == ["0", "None"]
