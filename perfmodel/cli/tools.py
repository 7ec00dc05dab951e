"""``perfmodel bench`` (how fast the engine is) and ``perfmodel app`` (the Streamlit app)."""

from __future__ import annotations

import os
import sys

import perfmodel as pm
from perfmodel.cli.common import emit_json
from perfmodel.present import fmt
from perfmodel.spec.errors import InputError
from perfmodel.spec.paths import PROJECT_DIR

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
"""Addresses that keep the app on this machine (``--host``'s default is the first)."""


def cmd_bench(args) -> int:
    from perfmodel.studies.bench import IMPORT_FLOOR

    res = pm.bench(args.repeat)
    if args.format == "json":
        emit_json(res.to_dict())
        return 0
    lay = res.best_layout
    rows = [
        ["scenario", "GPT-3 175B, 1,024 x H100, batch 1,536 x 2,048"],
        ["cores", str(res.cores)],
        ["layouts enumerated / valid / fit", f"{res.layouts_enumerated:,} / {res.layouts_valid:,} / {res.layouts_fit:,}"],
        ["full search wall time (best, median)",
         f"{fmt.seconds(res.full_search_wall_s_best)}, {fmt.seconds(res.full_search_wall_s_median)}"],
        ["layout evaluations/s (whole search)", f"{res.evaluations_per_s:,.0f}"],
        ["layout evaluations/s (in evaluate, during the search)", f"{res.evaluations_in_search_per_s:,.0f}"],
        [f"layout evaluations/s (evaluate over all {res.raw_layouts:,} valid layouts)",
         f"{res.raw_evaluations_per_s:,.0f}"],
        ["whole search over evaluate alone (evaluations/s)", f"{res.search_over_raw_rate:.2f}"],
        ["best layout", f"tp{lay['tp']} pp{lay['pp']} vpp{lay['vpp']} {lay['pipeline_schedule']} dp{lay['dp']} "
                        f"mb{lay['micro_batch_size']} {lay['recompute']} ({fmt.seconds(res.best_step_time_s)} per step)"],
        ["widened search (bf16, fp16, fp8; SP on and off; every overlap switch and pipeline schedule)",
         f"{res.wide_candidates:,} candidates, {res.wide_evaluated:,} timed, {fmt.seconds(res.wide_search_wall_s)}, "
         f"{res.wide_evaluations_per_s:,.0f} evaluations/s"],
    ]
    rows.append(["predict in a warm process (median)", fmt.seconds(res.warm_predict_s)])
    if res.predict_wall_s is not None:
        rows.append(["perfmodel predict, one process (median)", fmt.seconds(res.predict_wall_s)])
        rows.append([f"python -c '{IMPORT_FLOOR}' (median); predict over it (median of the run-by-run ratios)",
                     f"{fmt.seconds(res.import_floor_wall_s)}; {res.predict_over_import_floor:.2f}"])
    if res.large_search_peak_rss_bytes is not None:
        rows.append(["DeepSeek-V3 on 2,048 GB200 NVL72, bf16 + fp8: peak memory (before the search)",
                     f"{fmt.bytes_binary(res.large_search_peak_rss_bytes)} "
                     f"({fmt.bytes_binary(res.large_search_baseline_rss_bytes)}); "
                     f"{res.large_search_candidates:,} candidates in {fmt.seconds(res.large_search_wall_s)}"])
    print(fmt.table(rows))
    return 0


def cmd_app(args) -> int:
    """Run ``app/serve.py``: Streamlit with ``app/.streamlit/config.toml`` (loopback only, no
    usage statistics, no address look-ups), listening on ``--host``:``--port``."""
    serve = PROJECT_DIR / "app" / "serve.py"
    if not serve.is_file():
        raise InputError("app", "the app runs from a source checkout (app/ is not in the wheel): clone the "
                                "repository and run `perfmodel app` there")
    cmd = [sys.executable, str(serve), "--server.port", str(args.port), "--server.address", args.host]
    if args.host not in LOOPBACK_HOSTS:
        # Clients will name this machine however they reach it: accept any Host header.
        cmd += ["--server.allowedHosts", "*"]
        print(f"perfmodel app: listening on {args.host}:{args.port}: anyone who can reach this machine on that "
              f"address can use the app (the default, --host {LOOPBACK_HOSTS[0]}, keeps it to this machine)",
              file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, cmd)   # replace this process, so signals reach Streamlit directly


def register(sub) -> None:
    p = sub.add_parser("bench", help="layout evaluations per second and full-search wall time")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("app", help="start the Streamlit app (on this machine only, unless --host says otherwise)")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--host", default=LOOPBACK_HOSTS[0],
                   help="address to listen on; 0.0.0.0 opens the app to every network this machine is on")
    p.set_defaults(func=cmd_app)
