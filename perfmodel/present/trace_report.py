"""A profiler trace against the predicted step, in words (CLI text)."""

from __future__ import annotations

from perfmodel.present import fmt

CLASS_WORDS = {"gemm": "GEMM", "attention": "attention", "elementwise": "element-wise", "communication":
               "communication (exposed)", "idle": "idle (no kernel)", "step": "step"}


def trace_text(c) -> str:
    rows = [[CLASS_WORDS[r.kernel_class], fmt.seconds(r.measured_s), fmt.seconds(r.predicted_s),
             "-" if r.ratio is None else f"{r.ratio:.2f}x"] for r in c.rows]
    head = (f"Profiler trace: device {c.device}{f' ({c.device_name})' if c.device_name else ''}, {c.kernels:,} GPU "
            f"events, {c.steps} step{'s' if c.steps != 1 else ''}; seconds per step")
    return "\n".join([head, fmt.table(rows, header=["kernel class", "measured", "predicted", "measured / predicted"]),
                      f"communication kernels in all (hidden and exposed): {fmt.seconds(c.communication_total_s)} "
                      "per step"])
