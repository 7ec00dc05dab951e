"""The predicted step as a Chrome trace (``perfmodel trace SCENARIO -o step.json``), which Perfetto
(ui.perfetto.dev) and chrome://tracing open.

Format: Google's Trace Event Format (the JSON object form, ``traceEvents``): complete events
(``ph: "X"``) with ``ts`` and ``dur`` in microseconds, and metadata events (``ph: "M"``) naming each
process and thread. One process per pipeline rank (every rank of a data- or tensor-parallel group
runs the same timeline, so one stands for all), three threads (streams) per rank:

=========  ==================================================================================
thread     events
=========  ==================================================================================
compute    each forward and backward of a micro-batch (chunk), split into its ops in the
           proportions of their predicted times (``perfmodel.studies.views.trace_classes.op_shares``),
           and the pipeline bubble: the idle gaps between them
comm       the communication each forward and backward leaves exposed
tail       after the last backward: the data-parallel gradient sync left exposed, the optimizer
           step, and the host's exposed overheads and data wait, in the step model's proportions
=========  ==================================================================================

Each event's ``cat`` is its kernel class (gemm, attention, elementwise, communication, idle), the
classes ``perfmodel diagnose --trace`` compares a measured trace in. The schedule is
``perfmodel.studies.views.timeline``'s; micro-batches beyond ``MAX_TRACE_MICROBATCHES`` are not drawn
(the trace says how many were).
"""

from __future__ import annotations

from perfmodel.engine.evaluate import evaluate
from perfmodel.engine.rules import Resolved
from perfmodel.formulas.timeline import PHASES
from perfmodel.studies.views.timeline import scenario_timeline
from perfmodel.studies.views.trace_classes import op_shares

MAX_TRACE_MICROBATCHES = 256
"""Micro-batches drawn: past the warm-up every one repeats the steady state."""
MAX_OP_EVENTS = 200_000
"""Above this many op events the forward and backward blocks are written whole, unsplit."""
US_PER_S = 1e6
THREADS = {"compute": 1, "comm": 2, "tail": 3}
_PHASE_THREAD = {PHASES[0]: "compute", PHASES[1]: "compute", PHASES[4]: "compute", PHASES[5]: "compute",
                 PHASES[2]: "comm", PHASES[3]: "tail"}
_PHASE_CLASS = {PHASES[2]: "communication", PHASES[3]: "elementwise"}


def _event(name: str, cat: str, pid: int, thread: str, start_s: float, dur_s: float, args: dict) -> dict:
    return {"name": name, "cat": cat, "ph": "X", "pid": pid, "tid": THREADS[thread], "ts": start_s * US_PER_S,
            "dur": dur_s * US_PER_S, "args": args}


def _split(row: dict, shares, backward: bool) -> list[dict]:
    """A forward or backward block as its ops, back to back, in their predicted proportions."""
    out, t = [], row["start_s"]
    span = row["end_s"] - row["start_s"]
    for s in shares:
        frac = s.bwd_frac if backward else s.fwd_frac
        if frac <= 0:
            continue
        out.append(_event(f"{s.name} ({'bwd' if backward else 'fwd'})", s.kernel_class, row["stage"], "compute", t,
                          span * frac, {"microbatch": row["microbatch"], "chunk": row["chunk"]}))
        t += span * frac
    return out


TAIL_PARTS = (("data-parallel gradient sync", "communication", ("dp_comm",)),
              ("optimizer step", "elementwise", ("optimizer",)),
              ("host overheads and data wait", "idle", ("overheads", "data_wait")))
"""The step's tail as the timeline ends it (``perfmodel.studies.views.timeline._TAIL``), in its parts."""


def _tail(row: dict, breakdown: dict) -> list[dict]:
    """The tail block as its parts, back to back, in the step model's proportions."""
    seconds = [sum(breakdown[k] for k in keys) for _, _, keys in TAIL_PARTS]
    total, span = sum(seconds), row["end_s"] - row["start_s"]
    out, t = [], row["start_s"]
    for (name, cat, _), sec in zip(TAIL_PARTS, seconds):
        if sec > 0 and total > 0:
            out.append(_event(name, cat, row["stage"], "tail", t, span * sec / total, {}))
            t += span * sec / total
    return out


def _bubbles(rows) -> list[dict]:
    """Idle gaps on each rank's compute and comm streams before the tail, from 0 to its last op."""
    out = []
    for stage in sorted({r["stage"] for r in rows}):
        spans = sorted((r["start_s"], r["end_s"]) for r in rows if r["stage"] == stage and r["phase"] != PHASES[3])
        t = 0.0
        for start, end in spans:
            if start > t:
                name = "waiting for the first input" if t == 0.0 else "pipeline bubble"
                out.append(_event(name, "idle", stage, "compute", t, start - t, {}))
            t = max(t, end)
    return out


def chrome_trace(r: Resolved) -> dict:
    """The predicted step of a resolved scenario as a Trace Event Format object."""
    tl = scenario_timeline(r, MAX_TRACE_MICROBATCHES)
    shares = op_shares(r)
    breakdown = {k: float(v[0]) for k, v in evaluate(r.job, r.layouts).breakdown.items()}
    split = len(tl.rows) * len(shares) <= MAX_OP_EVENTS
    events = []
    for stage in range(tl.num_stages):
        events.append({"name": "process_name", "ph": "M", "pid": stage, "tid": 0,
                       "args": {"name": f"pipeline rank {stage}"}})
        events.append({"name": "process_sort_index", "ph": "M", "pid": stage, "tid": 0, "args": {"sort_index": stage}})
        for thread, tid in THREADS.items():
            events.append({"name": "thread_name", "ph": "M", "pid": stage, "tid": tid, "args": {"name": thread}})
    for row in tl.rows:
        phase = row["phase"]
        if split and phase in (PHASES[0], PHASES[1]):
            events += _split(row, shares, phase == PHASES[1])
            continue
        if phase == PHASES[3]:
            events += _tail(row, breakdown)
            continue
        events.append(_event(f"{phase} mb{row['microbatch']}", _PHASE_CLASS.get(phase, "gemm"), row["stage"],
                             _PHASE_THREAD[phase], row["start_s"], row["end_s"] - row["start_s"],
                             {"microbatch": row["microbatch"], "chunk": row["chunk"]}))
    events += _bubbles(tl.rows)
    sc = r.scenario
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"generator": "perfmodel trace", "scenario": sc.name, "hardware": r.job.hardware.id,
                          "num_gpus": sc.num_gpus, "microbatches_drawn": tl.num_microbatches_drawn,
                          "microbatches_total": tl.num_microbatches_total,
                          "note": "predicted, not measured: one process per pipeline rank"}}
