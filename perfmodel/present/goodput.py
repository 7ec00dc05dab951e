"""The goodput waterfall in words: what each stage takes away, for the CLI and the app."""

from __future__ import annotations

STAGE_TEXT = {
    "peak": "peak (GPUs x dense peak of the precision)",
    "achieved": "achieved by the kernels (model FLOP/s while computing)",
    "after_bubble_and_communication": "after the pipeline bubble and exposed communication",
    "after_step_overheads": "after optimizer, host and data waits (MFU)",
    "after_failures_and_checkpoints": "after failures, restarts and checkpoints",
    "useful": "useful, after start-up (goodput)",
}
"""Each ``perfmodel.formulas.goodput.WATERFALL_STAGES`` stage, as a label."""
LOSS_TEXT = {
    "achieved": "kernel efficiency and recompute",
    "after_bubble_and_communication": "pipeline bubble and exposed communication",
    "after_step_overheads": "optimizer, host and data waits",
    "after_failures_and_checkpoints": "failures, restarts and checkpoints",
    "useful": "start-up (launch, compilation, warm-up)",
}
"""What the step from the stage before to each stage loses."""


def waterfall_rows(waterfall) -> list[dict]:
    """Long-form rows: stage, label, FLOP/s, share of peak, the fraction this stage keeps of the
    one before, and what it lost (FLOP/s) and to what."""
    peak = waterfall[0]["flop_per_s"]
    rows, before = [], None
    for s in waterfall:
        x = s["flop_per_s"]
        rows.append({"stage": s["stage"], "label": STAGE_TEXT.get(s["stage"], s["stage"]), "flop_per_s": x,
                     "of_peak": x / peak, "kept": 1.0 if before is None else x / before,
                     "lost_flop_per_s": 0.0 if before is None else before - x, "lost_to": LOSS_TEXT.get(s["stage"], "")})
        before = x
    return rows
