"""Pipeline schedule as a timeline: who computes what, when, in one optimizer step.

========  ====================================================================
p         pipeline stages (pp); stage r is one pipeline rank
v         virtual stages (model chunks) per rank (vpp); chunk c of rank r is
          virtual stage j = c * p + r (Megatron-Core's interleaved placement)
m         micro-batches per step per pipeline
f_r, b_r  forward and backward compute of one micro-batch on rank r (all v chunks)
x_r, y_r  exposed communication inside that forward / backward (TP, CP, EP, FSDP)
t_p2p     one activation (or gradient) send between neighbouring stages
========  ====================================================================

Each rank runs its operations in Megatron-Core's order (``forward_backward_pipelining_
without_interleaving`` and ``..._with_interleaving``): a warm-up of forwards, then one
forward and one backward in turn (1F1B), then the cool-down backwards. The k-th forward of
a rank runs chunk ``(k // p) % v`` on micro-batch ``(k // (p v)) p + k % p``; backwards
walk the chunks in reverse. An operation starts when its rank is free and its input has
arrived: F(mb, j) needs F(mb, j - 1) plus t_p2p, B(mb, j) needs B(mb, j + 1) plus t_p2p
(the last virtual stage's backward needs only its own forward). Idle time on a rank is the
pipeline bubble; for equal stages (and no communication) the step takes
(m + p - 1)(f + b) with 1F1B and m (f + b) + (p - 1)(f + b) / v interleaved
(Narayanan et al. 2021, sec. 2.2).

``perfmodel.studies.timeline`` feeds this with the step model's per-stage times.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.spec.errors import InputError

PHASES = ("forward", "backward", "exposed comm", "optimizer + DP sync")
"""Values of the ``phase`` column, in drawing order."""
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


def rank_order(rank: int, p: int, v: int, m: int) -> list[tuple[str, int, int]]:
    """Megatron-Core's operation order on one rank: ("F" | "B", micro-batch, chunk)."""
    total = m * v
    if v == 1:
        warmup = min(p - rank - 1, m)
    elif m == p:
        warmup = total   # Megatron: with m == p, all forwards first
    else:
        warmup = min((p - rank - 1) * 2 + (v - 1) * p, total)

    def fwd(k):
        return ("F", (k // (p * v)) * p + k % p, (k // p) % v)

    def bwd(k):
        return ("B", (k // (p * v)) * p + k % p, v - 1 - (k // p) % v)

    order = [fwd(k) for k in range(warmup)]
    remaining = total - warmup
    for i in range(remaining):
        order += [fwd(warmup + i), bwd(i)]
    order += [bwd(k) for k in range(remaining, total)]
    return order


def _per_stage(name: str, values, p: int) -> tuple[float, ...]:
    if isinstance(values, (int, float)):
        values = [float(values)] * p
    values = tuple(float(x) for x in values)
    if len(values) != p:
        raise InputError(name, f"needs one value per stage: got {len(values)} for pp({p})")
    if any(x < 0 for x in values):
        raise InputError(name, "times must be non-negative")
    return values


def pipeline_timeline(pp: int, vpp: int, num_microbatches: int, fwd_s, bwd_s, fwd_comm_s=0.0,
                      bwd_comm_s=0.0, p2p_s: float = 0.0, tail_s: float = 0.0,
                      max_microbatches: int | None = MAX_MICROBATCHES_DRAWN) -> Timeline:
    """Simulate one step of (interleaved) 1F1B. Per-stage times are for one micro-batch
    through the whole stage (all of its v chunks); each chunk takes 1/v of them."""
    p, v, m_total = int(pp), int(vpp), int(num_microbatches)
    if p < 1 or v < 1 or m_total < 1:
        raise InputError("timeline", f"pp({pp}), vpp({vpp}) and num_microbatches({num_microbatches}) must be >= 1")
    if v > 1 and m_total % p:
        raise InputError("timeline", f"interleaved schedule needs micro-batches({m_total}) to be a multiple of pp({p})")
    m = m_total if max_microbatches is None else min(m_total, max(int(max_microbatches), 1))
    if v > 1:
        m = max(p, m - m % p)
    f, b = _per_stage("fwd_s", fwd_s, p), _per_stage("bwd_s", bwd_s, p)
    x, y = _per_stage("fwd_comm_s", fwd_comm_s, p), _per_stage("bwd_comm_s", bwd_comm_s, p)
    J = p * v
    orders = [rank_order(r, p, v, m) for r in range(p)]
    done: dict[tuple[str, int, int], float] = {}   # (op, mb, virtual stage) -> end time
    free = [0.0] * p
    nxt = [0] * p
    rows: list[dict] = []
    busy = 0.0
    remaining = sum(len(o) for o in orders)
    while remaining:
        progressed = False
        for r in range(p):
            while nxt[r] < len(orders[r]):
                op, mb, c = orders[r][nxt[r]]
                j = c * p + r
                if op == "F":
                    dep = None if j == 0 else ("F", mb, j - 1)
                else:
                    dep = ("F", mb, j) if j == J - 1 else ("B", mb, j + 1)
                if dep is not None and dep not in done:
                    break
                ready = 0.0 if dep is None else done[dep] + (p2p_s if dep[2] != j else 0.0)
                start = max(free[r], ready)
                work, comm = (f[r] / v, x[r] / v) if op == "F" else (b[r] / v, y[r] / v)
                phase = "forward" if op == "F" else "backward"
                rows.append(dict(stage=r, microbatch=mb, chunk=c, phase=phase, start_s=start, end_s=start + work))
                if comm > 0:
                    rows.append(dict(stage=r, microbatch=mb, chunk=c, phase="exposed comm",
                                     start_s=start + work, end_s=start + work + comm))
                end = start + work + comm
                busy += work + comm
                done[(op, mb, j)] = end
                free[r] = end
                nxt[r] += 1
                remaining -= 1
                progressed = True
        if not progressed:   # cannot happen for the orders above; guards against a bad edit
            raise InputError("timeline", "schedule deadlocked")
    if tail_s > 0:
        t0 = max(free)
        rows += [dict(stage=r, microbatch=-1, chunk=-1, phase=PHASES[3], start_s=t0, end_s=t0 + tail_s)
                 for r in range(p)]
    return Timeline(rows=tuple(rows), num_stages=p, num_microbatches_drawn=m,
                    num_microbatches_total=m_total, busy_s=busy)
