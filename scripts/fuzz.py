"""Fuzz every entry point for longer than the test suite does, and print the counts.

    python scripts/fuzz.py [--api 2000] [--cli 300] [--files 5] [--physics 500] [--goodput 500]
                           [--app 40] [--software 1000] [--logs 500] [--studies 100] [--size 20] [--seed 0]

Counts per entry point: inputs tried, answers, one-line errors, and defects (tracebacks, wrong
exit codes, invariant violations, hangs), with the first examples of each defect. Exit status 1
when any defect was found. The checks are those of ``tests/support/fuzz.py``.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support import fuzz as harness  # noqa: E402
from support import fuzz_more  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in (("api", 2000), ("cli", 300), ("files", 5), ("physics", 500), ("goodput", 500),
                          ("app", 40), ("software", 1000), ("logs", 500), ("studies", 100), ("size", 20)):
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    tallies: dict[str, harness.Tally] = {}
    tmp = Path(tempfile.mkdtemp(prefix="perfmodel-fuzz-"))
    plan = [
        ("api", args.api, lambda: harness.check_api(harness.scenario_input(rng))),
        ("cli", args.cli, lambda: harness.check_cli_scenario(harness.scenario_input(rng), tmp, rng)),
        ("files", args.files * len(harness.HOSTILE_TEXTS),
         lambda: harness.check_file(rng.choice(harness.HOSTILE_TEXTS), tmp, rng)),
        ("physics", args.physics, lambda: harness.check_faster_hardware(harness.valid_scenario(rng), rng)),
        ("goodput", args.goodput, lambda: harness.check_goodput(rng)),
        ("app", args.app, lambda: harness.check_app(harness.hostile_link(rng))),
        ("software", args.software, lambda: harness.check_faster_hardware(harness.valid_scenario(rng, True), rng)
         if rng.random() < 0.5 else harness.check_api(harness.mutate(harness.valid_scenario(rng, True), rng))),
        ("logs", args.logs, lambda: fuzz_more.check_log(fuzz_more.log_text(rng), tmp, rng)),
        ("studies", args.studies, lambda: fuzz_more.check_studies(harness.valid_scenario(rng, True), tmp, rng)),
        ("size", args.size, lambda: fuzz_more.check_size_processes(harness.valid_scenario(rng), tmp, rng)),
    ]
    for name, n, check in plan:
        t0 = time.perf_counter()
        tally = tallies.setdefault(name, harness.Tally())
        for _ in range(n):
            tally.add(check())
        print(f"{name:8s} {tally.tried:6d} tried in {time.perf_counter() - t0:6.1f} s: "
              + ", ".join(f"{k} {v}" for k, v in tally.counts.items()), flush=True)
    total = harness.Tally()
    for t in tallies.values():
        for k, v in t.counts.items():
            total.counts[k] += v
    print(f"{'total':8s} {total.tried:6d} tried: " + ", ".join(f"{k} {v}" for k, v in total.counts.items()))
    for name, t in tallies.items():
        for kind, examples in t.examples.items():
            print(f"\n{name} {kind} ({len(examples)}):")
            for e in examples[:5]:
                print(f"  {e}")
    return 1 if total.defects else 0


if __name__ == "__main__":
    sys.exit(main())
