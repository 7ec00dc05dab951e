"""Sequence-length what-ifs on the published runs: every pair of runs of one source, GPU and model
whose sequence lengths differ, the shorter as the base, and the error of the predicted speed-up
(``perfmodel.studies.observed.validation.ratio_error``: (predicted_long / predicted_short) / (measured_long /
measured_short) - 1 on tokens/s per GPU). Issue 49 asks for its mean before and after a change.

    python research/seq_length_whatifs.py [--json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from perfmodel.studies.observed.validation import CaseResult, load_cases, ratio_error, run_case  # noqa: E402

CASES = ROOT / "perfmodel" / "data" / "published_runs.yaml"


def seq_pairs(cases) -> list[dict]:
    rows = []
    for c in cases:
        r = run_case(c)
        if isinstance(r, CaseResult):
            rows.append(r)
    groups: dict = {}
    for r in rows:
        groups.setdefault((r.source, r.gpu, r.model), []).append(r)
    out = []
    for (source, gpu, model), members in sorted(groups.items()):
        for a, b in itertools.permutations(members, 2):
            if a.seq_length < b.seq_length:
                out.append({"source": source, "gpu": gpu, "model": model, "short": a.id, "long": b.id,
                            "seq_short": a.seq_length, "seq_long": b.seq_length, "ratio_error": ratio_error(b, a)})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    pairs = seq_pairs(load_cases(CASES))
    e = np.abs([p["ratio_error"] for p in pairs])
    summary = {"pairs": len(pairs), "mean_abs_ratio_error": float(e.mean()) if e.size else None,
               "median_abs_ratio_error": float(np.median(e)) if e.size else None}
    if args.json:
        print(json.dumps({**summary, "pair_rows": pairs}, indent=2))
        return 0
    for p in pairs:
        print(f"{p['gpu']:12s} {p['model'][:22]:22s} {p['seq_short']:>8d} -> {p['seq_long']:>8d}  "
              f"{p['ratio_error']:+.1%}  {p['long']}")
    print(f"{summary['pairs']} pairs: mean |ratio error| {summary['mean_abs_ratio_error']:.1%}, "
          f"median {summary['median_abs_ratio_error']:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
