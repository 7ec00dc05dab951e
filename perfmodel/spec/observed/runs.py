"""A file of measured runs (``RUN.yaml`` of ``perfmodel diagnose`` and ``predict --anchor``).

It may be:

- a ``perfmodel-cases/1`` file (the format of ``perfmodel/data/published_runs.yaml``): ``cases``,
  each with an ``id``, a ``scenario`` and a ``measured`` block (``perfmodel.spec.observed.measured``; a
  published case's ``derived`` block is read where ``measured`` has no speed);
- one case: a mapping with ``scenario`` and ``measured``;
- a scenario, with the measurements in logs (``--log``: ``perfmodel.spec.observed.logs``), each log one
  run of it (or one per job size, for a CSV or YAML series).

``runs_to_cases`` writes runs back in the first form, so a log reader's output is itself a RUN.yaml.
"""

from __future__ import annotations

from pathlib import Path

from perfmodel.spec import limits
from perfmodel.spec.errors import InputError, read_data_file
from perfmodel.spec.observed.logs import read_log
from perfmodel.spec.observed.measured import THROUGHPUT_KEYS, MeasuredRun, ObservedRun, bind_run, measured_from_mapping
from perfmodel.spec.scenario import inline_local_files, parse_scenario, scenario_to_dict

CASES_FORMAT = "perfmodel-cases/1"


def measured_of_case(case: dict, where: str, source: str = "") -> MeasuredRun:
    """A case's ``measured`` block, or its ``derived`` one where ``measured`` gives no speed."""
    blocks = [(k, case.get(k)) for k in ("measured", "derived") if isinstance(case.get(k), dict)]
    for key, block in blocks:
        if any(block.get(k) is not None for k in THROUGHPUT_KEYS):
            return measured_from_mapping(block, f"{where}.{key}", source=source)
    raise InputError(where, f"no measured speed: give a measured block with one of {', '.join(THROUGHPUT_KEYS)}")


LogRuns = tuple[tuple[str, tuple[MeasuredRun, ...]], ...]
"""(log name, its runs) per log."""


def runs_from_data(data, origin: str, base: Path | None = None, logs: LogRuns = (),
                   local_files: bool = True) -> list[ObservedRun]:
    """The runs of parsed RUN data (see the module docstring); ``logs`` are (name, runs) pairs
    that measure the scenario of a scenario-only file. ``local_files``: a file the user names may
    point at hardware and model files beside it (never for an upload)."""
    if not isinstance(data, dict):
        raise InputError(origin, "must be a mapping: a scenario, a case (scenario + measured) or a cases file")

    def scenario(d, where):
        if not isinstance(d, dict):
            raise InputError(f"{where}.scenario", "must be a mapping")
        return parse_scenario(inline_local_files(d, base) if local_files else d)

    if "cases" in data:
        cases = data["cases"]
        if not isinstance(cases, list) or not 0 < len(cases) <= limits.MAX_CASES:
            raise InputError(f"{origin}.cases", f"must be a list of 1 to {limits.MAX_CASES:,} cases")
        if logs:
            raise InputError("--log", f"{origin} already holds its measured runs (cases); give logs with a "
                                      "scenario file")
        out = []
        for i, case in enumerate(cases):
            where = f"{origin}.cases[{i}]"
            if not isinstance(case, dict):
                raise InputError(where, "must be a mapping with id, scenario and measured")
            run_id = case.get("id", f"case {i + 1}")
            if not isinstance(run_id, str) or not 0 < len(run_id) <= limits.MAX_NAME_LENGTH:
                raise InputError(f"{where}.id", f"must be a name of 1 to {limits.MAX_NAME_LENGTH} characters")
            out.append(bind_run(run_id, scenario(case.get("scenario"), where), measured_of_case(case, where)))
        return out
    if "scenario" in data:
        if set(data) - {"id", "scenario", "measured", "derived"}:
            extra = sorted(set(data) - {"id", "scenario", "measured", "derived"})[0]
            raise InputError(f"{origin}.{extra}", "unknown field (a case holds id, scenario and measured)")
        sc = scenario(data["scenario"], origin)
        out = [] if "measured" not in data and "derived" not in data else [
            bind_run(str(data.get("id", sc.name)), sc, measured_of_case(data, origin))]
    else:
        sc = scenario(data, origin) if "hardware" in data else None
        if sc is None:
            raise InputError(origin, "neither a scenario nor a case (scenario + measured) nor a cases file")
        out = []
    seen: dict = {}
    for name, measured in logs:
        seen[name] = seen.get(name, 0) + 1
        name = name if seen[name] == 1 else f"{name} ({seen[name]})"      # two logs of one file name
        for j, m in enumerate(measured):
            out.append(bind_run(name if len(measured) == 1 else f"{name}[{j + 1}]", sc, m))
    if not out:
        raise InputError(origin, "no measured run: add a measured block, or give logs with --log")
    if len(out) > limits.MAX_CASES:
        raise InputError(origin, f"{len(out):,} runs; at most {limits.MAX_CASES:,}")
    return out


def load_runs(path: str | Path, logs=()) -> list[ObservedRun]:
    """The runs of a RUN file the user names, measured by the log files ``logs`` where it is a
    scenario."""
    p = Path(path)
    read = tuple((Path(log).name, read_log(log)) for log in logs)
    return runs_from_data(read_data_file(p, "runs"), p.name, p.parent, read)


def runs_to_cases(runs: list[ObservedRun]) -> dict:
    """Runs as a ``perfmodel-cases/1`` document (reads back with ``runs_from_data``)."""
    return {"format": CASES_FORMAT, "cases": [
        {"id": r.id, "source": r.measured.source, "scenario": scenario_to_dict(r.scenario),
         "measured": r.measured.to_dict()} for r in runs]}
