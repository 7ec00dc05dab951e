"""Command lines: ``bench-hw`` (run the suite), ``calibrate`` (fit a profile), ``fit-published``.

Each ``*_main(argv) -> int`` returns 0 on success and 2 on bad input, after one line on
stderr (no traceback). ``python -m calibration COMMAND ...`` dispatches to them; the
``perfmodel`` CLI can call them as ``perfmodel bench-hw`` and ``perfmodel calibrate``.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from perfmodel.spec.errors import InputError, check_output_path, one_line
from perfmodel.spec.hardware import list_hardware_ids, load_hardware, load_hardware_file
from perfmodel.spec.limits import MAX_BENCH_REPEATS, MAX_MESSAGE_BYTES, MAX_TFLOP_PER_S
from perfmodel.spec.units import TERA

from .bench import GROUPS, plan_for, require_groups, run_and_write, select_backend, with_overrides
from .fit import SKIPPABLE, fit_efficiencies, quality_lines, require_records
from .parsers import load_any
from .profile import write_profile
from .published import PROFILES_DIR, PUBLISHED_HARDWARE, default_data_path, fit_published, require_file
from .report import quality_text, write_plot

EXIT_INPUT = 2
MAX_GLOO_RANKS = 64
"""CPU processes of a gloo test of the collective sweep (it tests the code path, not a machine)."""
MAX_ATTENTION_SEQ = 2**20
"""Longest sequence ``--attention-seqs`` takes: 1M tokens, the longest published training
sequences (perfmodel.spec.limits.MAX_SEQ_LENGTH); one head set of Q, K, V and their gradients at
32 x 128 in bf16 is then about 48 GiB."""
MAX_ATTENTION_POINTS = 16
"""Sequence lengths one ``--attention-seqs`` may list."""


def _int_list(text: str, field: str, low: int, high: int, most: int) -> tuple[int, ...]:
    """'a,b,c' as integers, each in [low, high], at most ``most`` of them."""
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items:
        raise InputError(field, "expected a comma-separated list of integers, got nothing")
    if len(items) > most:
        raise InputError(field, f"at most {most} values, got {len(items)}")
    out = []
    for item in items:
        try:
            value = int(item)
        except ValueError:
            raise InputError(field, f"expected an integer, got {item!r}") from None
        if not low <= value <= high:
            raise InputError(field, f"each value must be {low} to {high}, got {value}")
        out.append(value)
    return tuple(out)


def _groups(text: str | None) -> tuple[str, ...]:
    """``--only``'s comma-separated groups, checked before any work."""
    return GROUPS if text is None else require_groups(t.strip() for t in text.split(",") if t.strip())


class _Parser(argparse.ArgumentParser):
    def error(self, message):   # one line, exit 2 (argparse prints usage too by default)
        raise InputError(self.prog, message)


def _run(fn, argv, raise_errors: bool = False) -> int:
    """``fn(argv)``; bad input, or a file that cannot be read or written, is one line on stderr
    and exit status 2. ``raise_errors``: raise the InputError instead (``perfmodel bench-hw`` and
    ``perfmodel calibrate`` print it the way every perfmodel command does)."""
    try:
        return fn(argv)
    except OSError as exc:    # the last line of defence for files: readers and writers raise InputError
        err = InputError(exc.filename or "file", exc.strerror or type(exc).__name__)
        if raise_errors:
            raise err from None
        print(f"error: {err}", file=sys.stderr)
    except InputError as exc:
        if raise_errors:
            raise
        print(f"error: {one_line(exc)}", file=sys.stderr)
    except MemoryError:       # a plan too large for this machine (numpy's full attention scores)
        err = InputError("memory", "this run needs more memory than the machine has; measure fewer or "
                                   "shorter points (--only, --attention-seqs)")
        if raise_errors:
            raise err from None
        print(f"error: {err}", file=sys.stderr)
    return EXIT_INPUT


def bench_hw_main(argv=None, raise_errors: bool = False) -> int:
    return _run(_bench_hw, argv, raise_errors)


def calibrate_main(argv=None, raise_errors: bool = False) -> int:
    return _run(_calibrate, argv, raise_errors)


def bench_hw_command(argv) -> int:
    """``perfmodel bench-hw ...`` (registered under the ``perfmodel.commands`` entry points)."""
    return bench_hw_main(argv, raise_errors=True)


def calibrate_command(argv) -> int:
    """``perfmodel calibrate ...`` (registered under the ``perfmodel.commands`` entry points)."""
    return calibrate_main(argv, raise_errors=True)


def fit_published_main(argv=None) -> int:
    return _run(_fit_published, argv)


def _output_folder(path: str, field: str) -> Path:
    """A folder to write into: refused when it is an existing file."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(field, f"{p} is a file, not a folder")
    return p


def _bench_hw(argv) -> int:
    p = _Parser(prog="bench-hw", description="Run the calibration microbenchmark suite.")
    p.add_argument("--backend", default="auto", help="auto (torch with CUDA, else numpy) | numpy | torch")
    p.add_argument("--quick", action="store_true", help="small sizes and few repeats (CI)")
    p.add_argument("--out", default="calibration/results", help="folder for <device>-<date>/results.yaml")
    p.add_argument("--repeats", type=int, default=None, help="timed repeats per point")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls per point before timing")
    p.add_argument("--only", default=None, metavar="GROUP,...",
                   help=f"run these groups alone ({', '.join(GROUPS)}); default all")
    p.add_argument("--attention-seqs", default=None, metavar="N,...",
                   help="sequence lengths of the attention group, in place of the plan's")
    p.add_argument("--gloo-ranks", type=int, default=0,
                   help="CPU only: run the collective sweep over N gloo processes (tests the code path)")
    args = p.parse_args(argv)
    if args.repeats is not None and not 1 <= args.repeats <= MAX_BENCH_REPEATS:
        raise InputError("--repeats", f"must be 1 to {MAX_BENCH_REPEATS}, got {args.repeats}")
    if args.warmup is not None and not 0 <= args.warmup <= MAX_BENCH_REPEATS:
        raise InputError("--warmup", f"must be 0 to {MAX_BENCH_REPEATS}, got {args.warmup}")
    if not 0 <= args.gloo_ranks <= MAX_GLOO_RANKS:
        raise InputError("--gloo-ranks", f"must be 0 to {MAX_GLOO_RANKS}, got {args.gloo_ranks}")
    groups = _groups(args.only)
    seqs = (None if args.attention_seqs is None else
            _int_list(args.attention_seqs, "--attention-seqs", 1, MAX_ATTENTION_SEQ, MAX_ATTENTION_POINTS))
    out = _output_folder(args.out, "--out")
    backend = select_backend(args.backend, args.quick, args.gloo_ranks)
    plan = with_overrides(plan_for(backend.device_kind, args.quick), args.repeats, args.warmup, seqs)
    which = "" if groups == GROUPS else f" ({', '.join(groups)})"
    print(f"bench-hw: backend {backend.name}, {'quick' if args.quick else 'full'} plan{which}")
    path = run_and_write(backend, plan, out, groups=groups)
    if path is not None:
        print(f"wrote {path}")
    return 0


def _peaks(items) -> dict[str, float]:
    out = {}
    for item in items or []:
        name, _, value = item.partition("=")
        try:
            tflops = float(value)
        except ValueError:
            raise InputError("--peak-tflops", f"expected PRECISION=TFLOPS, got {item!r}") from None
        if not (math.isfinite(tflops) and 0 < tflops <= MAX_TFLOP_PER_S):
            raise InputError("--peak-tflops", f"{name.strip()}: TFLOP/s must be in (0, {MAX_TFLOP_PER_S:g}], "
                                              f"got {value!r}")
        out[name.strip()] = tflops * TERA
    return out


def _calibrate(argv) -> int:
    p = _Parser(prog="calibrate", description="Fit efficiency forms to measurements and write a profile.")
    p.add_argument("results", nargs="+", help="suite result files, nccl-tests logs, or a microbenchmarks.yaml")
    p.add_argument("--hardware", required=True, help="hardware id or YAML path (peaks, defaults)")
    p.add_argument("-o", "--output", required=True, help="profile YAML to write")
    p.add_argument("--plot", default=None, help="measured vs fitted: PATH.csv, or PATH.html (chart + csv)")
    p.add_argument("--peak-tflops", action="append", metavar="PREC=TFLOPS",
                   help="override a dense peak (e.g. fp32=1.5 for a CPU run); repeatable")
    p.add_argument("--fabric", default=None, choices=("scale_up", "scale_out"),
                   help="fabric of nccl-tests logs (default: scale_out when ranks span hosts)")
    p.add_argument("--min-collective-bytes", type=float, default=2**20,
                   help="collective fits use sizes >= this (default 1 MiB)")
    p.add_argument("--max-regimes", type=int, default=3, help="alpha-beta lines per collective curve (1-3)")
    p.add_argument("--attention-impl", default=None,
                   help="attention kernel to fit when the results time several (e.g. sdpa-cudnn)")
    p.add_argument("--grouped-impl", default=None,
                   help="grouped-GEMM kernel to fit when the results time several (e.g. 'torch.mm per expert')")
    p.add_argument("--skip", action="append", default=[], metavar="GROUP",
                   help=f"leave a group's records unfitted, keeping the spec value; repeatable "
                        f"({', '.join(SKIPPABLE)})")
    args = p.parse_args(argv)
    if not 1 <= args.max_regimes <= 3:
        raise InputError("--max-regimes", f"must be 1, 2 or 3, got {args.max_regimes}")
    if not (math.isfinite(args.min_collective_bytes) and 0 <= args.min_collective_bytes <= MAX_MESSAGE_BYTES):
        raise InputError("--min-collective-bytes", f"must be a finite size in [0, {MAX_MESSAGE_BYTES:g}], "
                                                   f"got {args.min_collective_bytes}")
    catalogue = args.hardware in list_hardware_ids()
    inputs = [*args.results, *([] if catalogue else [args.hardware])]
    check_output_path(args.output, "--output", inputs)     # before any work
    if args.plot:
        check_output_path(args.plot, "--plot", [*inputs, args.output])
    peaks = _peaks(args.peak_tflops)
    spec = load_hardware(args.hardware) if catalogue else load_hardware_file(args.hardware)
    results = [load_any(path, hardware_id=spec.id, fabric=args.fabric) for path in args.results]
    require_records(results)
    cal = fit_efficiencies(results, spec, peaks, args.min_collective_bytes, args.max_regimes,
                           attention_impl=args.attention_impl, grouped_impl=args.grouped_impl, skip=tuple(args.skip))
    path = write_profile(args.output, spec.id, cal.efficiencies, quality=quality_lines(cal), field="--output",
                         inputs=inputs)
    print(quality_text(cal, spec.id))
    if args.plot:
        for written in write_plot(cal, args.plot, "--plot", [*inputs, args.output]):
            print(f"wrote {written}")
    print(f"wrote {path}")
    return 0


def _fit_published(argv) -> int:
    p = _Parser(prog="fit-published", description="Fit profiles to shared/data/microbenchmarks.yaml.")
    p.add_argument("--data", default=None, help="microbenchmarks.yaml (default: calibration/data/ copy)")
    p.add_argument("--out", default=str(PROFILES_DIR), help="folder for <hardware-id>.yaml")
    p.add_argument("--hardware", nargs="+", default=list(PUBLISHED_HARDWARE))
    p.add_argument("--plot-dir", default=None, help="also write <hardware-id>.csv of measured vs fitted")
    p.add_argument("--published-only", action="store_true",
                   help="leave out the suite runs of calibration/results (MEASURED_RUNS)")
    args = p.parse_args(argv)
    data = require_file(Path(args.data) if args.data else default_data_path())
    out = _output_folder(args.out, "--out")
    if args.plot_dir:
        _output_folder(args.plot_dir, "--plot-dir")
    for fitted in fit_published(data, args.hardware, out, measured={} if args.published_only else None):
        print(quality_text(fitted.calibration, fitted.hardware_id))
        if args.plot_dir:
            write_plot(fitted.calibration, Path(args.plot_dir) / f"{fitted.hardware_id}.csv")
        print(f"wrote {fitted.path}\n")
    return 0


def step_check_main(argv=None) -> int:
    from . import step_check
    return _run(lambda a: step_check.main(a, parser_class=_Parser), argv)


def clocks_main(argv=None) -> int:
    from . import clocks
    return _run(lambda a: clocks.main(a, parser_class=_Parser), argv)


COMMANDS = {"bench-hw": bench_hw_main, "calibrate": calibrate_main, "fit-published": fit_published_main,
            "step-check": step_check_main, "clocks": clocks_main}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: python -m calibration {{{','.join(COMMANDS)}}} ...", file=sys.stderr)
        return EXIT_INPUT
    return COMMANDS[argv[0]](argv[1:])
