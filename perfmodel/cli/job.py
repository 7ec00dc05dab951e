"""``perfmodel predict``, ``describe`` and ``validate``: one job, or the published runs."""

from __future__ import annotations

import perfmodel as pm
from perfmodel.cli.common import (
    EXAMPLE_SCENARIO,
    add_cost_options,
    add_profile_option,
    check_numbers,
    cost_model,
    emit_json,
    load,
    profile_choice,
)
from perfmodel.present import fmt
from perfmodel.spec.errors import InputError


def cmd_predict(args) -> int:
    check_numbers(args)
    if args.anchor:
        return _predict_anchored(args)
    if args.log:
        raise InputError("--log", "measures the runs of --anchor RUN.yaml; give --anchor too")
    sc = load(args.scenario)
    p = pm.predict(sc, profile=profile_choice(args), cost=cost_model(args))
    if args.format == "json":
        emit_json(p.to_dict())
        return 0
    rows = [
        ["step time", fmt.seconds(p.step_time_s)],
        ["tokens/s", fmt.si(p.tokens_per_s, "tok/s")],
        ["tokens/s per GPU", fmt.si(p.tokens_per_s_per_gpu, "tok/s")],
        ["MFU", fmt.percent(p.mfu)],
        ["memory per GPU", f"{fmt.bytes_binary(p.memory_per_gpu_bytes)} "
                           f"({'fits' if p.fits_in_memory else 'DOES NOT FIT'})"],
        ["bottleneck", f"{p.bottleneck} ({p.bottleneck_lens})"],
        ["binding resource", _binding_resource(sc, args)],
        ["params total / active", f"{fmt.si(p.model_params_total)} / {fmt.si(p.model_params_active)}"],
        ["model FLOPs per token", fmt.si(p.model_flops_per_token, "FLOP")],
        ["dp / micro-batches", f"{p.dp} / {p.num_microbatches}"],
    ]
    if p.time_to_train_s is not None:
        rows += [["time to train", fmt.seconds(p.time_to_train_s)], ["GPU-hours", fmt.si(p.gpu_hours)],
                 ["cost", fmt.usd(p.cost_usd)], ["energy", fmt.energy_kwh(p.energy_kwh)]]
    print(fmt.table(rows))
    print()
    total = p.step_time_s
    print(fmt.table([[k, fmt.seconds(v), fmt.percent(v / total)] for k, v in p.breakdown_s.items() if v > 0],
                    header=["component", "time", "share"]))
    return 0


def _binding_resource(sc, args) -> str:
    """The resource whose doubling buys the most (``perfmodel sensitivity``), and what it buys."""
    from perfmodel.present.diagnosis import RESOURCE_WORDS
    s = pm.sensitivity(sc, profile=profile_choice(args), path_steps=0)
    if not s.bottleneck:
        return "none (no resource moves the step)"
    e = s.effect(s.bottleneck)
    return f"{RESOURCE_WORDS[s.bottleneck]}: 2x buys {fmt.percent(e.gain_frac)} (perfmodel sensitivity)"


def _predict_anchored(args) -> int:
    """``predict --anchor RUN.yaml``: the what-if with the factors the measured runs identify."""
    from perfmodel.cli.diagnose import logs_of
    from perfmodel.present.diagnosis import anchored_text
    runs = pm.load_runs(args.anchor, logs_of(args))
    ap = pm.predict_anchored(load(args.scenario), runs, profile=profile_choice(args), cost=cost_model(args))
    if args.format == "json":
        emit_json(ap.to_dict())
        return 0
    print(anchored_text(ap))
    return 0


def cmd_describe(args) -> int:
    d = pm.describe(load(args.scenario)).to_dict()
    if args.format == "json":
        emit_json(d)
        return 0
    rows = [["model", d["model"]], ["hardware", d["hardware"]], ["GPUs (dp)", f"{d['num_gpus']} ({d['dp']})"],
            ["GPUs per NVLink domain", str(d["gpus_per_scale_up_domain"])],
            ["params total", fmt.si(d["model_params_total"])], ["params active", fmt.si(d["model_params_active"])],
            ["FLOPs/token (causal)", fmt.si(d["model_flops_per_token"], "FLOP")],
            ["FLOPs/token (full s^2)", fmt.si(d["model_flops_per_token_full_attention"], "FLOP")]]
    print(fmt.table(rows))
    print()
    mem_rows = [[k, fmt.bytes_binary(v)] for k, v in d["memory_breakdown_bytes"].items()]
    mem_rows += [["total", fmt.bytes_binary(d["memory_per_gpu_bytes"])],
                 ["usable HBM", fmt.bytes_binary(d["usable_hbm_bytes"])],
                 ["verdict", "fits" if d["fits_in_memory"] else "DOES NOT FIT"]]
    print(fmt.table(mem_rows, header=["memory per GPU", "bytes"]))
    return 0


def cmd_validate(args) -> int:
    profile = profile_choice(args)
    report = pm.validate(args.cases, profile=profile)
    if args.format == "json":
        emit_json(report.to_dict())
        return 0
    if args.format == "markdown":
        from perfmodel.present.validation_report import markdown
        print(markdown(report, profiles=profile is not None))
        return 0
    from perfmodel.present.validation_report import text_report
    print(text_report(report))
    return 0


def register(sub) -> None:
    p = sub.add_parser("predict", help="predict step time, throughput, MFU, memory and cost for a scenario")
    p.add_argument("scenario", nargs="?", default=str(EXAMPLE_SCENARIO))
    p.add_argument("--format", choices=["json", "table"], default="table")
    p.add_argument("--anchor", metavar="RUN.yaml", help="measured runs on your cluster: predict with the stack "
                                                        "factors they identify (perfmodel diagnose's RUN.yaml)")
    p.add_argument("--log", action="append", metavar="FILE", help="with --anchor: logs that measure its scenario")
    add_profile_option(p)
    add_cost_options(p)
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("describe", help="parameters, FLOPs per token and the memory breakdown")
    p.add_argument("scenario", nargs="?", default=str(EXAMPLE_SCENARIO))
    p.add_argument("--format", choices=["json", "table"], default="table")
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser("validate", help="predicted against published runs")
    p.add_argument("cases")
    p.add_argument("--format", choices=["json", "table", "markdown"], default="table")
    add_profile_option(p)
    p.set_defaults(func=cmd_validate)
