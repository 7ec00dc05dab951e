"""Anchored what-ifs on the published runs: for every group of runs that share a source, a GPU
type and a model, anchor on each run in turn (its compute factor fitted) and predict the others.
Prints mean and median |error| of tokens/s per GPU, overall, per GPU type and per kind of change,
beside the unanchored ratio error; ``--write-band`` stores the error quantiles that band an
anchored prediction (perfmodel/data/anchored_band.yaml).

    python scripts/anchored_whatifs.py [--json] [--write-band] [--profile auto|none]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfmodel.spec.errors import write_text_file  # noqa: E402
from perfmodel.studies.observed.anchor_check import BAND_FILE, BAND_FORMAT, anchored_what_ifs  # noqa: E402
from perfmodel.studies.observed.validation import load_cases  # noqa: E402

CASES = ROOT / "perfmodel" / "data" / "published_runs.yaml"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="the summary and every pair as JSON")
    ap.add_argument("--write-band", action="store_true", help=f"write {BAND_FILE.relative_to(ROOT)}")
    ap.add_argument("--profile", default="auto")
    args = ap.parse_args(argv)
    profile = None if args.profile == "none" else args.profile
    result = anchored_what_ifs(load_cases(CASES), profile)
    s = result.summary()
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        o, r = s["overall"], s["ratio_error"]
        print(f"anchored what-ifs: {o['pairs']} ordered pairs in {s['groups']} groups (source, GPU, model)")
        print(f"  anchored   mean |error| {o['mean']:.2%}   median {o['median']:.2%}")
        print(f"  unanchored mean |ratio error| {r['mean']:.2%}   median {r['median']:.2%}")
        k = s["same_software"]
        print(f"  anchored, same software stack ({k['pairs']} pairs)   mean {k['mean']:.2%}   median {k['median']:.2%}")
        print("per GPU type:")
        for g, v in s["by_gpu"].items():
            print(f"  {g:16s} {v['pairs']:4d} pairs   mean {v['mean']:.2%}   median {v['median']:.2%}")
        print("per kind of change:")
        for c, v in s["by_change"].items():
            print(f"  {c:40s} {v['pairs']:4d} pairs   mean {v['mean']:.2%}   median {v['median']:.2%}")
        q = s["error_quantiles"]
        print(f"signed error quantiles: p10 {q['p10']:+.2%}  p50 {q['p50']:+.2%}  p90 {q['p90']:+.2%}")
        print("held-out coverage of the 80% band (leave-one-source-out):")
        for k, v in s["held_out_coverage"].items():
            cov = "n/a" if v["coverage"] is None else f"{v['coverage']:.1%}"
            print(f"  {k:20s} {v['pairs']:4d} pairs   {cov}")
        for line in s["unanchored"]:
            print(f"not anchored: {line}")
    if args.write_band:
        import yaml
        text = yaml.safe_dump({
            "format": BAND_FORMAT,
            "source": "scripts/anchored_whatifs.py over perfmodel/data/published_runs.yaml: every ordered pair "
                      "(anchor, target) of runs sharing a source, GPU and model; error = anchored predicted / "
                      "measured tokens/s per GPU - 1",
            "profile": args.profile, "pairs": s["overall"]["pairs"], "groups": s["groups"],
            "mean_abs_error": s["overall"]["mean"], "median_abs_error": s["overall"]["median"],
            "error_quantiles": q, "held_out_coverage": s["held_out_coverage"]}, sort_keys=False)
        write_text_file(BAND_FILE, text, "--write-band")
    return 0


if __name__ == "__main__":
    sys.exit(main())
