"""Diagnose a sweep of published cases: how much of each predicted step is attention?

    python -m calibration.attention_split CASE_ID_PREFIX [--cases FILE]

For each runnable case whose id starts with the prefix, the predicted step is split into the
attention kernels' share (the step minus the step with free attention) and the rest. A
least-squares fit of measured = a * attention + b * rest (relative errors) then says which part
the measurements ask to be faster or slower. With a sweep over sequence length at a fixed
layout this separates the attention kernel from everything else. A diagnostic only: the
scales are fitted to the cases themselves and feed nothing back into the model.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from perfmodel.engine.prediction import predict
from perfmodel.spec.errors import InputError
from perfmodel.spec.profile import efficiencies_for
from perfmodel.spec.scenario import hardware_of, parse_scenario
from perfmodel.studies.observed.validation import load_cases, measured_tps

RUNS = Path(__file__).resolve().parent.parent / "perfmodel" / "data" / "published_runs.yaml"
FREE = 1e6
"""An attention efficiency that makes the kernels cost nothing (validation skipped below)."""


def split(case: dict) -> tuple[float, float, float]:
    """(measured step s, predicted attention s, predicted rest s) of one case."""
    sc = parse_scenario(case["scenario"])
    eff = efficiencies_for(hardware_of(sc))[0]
    full = predict(sc, eff).step_time_s
    free = eff.model_copy(update={"attention": eff.attention.model_copy(
        update={"fwd_efficiency_max": FREE, "bwd_efficiency_max": FREE})})
    rest = predict(sc, free).step_time_s
    tps, _ = measured_tps(case)
    measured = sc.global_batch_size * sc.seq_length / (tps * sc.num_gpus)
    return measured, full - rest, rest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("prefix")
    ap.add_argument("--cases", default=str(RUNS))
    args = ap.parse_args()
    rows = []
    for case in load_cases(args.cases):
        if not case["id"].startswith(args.prefix) or not case.get("scenario"):
            continue
        try:
            rows.append((case["id"], *split(case)))
        except InputError as exc:
            print(f"skipped {case['id']}: {exc}")
    if len(rows) < 2:
        print("need at least two runnable cases")
        return 1
    print(f"{'case':60s} {'measured s':>10s} {'attention s':>11s} {'rest s':>8s} {'step error':>10s}")
    for cid, m, a, r in rows:
        print(f"{cid[:60]:60s} {m:10.3f} {a:11.3f} {r:8.3f} {100 * ((a + r) / m - 1):+9.1f}%")
    design = np.array([[a / m, r / m] for _, m, a, r in rows])
    (sa, sr), *_ = np.linalg.lstsq(design, np.ones(len(rows)), rcond=None)
    print(f"\nfit: attention x{sa:.3f}, rest x{sr:.3f}")
    for cid, m, a, r in rows:
        print(f"  {cid[:60]:60s} {100 * ((sa * a + sr * r) / m - 1):+6.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
