"""``perfmodel serve`` (one serving scenario) and ``perfmodel validate-serving`` (the serving
engine against published serving results), thin over ``perfmodel.serving_api``."""

from __future__ import annotations

import perfmodel as pm
from perfmodel.cli.common import add_profile_option, emit_json, profile_choice
from perfmodel.present import fmt
from perfmodel.present.serving_report import CURVE_HEADER, curve_rows, latency_line, serve_rows, validation_markdown


def cmd_serve(args) -> int:
    if args.size:
        hardware = tuple(h for h in args.hardware.split(",") if h) if args.hardware else None
        return print_size(pm.size_serving(args.scenario, hardware=hardware, profile=profile_choice(args)).to_dict(),
                          args.format)
    d = pm.serve(args.scenario, profile=profile_choice(args)).to_dict()
    if args.format == "json":
        emit_json(d)
        return 0
    print(fmt.table(serve_rows(d)))
    print()
    print(fmt.table(curve_rows(d), header=CURVE_HEADER))
    return 0


def print_size(d: dict, form: str) -> int:
    if form == "json":
        emit_json(d)
        return 0
    rows = [[o["hardware"], o["layout"], str(o["replicas"]), str(o["num_gpus"]),
             f"{o['goodput_requests_per_s_per_replica']:.3g}", fmt.usd(o["usd_per_hour"]) + "/h", o["reason"] or "ok"]
            for o in d["options"]]
    print(fmt.table(rows, header=["hardware", "replica layout", "replicas", "GPUs", "goodput req/s per replica", "price",
                                  "verdict"]))
    b = d["best"]
    print(f"cheapest for {d['requests_per_s']:.3g} requests/s: " + (
        f"{b['replicas']} x {b['layout']} on {b['hardware']} ({b['num_gpus']} GPUs, {fmt.usd(b['usd_per_hour'])}/h)"
        if b else "none meets the objectives"))
    return 0


def cmd_validate_serving(args) -> int:
    d = pm.validate_serving(args.runs, profile=profile_choice(args)).to_dict()
    from perfmodel.studies.observed.serving_validation import SERVING_RUNS
    named = "" if args.runs == str(SERVING_RUNS) else f" {args.runs}"
    return print_validation(d, args.format, f"perfmodel validate-serving{named}")


def print_validation(d: dict, form: str, command: str) -> int:
    if form == "json":
        emit_json(d)
    elif form == "markdown":
        print(validation_markdown(d, command))
    else:
        rows = [[c["id"], c["layout"], f"{c['predicted_output_tokens_per_s_per_gpu']:,.0f}",
                 f"{c['measured_output_tokens_per_s_per_gpu']:,.0f}", f"{c['error']:+.1%}"] for c in d["cases"]]
        print(fmt.table(rows, header=["run", "layout", "predicted tok/s/GPU", "measured", "error"]))
        by = ", ".join(f"{g} {fmt.percent(v['mape'])} ({v['cases']})" for g, v in d["mape_by_gpu"].items())
        print(f"MAPE {fmt.percent(d['mape'])} over {d['num_cases']} results ({by}); {len(d['skipped'])} rows not compared")
        if latency_line(d):
            print(f"latency at the published load: {latency_line(d)}")
    return 0


def register(sub) -> None:
    from perfmodel.studies.observed.serving_validation import SERVING_RUNS

    p = sub.add_parser("serve", help="serving: TTFT, TPOT, tokens/s, goodput and $ per million tokens")
    p.add_argument("scenario", help="a serving scenario YAML (hardware, model, num_gpus, serving: ...)")
    p.add_argument("--format", choices=["json", "table"], default="table")
    p.add_argument("--size", action="store_true",
                   help="size the service: the cheapest hardware, tp and replicas serving requests_per_s within "
                        "the objectives")
    p.add_argument("--hardware", default=None, metavar="ID,ID", help="with --size: the hardware to consider")
    add_profile_option(p)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("validate-serving", help="the serving engine against published serving results")
    p.add_argument("runs", nargs="?", default=str(SERVING_RUNS))
    p.add_argument("--format", choices=["json", "table", "markdown"], default="table")
    add_profile_option(p)
    p.set_defaults(func=cmd_validate_serving)
