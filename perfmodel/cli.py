"""Command line: ``perfmodel predict|describe|validate|search|scale|size|bench|bench-hw|calibrate|app``.

Invalid input exits with status 2 and one line on stderr naming the field; no traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from perfmodel.present import fmt
from perfmodel.spec.paths import DATA_DIR, PROJECT_DIR
from perfmodel.spec.errors import InputError, one_line

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


def _emit_json(obj) -> None:
    print(to_json(obj))


def _load(path: str):
    from perfmodel.spec.scenario import load_scenario
    return load_scenario(path)


# ------------------------------------------------------------------------------- predict
def cmd_predict(args) -> int:
    from perfmodel.engine.prediction import predict
    from perfmodel.spec.profile import efficiency_for_hardware
    sc = _load(args.scenario)
    eff = None if args.no_profile else efficiency_for_hardware(sc.hardware)
    p = predict(sc, efficiency=eff)
    if args.format == "json":
        _emit_json(p.to_dict())
        return 0
    rows = [
        ["step time", fmt.seconds(p.step_time_s)],
        ["tokens/s", fmt.si(p.tokens_per_s, "tok/s")],
        ["tokens/s per GPU", fmt.si(p.tokens_per_s_per_gpu, "tok/s")],
        ["MFU", fmt.percent(p.mfu)],
        ["memory per GPU", f"{fmt.bytes_binary(p.memory_per_gpu_bytes)} ({'fits' if p.fits_in_memory else 'DOES NOT FIT'})"],
        ["bottleneck", f"{p.bottleneck} ({p.bottleneck_lens})"],
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


# ------------------------------------------------------------------------------ describe
def describe_dict(sc) -> dict:
    from perfmodel.formulas.layouts import layouts_from_job
    from perfmodel.formulas.memory import fits_in_memory
    from perfmodel.formulas.placement import job_domain_gpus
    from perfmodel.engine.prediction import job_constants
    from perfmodel.spec.scenario import resolve
    from perfmodel.engine.evaluate import job_memory
    from perfmodel.formulas.counts import param_count, training_flop_per_token
    job = resolve(sc)
    pc = param_count(job.model)
    mem = job_memory(job_constants(job), layouts_from_job(job))
    return {
        "model": job.model.name, "hardware": job.hardware.id, "num_gpus": sc.num_gpus, "dp": job.dp,
        "num_microbatches": job.num_microbatches,
        "gpus_per_scale_up_domain": job_domain_gpus(job.hardware, sc.num_gpus),
        "model_params_total": int(pc.total), "model_params_active": float(pc.active),
        "model_params_stored": int(pc.stored),
        "model_flops_per_token": training_flop_per_token(job.model, sc.seq_length, causal=True).total,
        "model_flops_per_token_full_attention": training_flop_per_token(job.model, sc.seq_length, causal=False).total,
        "memory_per_gpu_bytes": float(mem.total[0]),
        "memory_breakdown_bytes": {r["component"]: float(r["bytes"]) for r in mem.rows(0)},
        "usable_hbm_bytes": job.hardware.gpu.hbm_usable_bytes,
        "fits_in_memory": bool(fits_in_memory(mem, job.hardware)[0]),
    }


def cmd_describe(args) -> int:
    d = describe_dict(_load(args.scenario))
    if args.format == "json":
        _emit_json(d)
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


# ------------------------------------------------------------------------------ validate
def cmd_validate(args) -> int:
    from perfmodel.studies.validation import load_cases, validate
    from perfmodel.spec.profile import efficiency_for_hardware
    lookup = None if args.no_profile else efficiency_for_hardware
    report = validate(load_cases(args.cases), lookup)
    if args.format == "json":
        _emit_json(report.to_dict())
        return 0
    if args.format == "markdown":
        from perfmodel.present.validation_report import markdown
        print(markdown(report, profiles=not args.no_profile))
        return 0
    rows = [[r.id[:56], r.hardware, f"{r.measured_tokens_per_s_per_gpu:,.0f}", f"{r.predicted_tokens_per_s_per_gpu:,.0f}",
             f"{100 * r.error:+.1f}%", "-" if r.measured_mfu is None else f"{r.measured_mfu:.3f}",
             f"{r.predicted_mfu:.3f}", r.bottleneck] for r in report.results]
    print(fmt.table(rows, header=["case", "hardware", "meas tok/s/GPU", "pred", "error", "meas MFU", "pred MFU", "bottleneck"]))
    print()
    for s in report.skipped:
        print(f"skipped {s.id}: {s.reason}")
    print()
    print("worst ten:")
    for r in report.worst():
        print(f"  {r.id}: {100 * r.error:+.1f}%")
    print()
    mem = report.memory_results()
    if mem:
        print("peak memory per GPU (cases that publish it):")
        print(fmt.table([[r.id[:56], f"{r.measured_peak_memory_gib:.1f}", f"{r.predicted_memory_gib:.1f}",
                          f"{100 * r.memory_error:+.0f}%"] for r in mem],
                        header=["case", "measured GiB", "predicted GiB", "error"]))
        print(f"memory MAPE over {len(mem)} cases: {fmt.percent(report.memory_mape())}")
        print()
    print(fmt.table([[src[:64], str(v["cases"]), fmt.percent(v["mape"]), f"{100 * v['mean_error']:+.1f}%"]
                     for src, v in report.by_source().items()],
                    header=["source", "cases", "MAPE", "mean error"]))
    print()
    hw_rows = [[g, str(v["cases"]), fmt.percent(v["mape"]), ", ".join(v["specs"])] for g, v in report.by_gpu().items()]
    hw_rows.append(["overall", str(len(report.results)), fmt.percent(report.mape()), ""])
    print(fmt.table(hw_rows, header=["GPU", "cases", "MAPE tokens/s/GPU", "specs"]))
    wi = report.what_if()
    print(f"what-if accuracy (ratios between cases of one source, GPU and model): mean {fmt.percent(wi['mean'])}, "
          f"median {fmt.percent(wi['median'])} over {wi['pairs']} pairs of {wi['cases']} cases")
    rep = report.repeats()
    print(f"repeated jobs: {len(rep['groups'])} groups of equal scenarios measured apart leave a floor of "
          f"{fmt.percent(rep['floor_mape'])} under the overall MAPE")
    print(f"memory fit: the model says {len(report.not_fitting())} of {len(report.results)} published runs "
          "do not fit (each is a memory-model miss)")
    return 0


# ----------------------------------------------------------------------------------- app
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
"""Addresses that keep the app on this machine (``--host``'s default is the first)."""


def cmd_app(args) -> int:
    """Run ``app/serve.py``: Streamlit with ``app/.streamlit/config.toml`` (loopback only, no
    usage statistics, no address look-ups), listening on ``--host``:``--port``."""
    import os
    serve = PROJECT_DIR / "app" / "serve.py"
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


def _add_optional_commands(sub) -> None:
    """Commands whose modules may bring heavier imports register lazily."""
    from perfmodel import cli_more
    cli_more.register(sub)


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line on stderr (exit 2), like every other input error."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} -h)\n")


def build_parser() -> argparse.ArgumentParser:
    ap = _OneLineParser(prog="perfmodel", description="Analytical performance and cost model of distributed AI training.")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)

    p = sub.add_parser("predict", help="predict step time, throughput, MFU, memory and cost for a scenario")
    p.add_argument("scenario", nargs="?", default=str(EXAMPLE_SCENARIO))
    p.add_argument("--format", choices=["json", "table"], default="table")
    p.add_argument("--no-profile", action="store_true", help="ignore calibration profiles; use the spec's default efficiencies")
    p.set_defaults(func=cmd_predict)

    p = sub.add_parser("describe", help="parameters, FLOPs per token and the memory breakdown")
    p.add_argument("scenario", nargs="?", default=str(EXAMPLE_SCENARIO))
    p.add_argument("--format", choices=["json", "table"], default="table")
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser("validate", help="predicted against published runs")
    p.add_argument("cases")
    p.add_argument("--format", choices=["json", "table", "markdown"], default="table")
    p.add_argument("--no-profile", action="store_true", help="ignore calibration profiles")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("app", help="start the Streamlit app (on this machine only, unless --host says otherwise)")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--host", default=LOOPBACK_HOSTS[0],
                   help="address to listen on; 0.0.0.0 opens the app to every network this machine is on")
    p.set_defaults(func=cmd_app)

    _add_optional_commands(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        code = int(args.func(args) or 0)
        sys.stdout.flush()        # a full disk or a closed pipe shows here, not at exit
        return code
    except InputError as exc:
        print(f"perfmodel: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        _drop_stdout()
        return 0
    except OSError as exc:        # a file the user named (a path too long, stdout on a full device)
        _drop_stdout()
        where = exc.filename if exc.filename is not None else "output"
        print(f"perfmodel: error: {one_line(where)}: {exc.strerror or type(exc).__name__}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - the last line of defence: no traceback for users
        print(f"perfmodel: internal error: {type(exc).__name__}: {one_line(exc)}", file=sys.stderr)
        return 1


def _drop_stdout() -> None:
    """Point stdout at /dev/null once writing to it failed, so the interpreter's own flush at exit
    does not fail again with a traceback (Python docs, 'Note on SIGPIPE')."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):   # not a real file (tests capture stdout)
        pass


if __name__ == "__main__":
    sys.exit(main())
