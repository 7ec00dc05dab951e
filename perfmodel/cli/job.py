"""``perfmodel predict``, ``describe`` and ``validate``: one job, or the published runs."""

from __future__ import annotations

import perfmodel as pm
from perfmodel.cli.common import (
    EXAMPLE_SCENARIO,
    add_cost_options,
    add_profile_option,
    add_set_option,
    check_numbers,
    cost_model,
    emit_json,
    load,
    profile_choice,
)
from perfmodel.present import fmt
from perfmodel.present.goodput import waterfall_rows
from perfmodel.present.money import price_text
from perfmodel.spec.errors import InputError


def cmd_predict(args) -> int:
    check_numbers(args)
    if args.anchor:
        return _predict_anchored(args)
    if args.log:
        raise InputError("--log", "measures the runs of --anchor RUN.yaml; give --anchor too")
    sc = load(args.scenario, args.set)
    p = pm.predict(sc, profile=profile_choice(args), cost=cost_model(args, sc))
    if args.format == "json":
        emit_json(p.to_dict())
        return 0
    b = p.band or {}
    rows = [
        ["step time", fmt.seconds(p.step_time_s), fmt.band(b.get("step_time_s"), fmt.seconds)],
        ["tokens/s", fmt.si(p.tokens_per_s, "tok/s"), ""],
        ["tokens/s per GPU", fmt.si(p.tokens_per_s_per_gpu, "tok/s"),
         fmt.band(b.get("tokens_per_s_per_gpu"), lambda x: fmt.si(x, "tok/s"))],
        ["MFU", fmt.percent(p.mfu), ""],
        ["goodput", f"{fmt.percent(p.goodput_frac)} of peak", f"{fmt.percent(p.training_time_frac)} of wall time trains"],
        ["memory per GPU", f"{fmt.bytes_binary(p.memory_per_gpu_bytes)} "
                           f"({'fits' if p.fits_in_memory else 'DOES NOT FIT'})", ""],
        ["bottleneck", f"{p.bottleneck} ({p.bottleneck_lens})", ""],
        ["binding resource", _binding_resource(sc, args), ""],
        ["params total / active", f"{fmt.si(p.model_params_total)} / {fmt.si(p.model_params_active)}", ""],
        ["model FLOPs per token", fmt.si(p.model_flops_per_token, "FLOP"), ""],
        ["dp / micro-batches", f"{p.dp} / {p.num_microbatches}", ""],
    ]
    if p.time_to_train_s is not None:
        rows += [["time to train", fmt.seconds(p.time_to_train_s), fmt.band(b.get("time_to_train_s"), fmt.seconds)],
                 ["GPU-hours", fmt.si(p.gpu_hours), ""],
                 ["cost", fmt.usd(p.cost_usd), fmt.band(b.get("cost_usd"), fmt.usd)],
                 ["per million tokens", fmt.usd_per_million_tokens(p.cost_usd, sc.training_tokens), ""],
                 ["energy", fmt.energy_kwh(p.energy_kwh), ""]]
    band_note = (f"80% band ({p.band_stratum} published runs)" if p.band else "")
    print(fmt.table(rows, header=["", "predicted", band_note]))
    if p.band_note:
        print(f"band: {p.band_note}")
    if p.cost_usd is not None:
        print(f"price: {price_text(pm.price(sc, cost=cost_model(args, sc)))}")
    print()
    total = p.step_time_s
    print(fmt.table([[k, fmt.seconds(v), fmt.percent(v / total)] for k, v in p.breakdown_s.items() if v > 0],
                    header=["component", "time", "share"]))
    print()
    print(fmt.table([[r["label"], fmt.si(r["flop_per_s"], "FLOP/s"), fmt.percent(r["of_peak"]),
                      "" if r["stage"] == "peak" else fmt.percent(r["kept"])] for r in waterfall_rows(p.goodput_waterfall)],
                    header=["goodput waterfall", "cluster", "of peak", "kept"]))
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
    sc = load(args.scenario, args.set)
    ap = pm.predict_anchored(sc, runs, profile=profile_choice(args), cost=cost_model(args, sc))
    if args.format == "json":
        emit_json(ap.to_dict())
        return 0
    print(anchored_text(ap))
    return 0


def cmd_describe(args) -> int:
    d = pm.describe(load(args.scenario, args.set)).to_dict()
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
    from perfmodel.studies.observed.serving_validation import serving_file
    if serving_file(args.cases) and not args.fit_bands:   # a serving-runs file: the serving validation
        from perfmodel.cli.serve import print_validation
        d = pm.validate_serving(args.cases, profile=profile).to_dict()
        return print_validation(d, args.format, f"perfmodel validate {args.cases}")
    report = pm.validate(args.cases, profile=profile)
    if args.fit_bands:
        return _fit_bands(report, profile is not None, args.fit_bands, args.cases)
    if args.format == "json":
        emit_json(report.to_dict())
        return 0
    if args.format == "markdown":
        from perfmodel.present.validation_report import markdown
        from perfmodel.studies.observed.serving_validation import SERVING_RUNS
        runs = SERVING_RUNS if args.serving_runs is None else args.serving_runs
        serving = pm.validate_serving(runs, profile=profile).to_dict() if runs else None
        print(markdown(report, profiles=profile is not None, serving=serving))
        return 0
    from perfmodel.present.validation_report import text_report
    print(text_report(report))
    return 0


def _fit_bands(report, profiles: bool, out: str, cases: str) -> int:
    """Write the error-band table the report's residuals give (``perfmodel.studies.observed.bands``) to
    ``out``, a path the user names (the project's table, ``perfmodel/data/error_bands.yaml``, is
    written only when named, from a source checkout: ``write_text_file`` refuses the installed
    package)."""
    from perfmodel.engine.band import band_table
    from perfmodel.spec.errors import write_text_file
    from perfmodel.studies.observed.band_families import band_file_text
    from perfmodel.studies.observed.bands import coverage_table, residuals
    path = write_text_file(out, band_file_text(report, profiles), "--fit-bands", inputs=(cases,))
    band_table.cache_clear()
    cov = coverage_table(residuals(report))
    gens = ", ".join(f"{g} {_share(c[0.8])} of {c['cases']}" for g, c in cov["generation"].items())
    print(f"wrote {path}: {len(report.results)} runs; the 80% band covers "
          f"{_share(cov['overall']['all'][0.8])} of held-out sources' runs ({gens})")
    return 0


def _share(x: float) -> str:
    """A held-out coverage, or why there is none: runs of one source have no other to be fitted on."""
    import math
    return fmt.percent(x) if math.isfinite(x) else "n/a (one source: nothing to hold out)"


def register(sub) -> None:
    p = sub.add_parser("predict", help="predict step time, throughput, MFU, memory and cost for a scenario")
    p.add_argument("scenario", nargs="?", default=str(EXAMPLE_SCENARIO))
    p.add_argument("--format", choices=["json", "table"], default="table")
    add_set_option(p)
    p.add_argument("--anchor", metavar="RUN.yaml", help="measured runs on your cluster: predict with the stack "
                                                        "factors they identify (perfmodel diagnose's RUN.yaml)")
    p.add_argument("--log", action="append", metavar="FILE", help="with --anchor: logs that measure its scenario")
    add_profile_option(p)
    add_cost_options(p)
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("describe", help="parameters, FLOPs per token and the memory breakdown")
    p.add_argument("scenario", nargs="?", default=str(EXAMPLE_SCENARIO))
    p.add_argument("--format", choices=["json", "table"], default="table")
    add_set_option(p)
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser("validate", help="predicted against published runs")
    p.add_argument("cases")
    p.add_argument("--format", choices=["json", "table", "markdown"], default="table")
    p.add_argument("--fit-bands", default=None, metavar="PATH",
                   help="fit the error bands to these runs' residuals and write them to PATH (required; "
                        "predictions read perfmodel/data/error_bands.yaml, which a source checkout refits by "
                        "naming it; an installed package is never written)")
    p.add_argument("--serving-runs", default=None, metavar="PATH",
                   help="with --format markdown, a last section: the serving validation of these published "
                        "serving results (default perfmodel/data/serving_runs.yaml, as perfmodel "
                        "validate-serving; '' leaves it out)")
    add_profile_option(p)
    p.set_defaults(func=cmd_validate)
