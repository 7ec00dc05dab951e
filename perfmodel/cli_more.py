"""Sub-commands for search, scaling, sizing, benchmarks and calibration."""

from __future__ import annotations

import argparse
import csv
import math
import sys

from perfmodel.present import fmt

from perfmodel.spec import limits
from perfmodel.spec.errors import InputError
from perfmodel.spec.units import SECONDS_PER_DAY

BENCH_SCENARIO = dict(
    name="bench-gpt3-175b-1024xh100", hardware="h100-sxm", num_gpus=1024, model="gpt3-175b",
    seq_length=2048, global_batch_size=1536, training_tokens=3.0e11,
)
"""GPT-3 175B with the batch and sequence of Narayanan et al. 2021 (table 1: 1,536 x 2,048 on
1,024 GPUs) and GPT-3's 300B training tokens (Brown et al. 2020, sec. 2.2)."""


# ------------------------------------------------------------------------------ helpers
def _csv_list(text: str | None, cast, field: str):
    if text is None:
        return None
    items = [x.strip() for x in text.split(",") if x.strip()]
    if len(items) > limits.MAX_SWEEP_POINTS:
        raise InputError(field, f"{len(items)} entries; at most {limits.MAX_SWEEP_POINTS}")
    try:
        values = [cast(x) for x in items]
    except ValueError:
        shown = text if len(text) <= 80 else text[:77] + "..."
        raise InputError(field, f"expected a comma-separated list, got {shown!r}") from None
    if cast is int:
        bad = [v for v in values if not 1 <= v <= limits.MAX_NUM_GPUS]
        if bad:
            raise InputError(field, f"GPU counts must be 1 to {limits.MAX_NUM_GPUS:,}, got {bad[0]}")
    return values


ARG_BOUNDS = {
    "price": (0, limits.MAX_USD), "purchase": (0, limits.MAX_USD), "pue": (0, limits.MAX_RATIO),
    "usd_per_kwh": (None, limits.MAX_USD), "amortisation_years": (0, limits.MAX_YEARS), "utilisation": (0, 1.0),
    "efficiency_threshold": (0, 1.0), "value_of_time": (0, limits.MAX_USD), "budget_usd": (0, limits.MAX_USD),
    "tokens": (0, limits.MAX_TRAINING_TOKENS), "deadline_days": (0, limits.MAX_SECONDS / SECONDS_PER_DAY),
}
"""Numeric options: (lower, upper) with the value > lower (>= 0 where lower is None) and <= upper,
and finite (``--tokens inf`` and ``--price nan`` parse as floats). ``--top`` and
``--max-micro-batch-size`` are ``SearchOptions`` fields, bounded there (``search: top_k: ...``)."""


def _check_numbers(args) -> None:
    """Every numeric option given, against ``ARG_BOUNDS``; a one-line InputError naming it."""
    for name, (low, high) in ARG_BOUNDS.items():
        value = getattr(args, name, None)
        if value is None:
            continue
        above = value >= 0 if low is None else value > low
        if not (math.isfinite(value) and above and value <= high):
            interval = f"[0, {high:g}]" if low is None else f"({low:g}, {high:g}]"
            raise InputError("--" + name.replace("_", "-"), f"must be a finite number in {interval}, got {value}")



def _progress(label: str, enabled: bool | None):
    """A text bar on stderr (when stderr is a terminal, or when asked for)."""
    if enabled is False or (enabled is None and not sys.stderr.isatty()):
        return None

    def bar(done: int, total: int) -> None:
        frac = done / total if total else 1.0
        filled = int(30 * frac)
        sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (30 - filled)}] {100 * frac:5.1f}%")
        if done >= total:
            sys.stderr.write("\n")
        sys.stderr.flush()
    return bar


def _cost_model(args):
    from perfmodel.formulas.cost import parse_cost_model
    d = {"mode": "tco" if args.tco else "cloud"}
    for key, attr in (("usd_per_gpu_hour", "price"), ("purchase_usd_per_gpu", "purchase"), ("pue", "pue"),
                      ("usd_per_kwh", "usd_per_kwh"), ("amortisation_years", "amortisation_years"),
                      ("utilisation_frac", "utilisation")):
        if getattr(args, attr) is not None:
            d[key] = getattr(args, attr)
    return parse_cost_model(d)


def _failure_model(args):
    from perfmodel.formulas.goodput import FailureModel
    return FailureModel(gpu_failures_per_gpu_hour=0.0) if args.no_failures else FailureModel()


def _search_options(args, **extra):
    from perfmodel.studies.search import parse_search_options
    d = {"objective": args.objective, "max_micro_batch_size": args.max_micro_batch_size}
    prec = _csv_list(args.precisions, str, "precisions")
    if prec:
        d["precisions"] = tuple(prec)
    rc = _csv_list(args.recompute, str, "recompute")
    if rc:
        d["recompute"] = tuple(rc)
    d.update(extra)
    return parse_search_options(d)


def _efficiency(args, hw_ref: str):
    if args.no_profile:
        return None
    from perfmodel.spec.profile import efficiency_for_hardware
    return efficiency_for_hardware(hw_ref)


def _load(args):
    from perfmodel.spec.scenario import load_scenario
    return load_scenario(args.scenario)


def _layout_text(c) -> str:
    lay = c.layout()
    s = f"tp{lay['tp']} pp{lay['pp']}"
    s += f" v{lay['vpp']}" if lay["vpp"] > 1 else ""
    s += f" cp{lay['cp']}" if lay["cp"] > 1 else ""
    s += f" ep{lay['ep']}" if lay["ep"] > 1 else ""
    s += f" etp{lay['etp']}" if lay["etp"] > 1 else ""
    return s + f" dp{lay['dp']} z{lay['zero_stage']} mb{lay['micro_batch_size']} {lay['recompute']} {lay['precision']}"


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def _write_csv(rows: list[dict]) -> None:
    rows = [_flat(r) for r in rows]
    keys = list(dict.fromkeys(k for r in rows for k in r))
    w = csv.DictWriter(sys.stdout, fieldnames=keys, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)


def _emit_json(obj) -> None:
    from perfmodel.cli import to_json
    print(to_json(obj))


# ------------------------------------------------------------------------------- search
def cmd_search(args) -> int:
    from perfmodel.studies.search import search
    _check_numbers(args)
    sc = _load(args)
    counts = _csv_list(args.gpus, int, "gpus")
    opts = _search_options(args, top_k=args.top, **({"gpu_counts": tuple(counts)} if counts else {}))
    res = search(sc, opts, _cost_model(args), _progress("search", args.progress),
                 efficiency=_efficiency(args, sc.hardware))
    if args.format == "json":
        _emit_json({"candidates": [c.to_dict() for c in res.candidates],
                    "pareto": [c.to_dict() for c in res.pareto], "num_enumerated": res.num_enumerated,
                    "num_valid": res.num_valid, "num_evaluated": res.num_evaluated,
                    "num_fit": len(res.table), "rejected": res.rejected, "cost_basis": res.cost_basis,
                    "objective": opts.objective, "elapsed_s": res.elapsed_s})
        return 0
    if args.format == "csv":
        _write_csv([c.to_dict() for c in res.candidates])
        return 0
    cost_label = "cost (run)" if res.cost_basis == "training_tokens" else "cost/step"
    rows = [[str(i + 1), (f"{c.scenario.num_gpus} GPUs " if counts else "") + _layout_text(c),
             fmt.seconds(c.step_time_s), f"{c.tokens_per_s_per_gpu:,.0f}", fmt.percent(c.mfu),
             fmt.bytes_binary(c.memory_per_gpu_bytes), fmt.usd(c.cost_usd), c.bottleneck]
            for i, c in enumerate(res.candidates)]
    print(fmt.table(rows, header=["#", "layout", "step", "tok/s/GPU", "MFU", "memory", cost_label, "bottleneck"]))
    print()
    print(f"objective {opts.objective}: {res.num_enumerated:,} layouts enumerated, {res.num_valid:,} valid, "
          f"{len(res.table):,} fit in memory; {fmt.seconds(res.elapsed_s)}")
    print(f"Pareto front (time vs cost): {len(res.pareto)} layout(s)")
    if len(res.pareto) > 1:
        front = [[f"{c.scenario.num_gpus} GPUs " + _layout_text(c), fmt.seconds(c.time_to_train_s or c.step_time_s),
                  fmt.usd(c.cost_usd)] for c in res.pareto]
        print(fmt.table(front, header=["layout", "time", "cost"]))
    if res.rejected:
        print("rejected:")
        for reason, n in list(res.rejected.items())[:6]:
            print(f"  {n:>9,}  {reason}")
    if not res.candidates:
        print("no layout runs and fits")
    return 0


# -------------------------------------------------------------------------------- scale
def cmd_scale(args) -> int:
    from perfmodel.studies.scaling import scale_sweep
    _check_numbers(args)
    sc = _load(args)
    if args.tokens is not None:
        sc = sc.model_copy(update={"training_tokens": args.tokens})
    counts = _csv_list(args.gpus, int, "gpus")
    vot = args.value_of_time
    deadline = None if args.deadline_days is None else args.deadline_days * SECONDS_PER_DAY
    res = scale_sweep(sc, counts, args.mode, _search_options(args, top_k=1), _cost_model(args),
                      _failure_model(args), efficiency_threshold=args.efficiency_threshold,
                      value_of_time_usd_per_day=vot, deadline_s=deadline,
                      efficiency=_efficiency(args, sc.hardware), progress=_progress("scale", args.progress))
    if args.format == "json":
        _emit_json(res.to_dict())
        return 0
    if args.format == "csv":
        _write_csv([p.to_dict() for p in res.points])
        return 0
    rows = []
    for p in res.points:
        if not p.ok:
            rows.append([str(p.num_gpus), str(p.global_batch_size), f"skipped: {p.skipped_reason}"] + [""] * 7)
            continue
        mc = p.marginal_usd_per_hour_saved
        rows.append([str(p.num_gpus), str(p.global_batch_size), _layout_text(p.candidate),
                     f"{p.tokens_per_s_per_gpu:,.0f}", f"{p.parallel_efficiency:.2f}", fmt.percent(p.goodput_frac),
                     fmt.seconds(p.time_to_solution_s), fmt.usd(p.cost_usd), fmt.si(p.energy_kwh * 1e3, "Wh"),
                     "-" if mc is None else fmt.usd(mc)])
    print(fmt.table(rows, header=["GPUs", "batch", "best layout", "tok/s/GPU", "efficiency", "goodput",
                                  "time to train", "cost", "energy", "$/h saved"]))
    print()
    print(f"knee: {res.knee_num_gpus} GPUs ({res.knee_reason})" if res.knee_num_gpus else "knee: none in the sweep")
    print(f"verdict: {res.verdict.reason}")
    return 0


# --------------------------------------------------------------------------------- size
def cmd_size(args) -> int:
    from perfmodel.studies.sizing import size_cluster
    _check_numbers(args)
    sc = _load(args)
    deadline = None if args.deadline_days is None else args.deadline_days * SECONDS_PER_DAY
    lookup = None
    if not args.no_profile:
        from perfmodel.spec.profile import efficiency_for_hardware
        lookup = efficiency_for_hardware
    rows = size_cluster(sc, args.tokens, deadline, args.budget_usd, _csv_list(args.hardware, str, "hardware"),
                        _csv_list(args.gpus, int, "gpus"), _cost_model(args), _failure_model(args),
                        options=_search_options(args), efficiency_lookup=lookup,
                        progress=_progress("size", args.progress))
    if args.format == "json":
        _emit_json([r.to_dict() for r in rows])
        return 0
    if args.format == "csv":
        _write_csv([r.to_dict() for r in rows])
        return 0
    table = []
    for r in rows:
        c = r.choice
        if c is None:
            table.append([r.hardware_id, "-", "-", "-", "-", "-", r.reason])
        else:
            table.append([r.hardware_id, str(c.num_gpus), _layout_text(c.candidate), fmt.seconds(c.time_to_train_s),
                          fmt.usd(c.cost_usd), fmt.percent(c.candidate.mfu), r.reason])
    print(fmt.table(table, header=["hardware", "GPUs", "layout", "time to train", "cost", "MFU", "why"]))
    return 0


# -------------------------------------------------------------------------------- bench
def cmd_bench(args) -> int:
    import os
    import time

    from perfmodel.formulas.layouts import layouts_from_arrays
    from perfmodel.spec.scenario import layout_rule_fields, layout_violation, parse_scenario
    from perfmodel.studies.search import CHUNK, SearchOptions, bind, enumerate_layouts, search
    from perfmodel.engine.prediction import scenario_constants
    from perfmodel.engine.evaluate import evaluate
    if not 1 <= args.repeat <= limits.MAX_BENCH_REPEATS:
        raise InputError("repeat", f"must be 1 to {limits.MAX_BENCH_REPEATS}, got {args.repeat}")
    if hasattr(os, "sched_setaffinity"):   # one core, literally
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    sc = parse_scenario(BENCH_SCENARIO)
    opts = SearchOptions()
    search(sc, opts)   # warm caches (presets, hardware, imports)
    walls = []
    for _ in range(args.repeat):
        res = search(sc, opts)
        walls.append(res.elapsed_s)
    # Raw model throughput: every valid layout (fitting or not) through evaluate.
    m, hw = bind(sc)
    cols = enumerate_layouts(m, hw, sc.num_gpus, sc.global_batch_size, sc.seq_length, opts)
    ok = layout_violation(m, hw, sc.seq_length, sc.global_batch_size, sc.num_gpus, sc.precision, tp=cols["tp"],
                          pp=cols["pp"], vpp=cols["vpp"], cp=cols["cp"], ep=cols["ep"], etp=cols["etp"],
                          sp=cols["sp"], micro_batch_size=cols["mbs"], **layout_rule_fields(sc)) == ""
    cols = {k: v[ok] for k, v in cols.items()}
    dp = sc.num_gpus // (cols["tp"] * cols["pp"] * cols["cp"])
    L = layouts_from_arrays(**{k: cols[k] for k in ("tp", "pp", "vpp", "cp", "ep", "etp", "sp", "zero_stage", "mbs")},
                            dp=dp, num_mb=sc.global_batch_size // (cols["mbs"] * dp))
    c = scenario_constants(sc, m, hw, recompute="selective")
    best = float("inf")
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        for s in range(0, len(L), CHUNK):
            evaluate(c, L.take(slice(s, s + CHUNK))).step_time_s
        best = min(best, time.perf_counter() - t0)
    out = {
        "scenario": BENCH_SCENARIO, "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "layouts_enumerated": res.num_enumerated, "layouts_valid": res.num_valid,
        "layouts_fit": len(res.table), "full_search_wall_s_best": min(walls),
        "full_search_wall_s_median": sorted(walls)[len(walls) // 2],
        "evaluations_in_search_per_s": res.num_evaluated / res.evaluate_s,
        "raw_layouts": len(L), "raw_evaluate_s": best, "raw_evaluations_per_s": len(L) / best,
        "best_layout": _layout_text(res.best), "best_step_time_s": res.best.step_time_s,
    }
    if args.format == "json":
        _emit_json(out)
        return 0
    print(fmt.table([
        ["scenario", "GPT-3 175B, 1,024 x H100, batch 1,536 x 2,048"],
        ["cores", str(out["cores"])],
        ["layouts enumerated / valid / fit", f"{res.num_enumerated:,} / {res.num_valid:,} / {len(res.table):,}"],
        ["full search wall time (best, median)",
         f"{fmt.seconds(min(walls))}, {fmt.seconds(out['full_search_wall_s_median'])}"],
        ["layout evaluations/s (in the search)", f"{out['evaluations_in_search_per_s']:,.0f}"],
        ["layout evaluations/s (all {:,} valid layouts)".format(len(L)), f"{out['raw_evaluations_per_s']:,.0f}"],
        ["best layout", f"{out['best_layout']} ({fmt.seconds(out['best_step_time_s'])} per step)"],
    ]))
    return 0


# ----------------------------------------------------------------------------- register
def _common(p, objective: bool = True) -> None:
    p.add_argument("scenario")
    p.add_argument("--format", choices=["table", "json", "csv"], default="table")
    if objective:
        p.add_argument("--objective", choices=["time", "cost", "tokens_per_usd"], default="time")
    else:
        p.set_defaults(objective="time")
    p.add_argument("--precisions", help="comma-separated, e.g. bf16,fp8 (default: the scenario's)")
    p.add_argument("--recompute", help="comma-separated subset of none,selective,full (default: all)")
    p.add_argument("--max-micro-batch-size", type=int, default=8)
    p.add_argument("--no-profile", action="store_true", help="ignore calibration profiles")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    g = p.add_argument_group("cost")
    g.add_argument("--price", type=float, help="cloud price, USD per GPU-hour (default: the hardware's)")
    g.add_argument("--tco", action="store_true", help="own the hardware: capex + networking + energy")
    g.add_argument("--purchase", type=float, help="purchase price per GPU, USD (TCO)")
    g.add_argument("--pue", type=float)
    g.add_argument("--usd-per-kwh", type=float)
    g.add_argument("--amortisation-years", type=float)
    g.add_argument("--utilisation", type=float, help="fraction of the life in paid use (TCO)")


def register(sub) -> None:
    p = sub.add_parser("search", help="find the best parallel layouts for a job")
    _common(p)
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--gpus", help="comma-separated GPU counts to search too (default: the scenario's)")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("scale", help="best layout, efficiency, time and cost across GPU counts")
    _common(p)
    p.add_argument("--gpus", required=True, help="comma-separated GPU counts, e.g. 64,128,256")
    p.add_argument("--mode", choices=["strong", "weak"], default="strong")
    p.add_argument("--efficiency-threshold", type=float, default=0.8)
    p.add_argument("--value-of-time", type=float, metavar="USD_PER_DAY")
    p.add_argument("--deadline-days", type=float)
    p.add_argument("--tokens", type=float, help="training tokens (default: the scenario's)")
    p.add_argument("--no-failures", action="store_true", help="goodput 1: no failures or checkpoints")
    p.set_defaults(func=cmd_scale)

    p = sub.add_parser("size", help="cheapest GPU count per hardware type for a deadline and budget")
    _common(p, objective=False)
    p.add_argument("--tokens", type=float, required=True)
    p.add_argument("--deadline-days", type=float)
    p.add_argument("--budget-usd", type=float)
    p.add_argument("--hardware", help="comma-separated hardware ids (default: all)")
    p.add_argument("--gpus", help="comma-separated GPU counts (default: 8 to 16384, powers of two)")
    p.add_argument("--no-failures", action="store_true", help="goodput 1: no failures or checkpoints")
    p.set_defaults(func=cmd_size)

    p = sub.add_parser("bench", help="layout evaluations per second and full-search wall time")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(func=cmd_bench)

    # Calibration imports scipy.optimize: load it only when these commands run, so that
    # `perfmodel predict` starts fast.
    def _bench_hw(a):
        from calibration.cli import bench_hw_main
        return bench_hw_main(a.rest, raise_errors=True)

    def _calibrate(a):
        from calibration.cli import calibrate_main
        return calibrate_main(a.rest, raise_errors=True)

    p = sub.add_parser("bench-hw", help="run the calibration microbenchmarks (args: see python -m calibration bench-hw -h)",
                       add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=_bench_hw)

    p = sub.add_parser("calibrate", help="fit a calibration profile: RESULTS... --hardware ID -o PROFILE.yaml",
                       add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=_calibrate)
