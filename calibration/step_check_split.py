"""Split measured step checks into kernel classes and set each beside the model's time for it.

    python -m calibration.step_check_split calibration/results/<run>/step_check_<name> [...]

For each step-check directory (``python -m calibration step-check``: scenario.yaml,
measured.yaml, kernels.txt), the profiled GPU time of one step is summed by kernel name into
classes, and the model's per-operation times (``perfmodel.studies.views.roofline``, with the
project's profile for the hardware) are summed into the same classes:

===============  ==========================================  ==========================================
class            kernels (by name in kernels.txt)             model operations
===============  ==========================================  ==========================================
expert GEMMs     CUTLASS ``device_kernel`` (torch._grouped_mm) ``moe/expert_*``
other GEMMs      cuBLAS ``nvjet`` and ``gemm`` kernels        every other GEMM (projections, router, head)
attention        FlashAttention (``flash``)                   ``attention/core``
everything else  the rest                                     memory-bound operations and the optimizer
===============  ==========================================  ==========================================

The harness accumulates each micro-batch's bf16 gradients into the parameters' ``.grad`` by
autograd (one add over every parameter per micro-batch after the first), which Megatron-Core
fuses into the weight-gradient GEMM and the model does not charge; its time is estimated at the
model's memory rate and printed apart. A diagnostic: nothing here feeds the model.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

from perfmodel.engine.prediction import predict
from perfmodel.engine.rules import resolve
from perfmodel.formulas.compute import BYTES_PER_ELEMENT, memory_time_s
from perfmodel.spec.errors import InputError
from perfmodel.spec.profile import efficiencies_for
from perfmodel.spec.scenario import hardware_of, parse_scenario
from perfmodel.studies.views.roofline import roofline

CLASSES = ("expert GEMMs", "other GEMMs", "attention", "everything else")
ROW = re.compile(r"\s*(.+?)\s{2,}\S+%\s+\S+\s+\S+%\s+\S+\s+\S+\s+(\S+)\s+\S+%")
UNIT_MS = {"s": 1e3, "ms": 1.0, "us": 1e-3}


def _ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(s|ms|us)", text).groups()
    return float(value) * UNIT_MS[unit]


def kernel_class(name: str) -> str:
    if "flash" in name:
        return "attention"
    if "cutlass" in name:
        return "expert GEMMs"
    if "nvjet" in name or "gemm" in name.lower():
        return "other GEMMs"
    return "everything else"


def measured_ms(kernels_txt: str) -> tuple[dict, float]:
    """(class -> ms, profiled total ms) of one step's kernel table."""
    out = dict.fromkeys(CLASSES, 0.0)
    for line in kernels_txt.splitlines():
        m = ROW.match(line)
        if m and m.group(1) not in ("Name",):
            try:
                out[kernel_class(m.group(1))] += _ms(m.group(2))
            except AttributeError:
                continue
    total = _ms(re.search(r"Self CUDA time total: (\S+)", kernels_txt).group(1))
    listed = sum(out.values())
    out["everything else"] += total - listed      # kernels below the table's 40 longest
    return out, total


def model_ms(scenario: dict) -> tuple[dict, float, float]:
    """(class -> ms, predicted step ms, harness gradient accumulation ms) of one scenario."""
    sc = parse_scenario(scenario)
    eff = efficiencies_for(hardware_of(sc))[0]
    r = resolve(sc, eff)
    mbs = sc.global_batch_size // sc.micro_batch_size
    layers = r.job.model.num_layers
    out = dict.fromkeys(CLASSES, 0.0)
    for p in roofline(r).points:
        per_step = p["time_s"] * 1e3 * mbs * (layers if "layer" in p["group"] else 1)
        if p["kind"] == "attention":
            out["attention"] += per_step
        elif p["kind"] == "gemm":
            out["expert GEMMs" if p["op"].startswith("moe/expert") else "other GEMMs"] += per_step
        else:
            out["everything else"] += per_step
    pred = predict(sc, eff)
    out["everything else"] += (pred.breakdown_s["optimizer"] + pred.breakdown_s["overheads"]) * 1e3
    grad_bytes = (mbs - 1) * pred.model_params_total * 3 * BYTES_PER_ELEMENT["bf16"]
    accumulation = float(memory_time_s(grad_bytes, r.job.hardware, eff, kernels=0)) * 1e3
    return out, pred.step_time_s * 1e3, accumulation


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python -m calibration.step_check_split STEP_CHECK_DIR [...]", file=sys.stderr)
        return 2
    for d in map(Path, argv):
        try:
            scenario = yaml.safe_load((d / "scenario.yaml").read_text())
            step_ms = yaml.safe_load((d / "measured.yaml").read_text())["median_step_s"] * 1e3
            measured, profiled = measured_ms((d / "kernels.txt").read_text())
            model, predicted, accumulation = model_ms(scenario)
        except (OSError, KeyError, TypeError, AttributeError, InputError, yaml.YAMLError) as exc:
            print(f"{d}: not a step-check directory ({exc})", file=sys.stderr)
            return 2
        print(f"{d.name}: step {step_ms:.0f} ms measured, {predicted:.0f} predicted ({predicted / step_ms - 1:+.1%}); "
              f"profiled kernels {profiled:.0f} ms, idle {step_ms - profiled:.0f} ms")
        for c in CLASSES:
            print(f"  {c:16s} {measured[c]:7.1f} ms measured  {model[c]:7.1f} ms model")
        print(f"  (of the rest, the harness's bf16 gradient accumulation, not in the model: ~{accumulation:.0f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
