"""``perfmodel trace SCENARIO -o step.json``: the predicted step as a Chrome trace (Perfetto,
chrome://tracing)."""

from __future__ import annotations

import json

import perfmodel as pm
from perfmodel.cli.common import add_profile_option, add_set_option, load, profile_choice
from perfmodel.spec.errors import write_text_file


def cmd_trace(args) -> int:
    doc = pm.trace(load(args.scenario, args.set), profile=profile_choice(args))
    write_text_file(args.output, json.dumps(doc, separators=(",", ":")), "--output", inputs=(args.scenario,))
    n = sum(1 for e in doc["traceEvents"] if e["ph"] == "X")
    print(f"wrote {args.output}: {n:,} events; open it in https://ui.perfetto.dev or chrome://tracing")
    return 0


def register(sub) -> None:
    p = sub.add_parser("trace", help="the predicted step as a Chrome trace (Perfetto, chrome://tracing)")
    p.add_argument("scenario")
    p.add_argument("-o", "--output", required=True, metavar="step.json")
    add_set_option(p)
    add_profile_option(p)
    p.set_defaults(func=cmd_trace)
