"""What every command shares: reading the scenario, the options that set cost, profile and
search, and writing tables, JSON and CSV. Formatting of numbers is ``perfmodel.present.fmt``."""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys

from perfmodel.spec import limits
from perfmodel.spec.errors import InputError
from perfmodel.spec.paths import DATA_DIR
from perfmodel.spec.units import SECONDS_PER_DAY

EXAMPLE_SCENARIO = DATA_DIR / "example_scenario.yaml"


def json_safe(obj):
    """``obj`` with every float that is not finite (a value with no meaning, such as the speed of
    a GPU count where no layout runs) replaced by None, so the JSON written is valid JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def to_json(obj) -> str:
    """Strict JSON text (no NaN or Infinity, which JSON does not have), indented."""
    return json.dumps(json_safe(obj), indent=2, default=float, allow_nan=False)


def emit_json(obj) -> None:
    print(to_json(obj))


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def write_csv(rows: list[dict]) -> None:
    rows = [_flat(r) for r in rows]
    keys = list(dict.fromkeys(k for r in rows for k in r))
    w = csv.DictWriter(sys.stdout, fieldnames=keys, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)


MAX_SETS = 64
"""``--set`` options one command takes."""
MAX_SET_CHARS = 1000
"""Characters of one ``--set KEY=VALUE``."""
MAX_SET_DEPTH = 6
"""Dots in a ``--set`` key (``reliability.restart_s`` has one)."""


def load(path: str, sets=None):
    """The scenario file, with each ``--set KEY=VALUE`` applied (``apply_sets``)."""
    import perfmodel as pm
    sc = pm.load_scenario(path)
    return apply_sets(sc, sets) if sets else sc


def _number(text: str):
    """``text`` as an int or a float when it is written as one (``2e4`` too, which YAML reads as
    a string), else None."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def apply_sets(sc, sets):
    """The scenario with each ``KEY=VALUE`` set: KEY a dotted path into the scenario's mapping
    (``reliability.restart_s``, ``cost.mode``, ``startup.compile_s``, ``num_gpus``), VALUE read as
    a YAML scalar; the result is checked like any scenario."""
    from perfmodel.spec.errors import parse_data_text
    from perfmodel.spec.scenario import parse_scenario, scenario_to_dict
    if len(sets) > MAX_SETS:
        raise InputError("--set", f"{len(sets)} given; at most {MAX_SETS}")
    data = scenario_to_dict(sc)
    for item in sets:
        shown = item if len(item) <= 80 else item[:77] + "..."
        if len(item) > MAX_SET_CHARS or "=" not in item:
            raise InputError("--set", f"expected KEY=VALUE of at most {MAX_SET_CHARS} characters, got {shown!r}")
        key, text = item.split("=", 1)
        path = key.strip().split(".")
        if not all(path) or len(path) > MAX_SET_DEPTH + 1:
            raise InputError("--set", f"expected a dotted key like reliability.restart_s, got {key!r}")
        value = _number(text.strip())
        if value is None:
            value = parse_data_text(text, f"--set {key}") if text.strip() else None
        node = data
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise InputError("--set", f"{key}: {part} is not a mapping in this scenario")
        node[path[-1]] = value
    return parse_scenario(data)


def csv_list(text: str | None, cast, field: str):
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
    "tokens": (0, limits.MAX_TRAINING_TOKENS), "max_batch_tokens": (0, limits.MAX_TRAINING_TOKENS), "deadline_days": (0, limits.MAX_SECONDS / SECONDS_PER_DAY),
}
"""Numeric options: (lower, upper) with the value > lower (>= 0 where lower is None) and <= upper,
and finite (``--tokens inf`` and ``--price nan`` parse as floats). ``--top`` and
``--max-micro-batch-size`` are ``SearchOptions`` fields, bounded there (``search: top_k: ...``)."""


def check_numbers(args) -> None:
    """Every numeric option given, against ``ARG_BOUNDS``; a one-line InputError naming it."""
    for name, (low, high) in ARG_BOUNDS.items():
        value = getattr(args, name, None)
        if value is None:
            continue
        above = value >= 0 if low is None else value > low
        if not (math.isfinite(value) and above and value <= high):
            interval = f"[0, {high:g}]" if low is None else f"({low:g}, {high:g}]"
            raise InputError("--" + name.replace("_", "-"), f"must be a finite number in {interval}, got {value}")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the platform says, else all)."""
    import os
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def progress_bar(label: str, enabled: bool | None):
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


def add_profile_option(p) -> None:
    p.add_argument("--profile", default="auto", metavar="PATH|none|auto",
                   help="efficiencies: auto = the project's calibration profile for the hardware where one "
                        "exists (default); none = the hardware spec's own; or a profile file you fitted")
    p.add_argument("--no-profile", dest="profile", action="store_const", const="none",
                   help="the same as --profile none")


def profile_choice(args):
    """The ``--profile`` option as ``perfmodel.spec.profile``'s choice."""
    return None if args.profile == "none" else args.profile


def cost_model(args, scenario):
    """The scenario's cost section with the cost options given on the command line over it."""
    from perfmodel.spec.cost import parse_cost_model
    d = scenario.cost.model_dump(exclude_defaults=True)
    if args.tco:
        d["mode"] = "tco"
    if getattr(args, "price_basis", None):
        d["cloud_class"] = args.price_basis
    if getattr(args, "capacity", None):
        d["capacity"] = args.capacity
    for key, attr in (("usd_per_gpu_hour", "price"), ("purchase_usd_per_gpu", "purchase"), ("pue", "pue"),
                      ("usd_per_kwh", "usd_per_kwh"), ("amortisation_years", "amortisation_years"),
                      ("utilisation_frac", "utilisation")):
        if getattr(args, attr) is not None:
            d[key] = getattr(args, attr)
    return parse_cost_model(d)


def failure_model(args, scenario):
    """None (the scenario's reliability section), or with ``--no-failures`` the same with no failures."""
    if not args.no_failures:
        return None
    return scenario.reliability.model_copy(update={"gpu_failures_per_gpu_hour": 0.0, "node_failures_per_node_hour": 0.0,
                                                   "rack_failures_per_rack_hour": 0.0})


def add_set_option(p) -> None:
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="set a scenario field, e.g. reliability.restart_s=600, cost.mode=tco, startup.compile_s=900, "
                        "input_pipeline.loader_tokens_per_s_per_gpu=2e4 (repeatable)")


def search_options(args, **extra):
    from perfmodel.studies.search.search import parse_search_options
    d = {"objective": args.objective, "max_micro_batch_size": args.max_micro_batch_size}
    prec = csv_list(args.precisions, str, "precisions")
    if prec:
        d["precisions"] = tuple(prec)
    rc = csv_list(args.recompute, str, "recompute")
    if rc:
        d["recompute"] = tuple(rc)
    overlap = csv_list(args.overlap, str, "overlap")
    if overlap:
        from perfmodel.studies.search.job_variants import OVERLAP_KINDS
        d["overlap"] = OVERLAP_KINDS if overlap == ["all"] else tuple(overlap)
    schedules = csv_list(getattr(args, "schedules", None), str, "schedules")
    if schedules:
        from perfmodel.spec.schedules import schedule_names
        d["schedules"] = schedule_names() if schedules == ["all"] else tuple(schedules)
    sp = csv_list(getattr(args, "sequence_parallel", None), str, "--sequence-parallel")
    if sp:
        bad = [v for v in sp if v not in SP_WORDS]
        if bad:
            raise InputError("--sequence-parallel", f"{bad[0]!r} is not one of on, off")
        d["sequence_parallel"] = tuple(dict.fromkeys(SP_WORDS[v] for v in sp))
    d.update(extra)
    return parse_search_options(d)


SP_WORDS = {"on": True, "off": False}


def layout_text(c) -> str:
    from perfmodel.spec.schedules import schedule
    lay = c.layout()
    s = f"tp{lay['tp']} pp{lay['pp']}"
    s += f" v{lay['vpp']}" if lay["vpp"] > 1 else ""
    s += "" if schedule(lay["pipeline_schedule"]).megatron_order else f" {lay['pipeline_schedule']}"
    s += f" cp{lay['cp']}" if lay["cp"] > 1 else ""
    s += f" ep{lay['ep']}" if lay["ep"] > 1 else ""
    s += f" etp{lay['etp']}" if lay["etp"] > 1 else ""
    s += f" dp{lay['dp']} z{lay['zero_stage']} mb{lay['micro_batch_size']} {lay['recompute']} {lay['precision']}"
    base = c.scenario.software.overlap.model_fields
    changed = {k: v for k, v in lay["overlap"].items() if v != base[k].default}
    return s + "".join(f" {k}-overlap:{'chunked' if v is None else f'{v:g}'}" for k, v in changed.items())


def add_cost_options(p) -> None:
    g = p.add_argument_group("cost")
    g.add_argument("--price", type=float, help="cloud price, USD per GPU-hour (default: the scenario's cost "
                                               "section, else the hardware's)")
    g.add_argument("--price-basis", choices=["listed", "hyperscaler", "neocloud"],
                   help="which rental price of each hardware spec: its listed one (default; the provider class "
                        "differs between specs) or the on-demand price of one provider class for every spec")
    g.add_argument("--capacity", choices=["on_demand", "reserved_1y", "reserved_3y", "spot"],
                   help="how rented GPUs are held (default: the scenario's cost.capacity, else on demand); spot "
                        "preemptions enter goodput; a class with no sourced price needs --price")
    g.add_argument("--tco", action="store_true", help="own the hardware: capex + networking + energy")
    g.add_argument("--purchase", type=float, help="purchase price per GPU, USD (TCO)")
    g.add_argument("--pue", type=float)
    g.add_argument("--usd-per-kwh", type=float)
    g.add_argument("--amortisation-years", type=float)
    g.add_argument("--utilisation", type=float, help="fraction of the life in paid use (TCO)")


def add_study_options(p, objective: bool = True) -> None:
    """The options of the commands that search (search, scale, size)."""
    from perfmodel.spec.schedules import schedule_names
    p.add_argument("scenario")
    add_set_option(p)
    p.add_argument("--format", choices=["table", "json", "csv"], default="table")
    if objective:
        p.add_argument("--objective", choices=["time", "cost", "tokens_per_usd"], default="time")
    else:
        p.set_defaults(objective="time")
    p.add_argument("--precisions", help="comma-separated, e.g. bf16,fp8 (default: the scenario's)")
    p.add_argument("--recompute", help="comma-separated subset of none,selective,full (default: all)")
    p.add_argument("--overlap", help="communication whose overlap with compute to search, off and on: a "
                                     "comma-separated subset of tp,cp,ep,pp,dp,fsdp, or all (default: none, the "
                                     "scenario's settings)")
    p.add_argument("--schedules", help="pipeline schedules to try on every layout with pp > 1: a comma-separated "
                                       f"subset of {','.join(schedule_names())}, or all (default: the scenario's)")
    p.add_argument("--sequence-parallel", help="sequence parallelism to try on every layout with tp > 1: on, off, "
                                                "or on,off (default: on wherever tp > 1)")
    p.add_argument("--max-micro-batch-size", type=int, default=8)
    add_profile_option(p)
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    add_cost_options(p)
