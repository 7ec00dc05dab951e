"""Experiment, not adopted: the Megatron-Core-based stacks' attention at the cuDNN kernel's curve.

    python research/attention_kernel_experiment.py

The profiles fit two fused-attention curves to the lent H100s' suite runs (calibration/
published.py): FlashAttention-2's (``attention``, what ``attention_backend: flash`` runs) and
cuDNN's (``attention_cudnn``, what ``cudnn`` runs), about 1.7x faster. MaxText's recipe names
cuDNN (attention=cudnn_flash_te), so the maxtext stack runs ``cudnn``. Transformer Engine, under
the Megatron-Core stacks (megatron-core, nemo-perf, megatron-bridge-perf), prefers cuDNN on
Hopper too, but those stacks keep ``flash`` as a stand-in chosen from their runs. This gives
their H100 cases ``cudnn`` instead and prints the validation error per source both ways: what
the stand-in covers. A diagnostic: nothing here feeds the model.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from perfmodel.engine.prediction import predict  # noqa: E402
from perfmodel.spec.profile import efficiencies_for  # noqa: E402
from perfmodel.spec.scenario import hardware_of, parse_scenario  # noqa: E402
from perfmodel.studies.observed.validation import load_cases, measured_tps  # noqa: E402

TE_STACKS = {"megatron-core", "nemo-perf", "megatron-bridge-perf"}
H100_IDS = ("h100-sxm", "h100-sxm-hbm2e-500w")


def main() -> int:
    by = collections.defaultdict(lambda: ([], []))
    for case in load_cases(ROOT / "perfmodel" / "data" / "published_runs.yaml"):
        if not case.get("scenario"):
            continue
        sc = parse_scenario(case["scenario"])
        hw = hardware_of(sc)
        if hw.id not in H100_IDS:
            continue
        eff = efficiencies_for(hw)[0]
        measured, _ = measured_tps(case)
        flash = predict(sc, eff).tokens_per_s_per_gpu / measured - 1
        stack = (case["scenario"].get("software") or {}).get("stack")
        other = flash
        if stack in TE_STACKS:
            te = sc.model_copy(update={"software": sc.software.model_copy(update={"attention_backend": "cudnn"})})
            other = predict(te, eff).tokens_per_s_per_gpu / measured - 1
        for key in ("all H100 cases", case["source"].split(" — ")[0][:60]):
            by[key][0].append(abs(flash))
            by[key][1].append(abs(other))
    print(f"{'source':62s} {'cases':>5s} {'flash':>7s} {'TE at cuDNN':>11s}")
    for key, (a, b) in sorted(by.items(), key=lambda kv: -len(kv[1][0])):
        print(f"{key:62s} {len(a):5d} {sum(a) / len(a):7.2%} {sum(b) / len(b):11.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
