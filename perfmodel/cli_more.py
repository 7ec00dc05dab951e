"""Sub-commands for search, scaling, sizing, benchmarks and calibration."""

from __future__ import annotations


def register(sub) -> None:
    try:
        from calibration.cli import bench_hw_main, calibrate_main
    except ImportError:
        return

    p = sub.add_parser("bench-hw", help="run the calibration microbenchmarks", add_help=False)
    p.add_argument("rest", nargs="*")
    p.set_defaults(func=lambda a: bench_hw_main(a.rest))

    p = sub.add_parser("calibrate", help="fit a calibration profile to microbenchmark results", add_help=False)
    p.add_argument("rest", nargs="*")
    p.set_defaults(func=lambda a: calibrate_main(a.rest))
