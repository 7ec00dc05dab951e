"""The package's layers, read from its imports: no cycle, no upward import, no module over
400 lines (in ``perfmodel``, ``app`` and ``calibration``), nothing in ``perfmodel`` imports
``calibration`` or the app, the app imports only the API, ``spec`` and ``present`` (with
today's exceptions listed), the observed-run readers (``spec/observed``) are read from the
studies up, the per-shape cache is the engine's, and nothing imports ``research/``.

Layers, lowest first: ``spec`` (what the user states) -> ``formulas`` (one module per physical
model) -> ``engine`` (the one place that combines them) -> ``studies`` (search, scaling,
sizing, validation) -> ``present`` (numbers and verdicts in words) -> the public API
(``perfmodel/__init__.py``, ``api.py``) -> ``cli``. A module may import its own layer and the
layers below it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "perfmodel"
LAYERS = ("spec", "formulas", "engine", "studies", "present", "api", "cli")
MAX_LINES = 400


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in ("api", "__init__"):
        return "api"
    return parts[1] if parts[1] in LAYERS else "api"


def _imports(path: Path) -> set[str]:
    """Every perfmodel or calibration module the file imports, at any depth of the file."""
    me = _module_name(path).split(".")
    out = _imported(path, me if path.name == "__init__.py" else me[:-1])
    return {m for m in out if m.split(".")[0] in ("perfmodel", "calibration")}


def _imported(path: Path, package: list[str]) -> set[str]:
    """Every module (and ``module.name``) the file imports, at any depth, relative imports resolved
    against ``package``."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}
    return out


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    return {m: {i for i in _imports(p) if i in mods and i != m} for m, p in mods.items()}


def test_no_upward_import():
    bad = []
    for m, deps in _graph().items():
        for d in deps:
            if d == "perfmodel" and m.startswith("perfmodel.cli"):
                continue
            if LAYERS.index(_layer(d)) > LAYERS.index(_layer(m)):
                bad.append(f"{m} ({_layer(m)}) imports {d} ({_layer(d)})")
    assert not bad, "\n".join(sorted(bad))


def test_perfmodel_never_imports_calibration():
    bad = [f"{m} imports {i}" for m, p in _modules().items() for i in _imports(p) if i.startswith("calibration")]
    assert not bad, "\n".join(bad)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_in_perfmodel():
    # a package's __init__ importing its own modules lazily is not a cycle of modules
    graph = {m: {d for d in deps if not m.endswith(("perfmodel",)) and d != "perfmodel"}
             for m, deps in _graph().items()}
    assert _cycles(graph) == []


def test_no_import_cycle_in_calibration():
    root = PACKAGE.parent / "calibration"
    mods = {f"calibration.{p.stem}": p for p in root.glob("*.py")}
    graph = {m: {i for i in _imports(p) if i in mods and i != m} for m, p in mods.items()}
    assert _cycles(graph) == []


ROOT = PACKAGE.parent
APP = ROOT / "app"
CALIBRATION = ROOT / "calibration"


def _python_files():
    for root in (PACKAGE, APP, CALIBRATION):
        yield from sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", list(_python_files()), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_over_400_lines(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.name}: {lines} lines"


def _app_module(path: Path) -> str:
    rel = path.relative_to(APP).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _app_imports(path: Path) -> set[str]:
    """Every module the app file imports (``appkit.x``, ``pages_.x``, ``perfmodel...``), relative
    imports resolved."""
    me = _app_module(path).split(".")
    return _imported(path, me if path.name == "__init__.py" else me[:-1])


def _app_files() -> dict[str, Path]:
    return {_app_module(p): p for p in APP.rglob("*.py") if "__pycache__" not in p.parts}


def test_no_import_cycle_in_app():
    mods = _app_files()
    graph = {m: {i for i in _app_imports(p) if i in mods and i != m} for m, p in mods.items()}
    assert _cycles(graph) == []


APP_MAY_IMPORT = ("api", "spec", "present")
"""The app is thin over the public API (``perfmodel``, ``perfmodel.api``): beside it, it may read
the schema (``spec``) and the presenters (``present``)."""
APP_EXCEPTIONS_TODAY: set = set()
"""The app's imports below the API today, where the API has no function for them (issue 51 left
them): the test fails on a new one, and on one that has gone, so the list only shrinks."""


def test_app_imports_only_the_api_spec_and_present():
    found = {(str(path.relative_to(ROOT)), ".".join(mod.split(".")[:3]))
             for path in _app_files().values() for mod in _app_imports(path)
             if mod.startswith("perfmodel.") and mod.split(".")[1] in LAYERS
             and mod.split(".")[1] not in APP_MAY_IMPORT}
    assert found == APP_EXCEPTIONS_TODAY


def test_app_and_calibration_sit_above_perfmodel():
    """Nothing in ``perfmodel`` imports the app (or calibration: ``test_perfmodel_never_imports_calibration``)."""
    tops = {"app", "appkit", "pages_"}
    bad = [f"{m} imports {i}" for m, p in _modules().items() for i in _all_imports(p) if i.split(".")[0] in tops]
    assert not bad


def _all_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level:
            out.add(node.module or "")
    return out


OBSERVED = "perfmodel.spec.observed"
"""The readers of what a real run showed (logs, measured runs, traces): they stand on the schema,
and only the studies and the rooms above them read them."""


def test_observed_readers_are_read_only_from_the_studies_up():
    bad = [f"{m} imports {d}" for m, deps in _graph().items() for d in deps
           if d.startswith(OBSERVED) and not m.startswith(OBSERVED)
           and LAYERS.index(_layer(m)) < LAYERS.index("studies")]
    assert not bad, "\n".join(sorted(bad))


def test_the_per_shape_cache_is_the_engines():
    """Module state keyed by identity (``engine/distinct.py``) sits in the engine, not among the
    formulas, which stay pure functions."""
    assert (PACKAGE / "engine" / "distinct.py").exists() and not (PACKAGE / "formulas" / "distinct.py").exists()


RESEARCH = ROOT / "research"


def test_nothing_imports_research():
    """``research/`` may import the package; the package, the app, calibration, scripts and the
    tests never import it (a helper a test needs moves into the package or calibration/)."""
    files = [p for d in (PACKAGE, APP, CALIBRATION, ROOT / "scripts", ROOT / "tests")
             for p in d.rglob("*.py") if "__pycache__" not in p.parts]
    bad = [str(p.relative_to(ROOT)) for p in files if any(i.split(".")[0] == "research" for i in _all_imports(p))]
    assert not bad
    assert (RESEARCH / "README.md").exists() and not (RESEARCH / "__init__.py").exists()


def test_the_cycle_detector_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("fmt", ["table", "json"])
def test_predict_does_not_load_the_optimizers(fmt):
    """``predict`` needs no optimiser: scipy.optimize (0.1-0.3 s of start-up on a 2-core
    machine) loads only for the commands that fit (diagnose, --anchor)."""
    import subprocess
    import sys
    code = ("import sys, io, contextlib\nfrom perfmodel.cli import main\n"
            f"sys.argv = ['perfmodel', 'predict', '--format', '{fmt}']\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    rc = main()\n"
            "print(rc, sorted(m for m in sys.modules if m.startswith('scipy.optimize'))[:1])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PACKAGE.parent).stdout.split()
    assert out == ["0", "[]"]
