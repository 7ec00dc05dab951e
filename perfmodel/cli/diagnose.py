"""``perfmodel diagnose``, ``sensitivity`` and ``read-log``: observed runs against the model.

    perfmodel diagnose RUN.yaml [--log FILE ...]      predicted against measured, ranked causes
    perfmodel sensitivity SCENARIO [--steps N]        what 2x of each resource buys
    perfmodel read-log FILE [--scenario SCENARIO]     a log's measured runs, as a RUN.yaml

``perfmodel predict SCENARIO --anchor RUN.yaml`` (``perfmodel.cli.job``) predicts a what-if
anchored on measured runs.
"""

from __future__ import annotations

import sys

import perfmodel as pm
from perfmodel.cli.common import add_profile_option, emit_json, profile_choice, to_json
from perfmodel.spec.errors import InputError, dump_yaml
from perfmodel.studies.views.sensitivity import MAX_PATH_STEPS

MAX_LOGS = 64
"""Log files of one command: a scaling sweep has a handful of runs (``limits.MAX_SWEEP_POINTS``)."""


def logs_of(args) -> list[str]:
    logs = list(args.log or ())
    if len(logs) > MAX_LOGS:
        raise InputError("--log", f"{len(logs)} logs; at most {MAX_LOGS}")
    return logs


def cmd_diagnose(args) -> int:
    from perfmodel.present.diagnosis import diagnosis_text
    if args.trace:
        return _diagnose_trace(args)
    runs, assumed = pm.load_runs_assumed(args.runs, logs_of(args), stack=args.stack)
    d = pm.diagnose(runs, profile=profile_choice(args))
    if args.format == "json":
        emit_json({**d.to_dict(), "assumptions": list(assumed)})
        return 0
    print("\n".join([*(f"Assumed: {line}" for line in assumed), diagnosis_text(d)]))
    return 0


def _diagnose_trace(args) -> int:
    """``diagnose SCENARIO --trace profile.json``: the trace's kernel classes against the prediction."""
    from perfmodel.present.trace_report import trace_text
    if args.log:
        raise InputError("--trace", "compares a trace with the scenario's prediction; give --log without --trace")
    c = pm.compare_trace(pm.load_scenario(args.runs), args.trace, profile=profile_choice(args))
    if args.format == "json":
        emit_json(c.to_dict())
    else:
        print(trace_text(c))
    return 0


def cmd_sensitivity(args) -> int:
    from perfmodel.present.diagnosis import sensitivity_text
    s = pm.sensitivity(pm.load_scenario(args.scenario), profile=profile_choice(args), path_steps=args.steps)
    if args.format == "json":
        emit_json(s.to_dict())
        return 0
    print(sensitivity_text(s))
    return 0


def cmd_read_log(args) -> int:
    from perfmodel.spec.observed.runs import runs_to_cases
    if args.scenario:
        runs = pm.load_runs(args.scenario, [args.log])
        doc = runs_to_cases(runs)
    else:
        measured = pm.read_log(args.log)
        doc = {"format": "perfmodel-cases/1",
               "cases": [{"id": m.source, "measured": m.to_dict()} for m in measured]}
        print("perfmodel: note: no --scenario: add each case's scenario before diagnosing or anchoring",
              file=sys.stderr)
    if args.format == "json":
        print(to_json(doc))
    else:
        print(dump_yaml(doc), end="")
    return 0


def register(sub) -> None:
    p = sub.add_parser("diagnose", help="measured runs against the model: the gap's likely causes, ranked")
    p.add_argument("runs", metavar="RUN.yaml",
                   help="a cases file (scenario + measured per case), one case, or a scenario measured by --log")
    p.add_argument("--log", action="append", metavar="FILE",
                   help="a training log (Megatron-LM, NeMo, torchtitan, HF Trainer, Lightning/CSV, YAML); repeatable")
    p.add_argument("--trace", metavar="profile.json",
                   help="a PyTorch profiler trace of the scenario (RUN.yaml is then a scenario): measured against "
                        "predicted per kernel class")
    p.add_argument("--stack", default="auto", metavar="auto|NAME",
                   help="the software stack of the runs: auto (default) takes the one the logs' framework implies "
                        "where the scenario names none; a name (perfmodel/data/stacks.yaml) sets it")
    p.add_argument("--format", choices=["table", "json"], default="table")
    add_profile_option(p)
    p.set_defaults(func=cmd_diagnose)

    p = sub.add_parser("sensitivity", help="the step time's elasticity to each resource, and the bottleneck path")
    p.add_argument("scenario")
    p.add_argument("--steps", type=int, default=4,
                   help=f"doublings of the binding resource to follow (0 to {MAX_PATH_STEPS}; default 4)")
    p.add_argument("--format", choices=["table", "json"], default="table")
    add_profile_option(p)
    p.set_defaults(func=cmd_sensitivity)

    p = sub.add_parser("read-log", help="the measured runs of a training log, as a RUN.yaml")
    p.add_argument("log", metavar="FILE")
    p.add_argument("--scenario", help="the scenario the log measured (its runs are bound to it)")
    p.add_argument("--format", choices=["yaml", "json"], default="yaml")
    p.set_defaults(func=cmd_read_log)

