"""Wall time of one `perfmodel predict` process, start-up included (target: < 0.25 s).

    python scripts/bench_predict.py [SCENARIO.yaml] [--runs N]

Prints the median and the spread over N runs; not a test (timings depend on the machine).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", nargs="?")
    ap.add_argument("--runs", type=int, default=10)
    args = ap.parse_args()
    cmd = [sys.executable, "-m", "perfmodel.cli", "predict", "--format", "json"] + ([args.scenario] if args.scenario else [])
    times = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    times.sort()
    print(f"perfmodel predict wall time over {args.runs} runs: median {statistics.median(times):.3f} s, "
          f"min {times[0]:.3f} s, max {times[-1]:.3f} s (target < 0.25 s)")
    cached = any((Path(__file__).resolve().parent.parent / "perfmodel" / "__pycache__").glob("predict.*.pyc"))
    if (os.environ.get("PYTHONDONTWRITEBYTECODE") or sys.dont_write_bytecode) and not cached:
        print("note: PYTHONDONTWRITEBYTECODE is set and perfmodel has no bytecode cache, so every run "
              "compiles it from source (0.04-0.08 s more, measured in this sandbox); "
              "`python -m compileall perfmodel` once, as scripts/test.sh does, gives the cached figure")
    return 0


if __name__ == "__main__":
    sys.exit(main())
