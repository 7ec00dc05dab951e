"""``perfmodel search``, ``scale`` and ``size``: the studies that search layouts."""

from __future__ import annotations

import math

import perfmodel as pm
from perfmodel.cli.common import (
    add_study_options,
    check_numbers,
    cost_model,
    csv_list,
    emit_json,
    failure_model,
    layout_text,
    load,
    profile_choice,
    progress_bar,
    search_options,
    usable_cores,
    write_csv,
)
from perfmodel.present import fmt
from perfmodel.present.constraints import binding_text, capacity_text, fabric_text, power_cap_text
from perfmodel.present.money import price_text
from perfmodel.present.verdicts import knee_text, scale_verdict_text, sizing_reason_text
from perfmodel.spec.errors import InputError
from perfmodel.spec.units import SECONDS_PER_DAY


def cmd_search(args) -> int:
    check_numbers(args)
    sc = load(args.scenario, args.set)
    counts = csv_list(args.gpus, int, "gpus")
    if not counts and sc.studies.search_gpu_counts:     # the scenario's own extra counts (an app link's)
        counts = sorted({sc.num_gpus, *sc.studies.search_gpu_counts})
    opts = search_options(args, top_k=args.top, **({"gpu_counts": tuple(counts)} if counts else {}))
    res = pm.search(sc, opts, profile=profile_choice(args), cost=cost_model(args, sc),
                    progress=progress_bar("search", args.progress))
    if args.format == "json":
        emit_json(res.to_dict())
        return 0
    if args.format == "csv":
        write_csv([c.to_dict() for c in res.candidates])
        return 0
    cost_label = "cost (run)" if res.cost_basis == "training_tokens" else "cost/step"
    rows = [[str(i + 1), (f"{c.scenario.num_gpus} GPUs " if counts else "") + layout_text(c),
             fmt.seconds(c.step_time_s), f"{c.tokens_per_s_per_gpu:,.0f}", fmt.percent(c.mfu),
             fmt.bytes_binary(c.memory_per_gpu_bytes), fmt.usd(c.cost_usd), c.bottleneck]
            for i, c in enumerate(res.candidates)]
    print(fmt.table(rows, header=["#", "layout", "step", "tok/s/GPU", "MFU", "memory", cost_label, "bottleneck"]))
    print()
    print(f"objective {opts.objective}: {res.num_enumerated:,} layouts enumerated, {res.num_valid:,} valid, "
          f"{res.num_fit:,} fit in memory; {fmt.seconds(res.elapsed_s)}")
    print(f"Pareto front (time vs cost): {len(res.pareto)} layout(s)")
    if len(res.pareto) > 1:
        front = [[f"{c.scenario.num_gpus} GPUs " + layout_text(c), fmt.seconds(c.time_to_train_s or c.step_time_s),
                  fmt.usd(c.cost_usd)] for c in res.pareto]
        print(fmt.table(front, header=["layout", "time", "cost"]))
    if res.rejected:
        print("rejected:")
        for reason, n in list(res.rejected.items())[:6]:
            print(f"  {n:>9,}  {reason}")
    if not res.candidates:
        print("no layout runs and fits")
    return 0


def cmd_scale(args) -> int:
    check_numbers(args)
    sc = load(args.scenario, args.set)
    if args.tokens is not None:
        sc = sc.model_copy(update={"training_tokens": args.tokens})
    deadline = None if args.deadline_days is None else args.deadline_days * SECONDS_PER_DAY
    res = pm.scale(sc, csv_list(args.gpus, int, "gpus"), mode=args.mode, options=search_options(args, top_k=1),
                   profile=profile_choice(args), cost=cost_model(args, sc), failures=failure_model(args, sc),
                   efficiency_threshold=args.efficiency_threshold, value_of_time_usd_per_day=args.value_of_time,
                   deadline_s=deadline, max_batch_tokens=args.max_batch_tokens,
                   progress=progress_bar("scale", args.progress))
    if args.format == "json":
        emit_json(res.to_dict())
        return 0
    if args.format == "csv":
        write_csv([p.to_dict() for p in res.points])
        return 0
    rows = []
    for p in res.points:
        if not p.ok:
            rows.append([str(p.num_gpus), str(p.global_batch_size), f"skipped: {p.skipped_reason}"] + [""] * 9)
            continue
        mc = p.marginal_usd_per_hour_saved
        b = p.band or {}
        rows.append([str(p.num_gpus), str(p.global_batch_size), layout_text(p.candidate),
                     f"{p.tokens_per_s_per_gpu:,.0f}", f"{p.goodput_tokens_per_s_per_gpu:,.0f}",
                     f"{p.parallel_efficiency:.2f}", fmt.percent(p.goodput_frac),
                     fmt.seconds(p.time_to_solution_s), fmt.band(b.get("time_to_train_s"), fmt.seconds),
                     fmt.usd(p.cost_usd), fmt.band(b.get("cost_usd"), fmt.usd), "-" if mc is None else fmt.usd(mc)])
    print(fmt.table(rows, header=["GPUs", "batch", "best layout", "tok/s/GPU", "goodput tok/s/GPU", "efficiency",
                                  "goodput", "time to train", "80% band", "cost", "80% band", "$/h saved"]))
    print()
    knee = res.knee
    print(f"knee: {knee.num_gpus} GPUs ({knee_text(knee)})" if knee.num_gpus else "knee: none in the sweep")
    print(f"verdict: {scale_verdict_text(res.verdict)}")
    return 0


def cmd_size(args) -> int:
    check_numbers(args)
    if args.jobs is not None and args.jobs < 1:
        raise InputError("--jobs", f"must be a whole number of processes >= 1, got {args.jobs}")
    sc = load(args.scenario, args.set)
    deadline = None if args.deadline_days is None else args.deadline_days * SECONDS_PER_DAY
    facility = site(args, sc)
    res = pm.size(sc, args.tokens, deadline_s=deadline, budget_usd=args.budget_usd,
                  hardware_ids=csv_list(args.hardware, str, "hardware"), gpu_counts=csv_list(args.gpus, int, "gpus"),
                  options=search_options(args), profile=profile_choice(args), cost=cost_model(args, sc),
                  failures=failure_model(args, sc), grow_batch=False if args.fixed_batch else None,
                  max_batch_tokens=args.max_batch_tokens, progress=progress_bar("size", args.progress),
                  workers=usable_cores() if args.jobs is None else args.jobs, facility=facility)
    if args.format == "json":
        emit_json(res.to_dict())
        return 0
    if args.format == "csv":
        write_csv([r.to_dict() for r in res.rows])
        return 0
    table, money = [], []
    for r in res.rows:
        c, shown = r.choice, r.choice or r.binding
        hw_text = r.hardware_id + " (announced)" * r.announced + " (placeholder price)" * r.placeholder_price
        p_met = fmt.probability(shown.probability_met) if shown else "-"
        if c is None:
            table.append([hw_text, "-", "-", "-", "-", "-", "-", "-", p_met, sizing_reason_text(r)])
        else:
            table.append([hw_text, str(c.num_gpus), layout_text(c.candidate),
                          fmt.compact(c.global_batch_size * r.seq_length), fmt.seconds(c.time_to_train_s),
                          fmt.usd(c.cost_usd), fmt.usd_per_million_tokens(c.cost_usd, res.tokens),
                          fmt.percent(c.goodput_frac), p_met, sizing_reason_text(r)])
        bvr = r.buy_vs_rent
        if bvr is not None:
            money.append([r.hardware_id, str(bvr.num_gpus), fmt.usd(bvr.rent_usd), fmt.usd(bvr.tco_usd),
                          fmt.si(bvr.break_even_gpu_hours, "h"), fmt.percent(bvr.break_even_utilisation_frac),
                          f"{bvr.break_even_months:.1f}"])
    print(fmt.table(table, header=["hardware", "GPUs", "layout", "batch (tokens)", "time to train", "cost",
                                   "per M tokens", "goodput", "P(on time, budget)", "why"]))
    if res.left_out:
        print("Left out (name them with --hardware to size them): "
              + "; ".join(f"{i} ({why})" for i, why in res.left_out))
    for r in res.rows:
        if r.rule != "no_price":
            print(f"{r.hardware_id} price: {price_text(pm.price(sc.model_copy(update={'hardware': r.hardware_id}), cost=cost_model(args, sc)))}")
        for line in (power_cap_text(r.hardware_id, r.constraints and r.constraints.power_cap),
                     binding_text(r.hardware_id, r.constraints, res.tokens),
                     capacity_text(r.hardware_id, r.constraints), fabric_text(r.hardware_id, r.constraints)):
            if line:
                print(line)
    if money:
        print()
        print(fmt.table(money, header=["buy or rent", "GPUs", "rent", "own (TCO)", "break-even per GPU",
                                       "at utilisation", "months"]))
        print("Owning breaks even after the GPU-hours shown per GPU: above that utilisation over the amortisation "
              "life, or after that many months at the cost model's utilisation.")
    return 0


def site(args, sc):
    """The scenario's facility with ``--power-mw`` (and ``--pue``, ``--gpu-power-cap-w``) over it."""
    from perfmodel.spec.facility import MAX_GPU_POWER_W, MAX_POWER_MW, parse_facility
    if args.power_mw is None and args.gpu_power_cap_w is None:
        return None
    d = sc.facility.model_dump(exclude_defaults=True)
    for flag, key, value, high in (("--power-mw", "power_mw", args.power_mw, MAX_POWER_MW),
                                   ("--gpu-power-cap-w", "gpu_power_cap_w", args.gpu_power_cap_w, MAX_GPU_POWER_W)):
        if value is None:
            continue
        if not (math.isfinite(value) and 0 < value <= high):
            raise InputError(flag, f"must be a finite number in (0, {high:g}], got {value}")
        d[key] = value
    if args.pue is not None:
        d["pue"] = args.pue
    return parse_facility(d)


def register(sub) -> None:
    p = sub.add_parser("search", help="find the best parallel layouts for a job")
    add_study_options(p)
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--gpus", help="comma-separated GPU counts to search (default: the scenario's num_gpus, with "
                                   "its studies.search_gpu_counts)")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("scale", help="best layout, efficiency, time and cost across GPU counts")
    add_study_options(p)
    p.add_argument("--gpus", help="comma-separated GPU counts, e.g. 64,128,256 (default: the scenario's "
                                   "studies.scale_gpu_counts)")
    p.add_argument("--mode", choices=["strong", "weak", "grow"],
                   help="strong: the scenario's batch at every count; weak: the batch in proportion to the GPUs; "
                        "grow: doubled as the GPUs double, up to --max-batch-tokens (default: the scenario's "
                        "studies.scale_mode, else strong)")
    p.add_argument("--max-batch-tokens", type=float, help="the batch limit of --mode grow, in tokens (default: the "
                                                          "scenario's studies.max_batch_tokens, else Llama 3's 16M)")
    p.add_argument("--efficiency-threshold", type=float, default=0.8)
    p.add_argument("--value-of-time", type=float, metavar="USD_PER_DAY",
                   help="what a day saved is worth (default: the scenario's purpose.value_of_time_usd_per_day)")
    p.add_argument("--deadline-days", type=float, help="default: the scenario's purpose.deadline_days")
    p.add_argument("--tokens", type=float, help="training tokens (default: the scenario's)")
    p.add_argument("--no-failures", action="store_true", help="goodput 1: no failures or checkpoints")
    p.set_defaults(func=cmd_scale)

    p = sub.add_parser("size", help="cheapest GPU count per hardware type for a deadline and budget")
    add_study_options(p, objective=False)
    p.add_argument("--tokens", type=float, help="training tokens (default: the scenario's)")
    p.add_argument("--deadline-days", type=float, help="default: the scenario's purpose.deadline_days")
    p.add_argument("--budget-usd", type=float, help="default: the scenario's purpose.budget_usd")
    p.add_argument("--hardware", help="comma-separated hardware ids (default: all)")
    p.add_argument("--gpus", help="comma-separated GPU counts (default: 8 to 16384, powers of two)")
    p.add_argument("--max-batch-tokens", type=float,
                   help="the largest global batch, in tokens, sizing may grow to where the scenario's batch misses "
                        "the deadline or the budget (default: the scenario's studies.max_batch_tokens, else Llama "
                        "3's 16M, 2,048 x 8,192)")
    p.add_argument("--fixed-batch", action="store_true", help="keep the scenario's global batch at every count")
    p.add_argument("--jobs", type=int, help="hardware types sized at a time, each in a process of its own "
                                            "(default: the cores this process may use; 1: one process)")
    p.add_argument("--no-failures", action="store_true", help="goodput 1: no failures or checkpoints")
    p.add_argument("--power-mw", type=float, metavar="MW",
                   help="the site's power envelope, facility power in MW (with --pue, default the scenario's "
                        "facility.pue): each hardware type's GPU count is capped at what it holds")
    p.add_argument("--gpu-power-cap-w", type=float, metavar="W",
                   help="a power limit per GPU: lower clocks (interpolated between published points of the die), "
                        "less power per node, more GPUs under --power-mw")
    p.set_defaults(func=cmd_size)
