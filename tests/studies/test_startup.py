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


def test_predict_loads_neither_other_commands_nor_serving_nor_the_timeline():
    """A ``predict`` process imports the module that registers it, not those of the other commands
    (``perfmodel.cli.COMMAND_MODULES``), nor the serving engine, models or the timeline the API names."""
    code = ("import io, contextlib, sys\nfrom perfmodel.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    rc = main(['predict', '--format', 'json'])\n"
            "print(rc, *sorted(m for m in sys.modules if m.startswith('perfmodel')))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] == "0" and "perfmodel.cli.job" in out and "perfmodel.api" in out
    unused = {"perfmodel.cli.studies", "perfmodel.cli.tools", "perfmodel.cli.trace", "perfmodel.cli.serve",
              "perfmodel.cli.diagnose", "perfmodel.serving_api", "perfmodel.engine.serve", "perfmodel.spec.serving",
              "perfmodel.formulas.timeline", "perfmodel.formulas.schedule_orders"}
    assert unused.isdisjoint(out), sorted(unused.intersection(out))


def test_every_command_is_registered_by_the_module_named_for_it():
    from perfmodel.cli import COMMAND_MODULES, CORE_COMMANDS, build_parser

    assert set(COMMAND_MODULES) == set(CORE_COMMANDS)
    for command in CORE_COMMANDS:
        choices = build_parser(with_external=False, command=command)._subparsers._group_actions[0].choices
        assert command in choices
    assert list(build_parser(with_external=False)._subparsers._group_actions[0].choices) == list(COMMAND_MODULES)
