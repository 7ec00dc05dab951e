"""Pipeline schedule as a timeline: who computes what, when, in one optimizer step.

========  ====================================================================
p         pipeline stages (pp); stage r is one pipeline rank
v         model chunks per rank (vpp); under interleaving chunk c of rank r is virtual
          stage j = c * p + r (Megatron-Core's placement); other schedules place their
          stages as ``perfmodel.formulas.schedule_orders.Placement`` says
m         micro-batches per step per pipeline
f_r, b_r  forward and backward compute of one micro-batch on rank r (all its chunks)
w_r       the weight-gradient part of b_r (``perfmodel.formulas.compute.BlockTime.wgrad_s``)
x_r, y_r  exposed communication inside that forward / backward (TP, CP, EP, FSDP)
t_p2p     one activation (or gradient) send between neighbouring stages
========  ====================================================================

Each rank runs its operations in its schedule's order (``perfmodel.formulas.schedule_orders``:
Megatron-Core's 1F1B and interleaved orders, the zero-bubble and DualPipe orders). An operation
starts when its rank is free and its input has arrived: F(mb, j) needs F(mb, j - 1) plus t_p2p,
a backward of (mb, j) needs the input-gradient backward of (mb, j + 1) plus t_p2p (the last
virtual stage's backward needs only its own forward), a weight gradient its own input gradient
(t_p2p only across ranks). A split backward runs b_r - w_r, then w_r when the order says;
DualPipe's paired forward and backward run as one block of both their times. Idle time on a
rank is the pipeline bubble: for equal stages (and no communication) the step takes
(m + p - 1)(f + b) with 1F1B and m (f + b) + (p - 1)(f + b) / v interleaved (Narayanan et al.
2021, sec. 2.2), and every schedule's idle time within a rank's span equals its closed form
(``perfmodel.formulas.pipeline.bubble_closed_form_s``) where that form is exact.

``perfmodel.studies.views.timeline`` feeds this with the step model's per-stage times.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.formulas import pipeline
from perfmodel.formulas.schedule_orders import Placement, megatron_order, min_microbatches, rank_orders
from perfmodel.spec.errors import InputError

PHASES = ("forward", "backward", "exposed comm", "optimizer + DP sync", "weight gradient",
          "forward + backward (paired)")
"""Values of the ``phase`` column, in drawing order: "backward" is a whole backward or, where
the schedule splits it, its input-gradient part; "weight gradient" the rest."""
MAX_MICROBATCHES_DRAWN = 16
"""Default cap on micro-batches drawn; the steady state only repeats after the first few."""


@dataclass(frozen=True)
class Timeline:
    rows: tuple[dict, ...]
    """Long-form rows: stage, microbatch, chunk, phase, start_s, end_s."""
    num_stages: int
    num_microbatches_drawn: int
    num_microbatches_total: int
    busy_s: float
    """Sum over stages of the time spent in forward, backward and exposed communication."""

    @property
    def makespan_s(self) -> float:
        return max((r["end_s"] for r in self.rows), default=0.0)

    @property
    def bubble_frac(self) -> float:
        """Idle share of the stages' time before the step tail (optimizer, DP sync)."""
        end = max((r["end_s"] for r in self.rows if r["phase"] != PHASES[3]), default=0.0)
        return 0.0 if end <= 0 else 1.0 - self.busy_s / (self.num_stages * end)

    @property
    def bubble_s(self) -> float:
        """The most idle time of a rank between its first and its last operation: the bubble as
        the schedules' papers count it (a rank starts its step when its first input arrives;
        ``perfmodel.formulas.pipeline``). For 1F1B and interleaving, rank 0 spans the whole step."""
        spans: dict = {}
        for r in self.rows:
            if r["phase"] == PHASES[3]:
                continue
            lo, hi, busy = spans.get(r["stage"], (r["start_s"], r["end_s"], 0.0))
            spans[r["stage"]] = (min(lo, r["start_s"]), max(hi, r["end_s"]), busy + r["end_s"] - r["start_s"])
        return max((hi - lo - busy for lo, hi, busy in spans.values()), default=0.0)


def rank_order(rank: int, p: int, v: int, m: int) -> list[tuple[str, int, int]]:
    """Megatron-Core's operation order on one rank: ("F" | "B", micro-batch, chunk)."""
    return megatron_order(rank, p, v, m)


def _per_stage(name: str, values, p: int) -> tuple[float, ...]:
    if isinstance(values, (int, float)):
        values = [float(values)] * p
    values = tuple(float(x) for x in values)
    if len(values) != p:
        raise InputError(name, f"needs one value per stage: got {len(values)} for pp({p})")
    if any(x < 0 for x in values):
        raise InputError(name, "times must be non-negative")
    return values


def _microbatches(code: int, p: int, v: int, m_total: int, cap: int | None) -> int:
    """The micro-batches to draw: all, or ``cap`` of them, as many as the schedule needs."""
    need = min_microbatches(code, p) if p > 1 else 1
    if m_total < need:
        raise InputError("timeline", f"{pipeline.schedule_name(code)} needs at least {need} micro-batches for pp({p}); "
                                     f"got {m_total}")
    rec = pipeline.schedule_of(code)
    if rec.micro_batches_multiple_of_pp and m_total % p:
        raise InputError("timeline", f"{rec.name} schedule needs micro-batches({m_total}) to be a multiple of pp({p})")
    m = m_total if cap is None else min(m_total, max(int(cap), need))
    if rec.micro_batches_multiple_of_pp:
        m = max(p, m - m % p)
    if rec.bidirectional:
        m -= m % 2
    return m


def pipeline_timeline(pp: int, vpp: int, num_microbatches: int, fwd_s, bwd_s, fwd_comm_s=0.0,
                      bwd_comm_s=0.0, p2p_s: float = 0.0, tail_s: float = 0.0,
                      max_microbatches: int | None = MAX_MICROBATCHES_DRAWN, *, schedule: str | None = None,
                      wgrad_s=0.0) -> Timeline:
    """Simulate one step of a pipeline schedule (None: 1F1B, or interleaved when vpp > 1).
    Per-stage times are for one micro-batch through the whole rank (all of its chunks; each
    chunk takes 1/v of them); ``wgrad_s``: the weight-gradient part of ``bwd_s``, which the
    zero-bubble and DualPipe schedules run on its own."""
    p, v, m_total = int(pp), int(vpp), int(num_microbatches)
    if p < 1 or v < 1 or m_total < 1:
        raise InputError("timeline", f"pp({pp}), vpp({vpp}) and num_microbatches({num_microbatches}) must be >= 1")
    code = int(pipeline.default_schedule_code(v)) if schedule is None else pipeline.schedule_code(schedule)
    if p == 1:
        code = pipeline.ONE_F_ONE_B if v == 1 else code
    m = _microbatches(code, p, v, m_total, max_microbatches)
    f, b = _per_stage("fwd_s", fwd_s, p), _per_stage("bwd_s", bwd_s, p)
    x, y = _per_stage("fwd_comm_s", fwd_comm_s, p), _per_stage("bwd_comm_s", bwd_comm_s, p)
    w = _per_stage("wgrad_s", wgrad_s, p)
    if any(wi > bi for wi, bi in zip(w, b)):
        raise InputError("wgrad_s", "the weight-gradient part cannot exceed the backward")
    place = Placement(code, p, v, m)
    rows, busy = _simulate(rank_orders(code, p, v, m), place, (f, b, w, x, y), p2p_s)
    if tail_s > 0:
        t0 = max(r["end_s"] for r in rows)
        rows += [dict(stage=r, microbatch=-1, chunk=-1, phase=PHASES[3], start_s=t0, end_s=t0 + tail_s)
                 for r in range(p)]
    return Timeline(rows=tuple(rows), num_stages=p, num_microbatches_drawn=m,
                    num_microbatches_total=m_total, busy_s=busy)


def _simulate(orders: list[list[tuple]], place: Placement, times, p2p_s: float) -> tuple[list[dict], float]:
    """Run every rank's operations in order, each as soon as its rank is free and its input has
    arrived; returns the rows and the busy time."""
    f, b, w, x, y = times
    p, J, k = place.p, place.num_stages, place.chunks_per_rank
    done: dict[tuple, float] = {}          # ("F" | "I", mb, j) -> end time
    waiting: list[list[tuple[int, int]]] = [[] for _ in range(p)]   # weight gradients, oldest first
    free, nxt = [0.0] * p, [0] * p
    rows: list[dict] = []
    busy = 0.0

    def arrival(kind, mb, j, r):
        """When the input of (kind, mb, j) is ready on rank r, or None while it is not known."""
        if kind == "F":
            dep = None if j == 0 else ("F", mb, j - 1)
        else:
            dep = ("F", mb, j) if j == J - 1 else ("I", mb, j + 1)
        if dep is None:
            return 0.0
        if dep not in done:
            return None
        return done[dep] + (p2p_s if place.rank(mb, dep[2]) != r else 0.0)

    def bar(r, mb, j, phase, start, seconds):
        rows.append(dict(stage=r, microbatch=mb, chunk=place.chunk(mb, j), phase=phase, start_s=start,
                         end_s=start + seconds))
        return start + seconds

    def run(r, op, start):
        """Draw ``op`` from ``start``; returns its end."""
        if op[0] == "W":
            mb, j = waiting[r].pop(0)
            return bar(r, mb, j, PHASES[4], start, w[place.content(mb, j)] / k)
        if op[0] == "FB":
            (mf, jf), (mb, jb) = op[1], op[2]
            cf, cb = place.content(mf, jf), place.content(mb, jb)
            end = bar(r, mf, jf, PHASES[5], start, (f[cf] + b[cb]) / k)
            comm = (x[cf] + y[cb]) / k
            end = bar(r, mf, jf, PHASES[2], end, comm) if comm > 0 else end
            done[("F", mf, jf)] = done[("I", mb, jb)] = end
            return end
        kind, mb, j = op
        c = place.content(mb, j)
        if kind == "F":
            work, comm, phase = f[c] / k, x[c] / k, PHASES[0]
        else:
            work, comm, phase = (b[c] - (w[c] if kind == "I" else 0.0)) / k, y[c] / k, PHASES[1]
        end = bar(r, mb, j, phase, start, work)
        end = bar(r, mb, j, PHASES[2], end, comm) if comm > 0 else end
        done[("F" if kind == "F" else "I", mb, j)] = end
        if kind == "I":
            waiting[r].append((mb, j))
        return end

    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for r in range(p):
            while nxt[r] < len(orders[r]):
                op = orders[r][nxt[r]]
                if op[0] == "W":
                    ready = 0.0 if waiting[r] else None
                elif op[0] == "FB":
                    a, c = arrival("F", *op[1], r), arrival("B", *op[2], r)
                    ready = None if a is None or c is None else max(a, c)
                else:
                    ready = arrival(op[0], op[1], op[2], r)
                if ready is None:
                    break
                start = max(free[r], ready)
                free[r] = run(r, op, start)
                busy += free[r] - start
                nxt[r] += 1
                remaining -= 1
                progressed = True
        if not progressed:   # cannot happen for the orders of schedule_orders; guards against a bad edit
            raise InputError("timeline", "schedule deadlocked")
    return rows, busy
