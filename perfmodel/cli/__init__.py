"""Command line: ``perfmodel predict|describe|validate|search|scale|size|bench|app``,
``diagnose|sensitivity|read-log`` (observed runs), ``serve|validate-serving`` (serving), and the
commands other packages register (``bench-hw`` and ``calibrate``, from ``calibration``).

Every command calls the public API (``perfmodel.api``) and words its answer with
``perfmodel.present``. Invalid input exits with status 2 and one line on stderr naming the
field; no traceback. Notes (a scenario key that moved) go to stderr, one line each.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import warnings

from perfmodel.spec.errors import InputError, one_line

CORE_COMMANDS = ("predict", "describe", "validate", "search", "scale", "size", "bench", "app", "diagnose", "trace",
                 "sensitivity", "read-log", "serve", "validate-serving")
ENTRY_POINT_GROUP = "perfmodel.commands"
"""Packages add commands here (``pyproject.toml``): ``name = "module:function"``, where
``function(argv) -> int`` parses its own arguments and raises ``InputError`` on bad input."""


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (exit 2), like every other input error."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} -h)\n")


def _external_commands() -> dict:
    from importlib.metadata import entry_points
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name not in CORE_COMMANDS}


COMMAND_MODULES = {"predict": "job", "describe": "job", "validate": "job", "search": "studies", "scale": "studies",
                   "size": "studies", "bench": "tools", "app": "tools", "trace": "trace", "serve": "serve",
                   "validate-serving": "serve", "diagnose": "diagnose", "sensitivity": "diagnose", "read-log": "diagnose"}
"""The module of ``perfmodel.cli`` that registers each core command: a command about to run needs
only its own (the others import the studies, the views and serving they word)."""


def build_parser(with_external: bool = True, command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command; ``with_external``: also list the commands other packages
    register (reading the installed packages' entry points takes longer than a prediction);
    ``command``: a core command about to run, so that only the module registering it is
    imported (``COMMAND_MODULES``)."""
    from importlib import import_module

    ap = _OneLineParser(prog="perfmodel", description="Analytical performance and cost model of distributed AI training.")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    names = [COMMAND_MODULES[command]] if command in COMMAND_MODULES else dict.fromkeys(COMMAND_MODULES.values())
    for name in names:
        import_module(f"perfmodel.cli.{name}").register(sub)
    for name, ep in sorted(_external_commands().items()) if with_external else ():
        sub.add_parser(name, help=f"from {ep.value.split(':')[0]} (perfmodel {name} -h)", add_help=False)
    return ap


BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"
"""OpenBLAS (numpy's wheels) starts one thread per core when numpy is imported, each with its
buffers: about 50 ms of a ``predict`` on a 2-core machine (``import numpy``: 133 ms, 80 ms with
one thread, medians of 15 interleaved runs). perfmodel's own commands do element-wise work and
fits of a few parameters, no large matrix products, so one thread is all they use."""
SINGLE_BLAS_THREAD_COMMANDS = tuple(c for c in CORE_COMMANDS if c != "app")
"""Not ``app`` (Streamlit's process is its own) nor the commands other packages add (``bench-hw``
times GEMMs)."""


PYDANTIC_PLUGINS_ENV = "PYDANTIC_DISABLE_PLUGINS"
"""pydantic looks for plugins (``importlib.metadata`` entry points of every installed package)
when it builds the first model's validator; perfmodel's models use none, and the CLI's process
holds no other models: off for the core commands (a user's own setting stands)."""


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in SINGLE_BLAS_THREAD_COMMANDS:
        if "numpy" not in sys.modules:
            os.environ.setdefault(BLAS_THREADS_ENV, "1")   # before numpy is imported; a user's choice stands
        os.environ.setdefault(PYDANTIC_PLUGINS_ENV, "__all__")
    external = None
    if argv and argv[0] not in CORE_COMMANDS and not argv[0].startswith("-"):
        external = _external_commands().get(argv[0])
    if external is not None:
        return _run(lambda: external.load()(argv[1:]))
    core = bool(argv) and argv[0] in CORE_COMMANDS and not {"-h", "--help"} & set(argv[1:])
    args = build_parser(with_external=not core, command=argv[0] if core else None).parse_args(argv)
    return _run(lambda: args.func(args))


ONE_JOB_COMMANDS = ("predict", "describe", "validate", "serve", "validate-serving")
"""Commands whose work is bounded (one job, or the published runs one by one): the program runs
them without the cyclic garbage collector, whose passes over the objects that imports build
(pydantic's schemas above all) cost about 5% of a ``predict``; the process ends right after."""


def run() -> None:
    """The ``perfmodel`` program (``python -m perfmodel.cli``): ``main``, then, for the core
    commands, an exit that does not tear down the interpreter's objects one by one once the
    output is flushed (modules, pydantic models, numpy: 44-73 ms of a ``predict``, for nothing
    a core command leaves behind: no atexit handler, no open file of its own). Anything that
    cannot be flushed exits the ordinary way, which reports it."""
    if sys.argv[1:2] and sys.argv[1] in ONE_JOB_COMMANDS:
        gc.disable()
    code = main()
    if sys.argv[1:2] and sys.argv[1] in SINGLE_BLAS_THREAD_COMMANDS:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            sys.exit(code)
        os._exit(code)
    sys.exit(code)


def _run(command) -> int:
    from perfmodel.spec.scenario import MovedKeysNote, ScenarioNote, moved_keys_text

    try:
        with warnings.catch_warnings(record=True) as notes:
            warnings.simplefilter("always", ScenarioNote)
            code = int(command() or 0)
        moved = dict.fromkeys(k for n in notes if isinstance(n.message, MovedKeysNote) for k in n.message.keys)
        texts = [moved_keys_text(moved)] if moved else []
        texts += [str(n.message) for n in notes
                  if issubclass(n.category, ScenarioNote) and not isinstance(n.message, MovedKeysNote)]
        for text in dict.fromkeys(texts):
            print(f"perfmodel: note: {one_line(text)}", file=sys.stderr)
        sys.stdout.flush()        # a full disk or a closed pipe shows here, not at exit
        return code
    except InputError as exc:
        print(f"perfmodel: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _drop_stdout()
        return 0
    except OSError as exc:        # a file the user named (a path too long, stdout on a full device)
        _drop_stdout()
        where = exc.filename if exc.filename is not None else "output"
        print(f"perfmodel: error: {one_line(where)}: {exc.strerror or type(exc).__name__}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the last line of defence: no traceback for users
        print(f"perfmodel: internal error: {type(exc).__name__}: {one_line(exc)}", file=sys.stderr)
        return 1


def _drop_stdout() -> None:
    """Point stdout at /dev/null once writing to it failed, so the interpreter's own flush at exit
    does not fail again with a traceback (Python docs, 'Note on SIGPIPE')."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):   # not a real file (tests capture stdout)
        pass
