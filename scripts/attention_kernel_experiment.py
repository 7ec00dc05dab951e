"""Experiment, not adopted: Transformer Engine stacks' attention at the cuDNN kernel's curve.

    python scripts/attention_kernel_experiment.py

The profiles give every stack FlashAttention-2's measured curve (calibration/published.py,
MEASURED_RUNS). Transformer Engine stacks (megatron-core, nemo-perf, megatron-bridge-perf, and
maxtext with attention=cudnn_flash_te) run cuDNN's fused attention, which the suite times about
1.7x faster. This fits the cuDNN curve to the committed H100 suite runs, gives it to those
stacks' H100 cases alone (times the in-step clock ratio, like the flash curve), and prints the
validation error per source both ways. A diagnostic: nothing here feeds the model.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from calibration.fit import fit_efficiencies  # noqa: E402
from calibration.published import MEASURED_RUNS, RESULTS_DIR  # noqa: E402
from calibration.results import load_results  # noqa: E402
from perfmodel.engine.prediction import predict  # noqa: E402
from perfmodel.spec.hardware import load_hardware  # noqa: E402
from perfmodel.spec.profile import efficiencies_for  # noqa: E402
from perfmodel.spec.scenario import hardware_of, parse_scenario  # noqa: E402
from perfmodel.studies.validation import load_cases, measured_tps  # noqa: E402

TE_STACKS = {"megatron-core", "nemo-perf", "megatron-bridge-perf", "maxtext"}
H100_IDS = ("h100-sxm", "h100-sxm-hbm2e-500w")


def cudnn_attention():
    runs = [load_results(RESULTS_DIR / f) for f in MEASURED_RUNS["h100-sxm"].files]
    cal = fit_efficiencies(runs, load_hardware("h100-sxm"), attention_impl="sdpa-cudnn",
                           grouped_impl="torch.mm per expert")
    return cal.efficiencies.attention


def main() -> int:
    cudnn = cudnn_attention()
    print(f"cuDNN curve: forward {cudnn.fwd_efficiency_max:.3f} / s_half {cudnn.half_seq:.0f}, "
          f"backward {cudnn.bwd_efficiency_max:.3f} / {cudnn.backward_half_seq:.0f}")
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
            other = predict(sc, eff.model_copy(update={"attention": cudnn})).tokens_per_s_per_gpu / measured - 1
        for key in ("all H100 cases", case["source"].split(" — ")[0][:60]):
            by[key][0].append(abs(flash))
            by[key][1].append(abs(other))
    print(f"{'source':62s} {'cases':>5s} {'flash':>7s} {'TE at cuDNN':>11s}")
    for key, (a, b) in sorted(by.items(), key=lambda kv: -len(kv[1][0])):
        print(f"{key:62s} {len(a):5d} {sum(a) / len(a):7.2%} {sum(b) / len(b):11.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
