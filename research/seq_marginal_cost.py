"""The price of one more token of context, measured against predicted, along each published
sequence-length sweep.

For the runs of one source, GPU and model, in order of sequence length s, the time per token
and GPU is 1 / (tokens/s per GPU). Between neighbours a < b the marginal cost is

    (1/tps_b - 1/tps_a) / (s_b - s_a)        GPU-seconds per token per token of context,

and the script prints it measured and predicted, and their ratio. A common offset of a sweep
(the rest of the step priced too fast or too slow by the same seconds per token) cancels; what
is left is the price of the work that grows with s, attention above all. Issue 49 item 5
(docs/model.md, 'Known limits', third pass).

``--attention-own-clock`` is a what-if: every attention pass at the clock it was benchmarked
at wherever the GPU's power limit is at least the attention's own draw (``attention_phase_s``
with T_c x r_0 for all of T_c), instead of only after ``POWER_CONTROL_RESPONSE_S``.

    python research/seq_marginal_cost.py [--source TEXT ...] [--attention-own-clock]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

import perfmodel.formulas.compute as compute  # noqa: E402
from perfmodel.formulas.clocks import ATTENTION_OWN_POWER_W  # noqa: E402
from perfmodel.studies.observed.validation import CaseResult, load_cases, run_case  # noqa: E402

CASES = ROOT / "perfmodel" / "data" / "published_runs.yaml"
SOURCES = ("NeMo Long Sequence", "torchtitan benchmark report (end of 2024)")
MICRO = 1e6


def own_clock_phase_s(capped_s, eff, hw):
    """The what-if's attention pass: all of it at the benchmarked clock where the limit allows."""
    T_c, r_0 = np.asarray(capped_s, dtype=float), eff.attention_clock_ratio
    if r_0 >= 1.0 or hw.gpu.tdp_w is None or hw.gpu.tdp_w < ATTENTION_OWN_POWER_W:
        return T_c
    return T_c * r_0


def sweeps(cases, sources) -> dict:
    groups: dict = {}
    for c in cases:
        if not any(s in c.get("source", "") for s in sources):
            continue
        r = run_case(c)
        if isinstance(r, CaseResult):
            groups.setdefault((r.source[:40], r.gpu, r.model), []).append(r)
    return {k: sorted(v, key=lambda r: r.seq_length) for k, v in groups.items() if len(v) > 1}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", nargs="*", default=list(SOURCES), help="substrings of the sources to sweep")
    ap.add_argument("--attention-own-clock", action="store_true")
    args = ap.parse_args(argv)
    if args.attention_own_clock:
        compute.attention_phase_s = own_clock_phase_s
    for (source, gpu, model), runs in sweeps(load_cases(CASES), args.source).items():
        print(f"{source} | {gpu} | {model}")
        print(f"  {'s_a':>8} -> {'s_b':>8}  {'measured':>9} {'predicted':>9}  ratio   (us per token per 1k tokens)")
        for a, b in zip(runs, runs[1:]):
            if b.seq_length == a.seq_length:
                continue
            ds = (b.seq_length - a.seq_length) / 1e3
            meas = (1 / b.measured_tokens_per_s_per_gpu - 1 / a.measured_tokens_per_s_per_gpu) * MICRO / ds
            pred = (1 / b.predicted_tokens_per_s_per_gpu - 1 / a.predicted_tokens_per_s_per_gpu) * MICRO / ds
            print(f"  {a.seq_length:>8d} -> {b.seq_length:>8d}  {meas:>9.3f} {pred:>9.3f}  {meas / pred:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
