"""Each pipeline schedule as the order of operations on every rank, and where its stages sit.

An operation is a tuple:

==========================  ===============================================================
("F", mb, j)                forward of micro-batch mb through virtual stage j
("B", mb, j)                its whole backward (input and weight gradients)
("I", mb, j)                its input-gradient backward alone; the weight gradient waits in
                            the rank's queue (Qi et al. 2023 sec. 2: B and W)
("W",)                      the oldest weight gradient waiting on the rank
("FB", (mb, j), (mb2, j2))  a forward and another micro-batch's whole backward, overlapped
                            (DualPipe's paired chunks; DeepSeek-V3 report sec. 3.2.1)
==========================  ===============================================================

Virtual stages j = 0 .. J - 1 are the model's chunks in order; ``Placement`` says which rank
runs each and whose per-rank time it takes. The orders (rank r of p, m micro-batches):

- 1f1b, interleaved: Megatron-Core's (``forward_backward_pipelining_without_interleaving`` and
  ``..._with_interleaving``): p - r - 1 warm-up forwards (interleaved: 2(p - r - 1) + (v - 1)p),
  then one forward and one backward in turn, then the cool-down backwards; chunk c of rank r is
  stage c p + r.
- zb-h1: 1F1B's forwards and input gradients, with each weight gradient run r operations late,
  so the last ranks' weight gradients fill the cool-down (Qi et al. 2023 sec. 2.1, figure 3).
- zb-h2: 2(p - r) - 1 warm-up forwards, then input gradient, weight gradient, forward; the
  weight gradients run 2r late (ibid. sec. 2.2: the parallelogram).
- zb-v: two chunks per rank in a V (stage r and 2p - 1 - r): 2(p - r) - 1 forwards of chunk
  0, r pairs (chunk-1 forward, chunk-0 forward), p - r triples (chunk-1 forward, input and
  weight gradient), then (forward 0, I 0, W 0, forward 1, I 1, W 1) until every forward ran,
  then r pairs of input gradients, p - r pairs (I 0, W 0) and the waiting weight gradients
  (Qi et al. 2024; PyTorch ``ScheduleZBVZeroBubble``).
- dualpipe-v: the V with DualPipe's eight steps (github deepseek-ai/DualPipe, dualpipev.py):
  2(p - r - 1) forwards of chunk 0; r + 1 pairs (F0, F1); p - r - 1 triples (I1, W, F1);
  m - 2p + r + 1 pairs of overlapped chunks (F0 & B1, F1 & B0; the bottom rank runs its first
  F0 and B1 apart); p - r - 1 of (B1, F1 & B0); r + 1 of (B1, B0), the second half input
  gradients only; p - r - 1 of (W, I0); r + 1 weight gradients.
- dualpipe: the same steps on each half of the ranks (dualpipe.py), with h = min(r, p - 1 - r)
  in place of r, p / 2 for p and m / 2 micro-batches fed in from each end: rank r runs stage r
  of the micro-batches that enter at rank 0 and stage p - 1 - r of those that enter at rank
  p - 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from perfmodel.formulas import pipeline
from perfmodel.spec.errors import InputError


@dataclass(frozen=True)
class Placement:
    """Where a schedule's virtual stages run."""

    schedule: int
    p: int
    v: int
    m: int

    @property
    def record(self):
        """The schedule's record (``perfmodel.spec.schedules.Schedule``)."""
        return pipeline.schedule_of(self.schedule)

    @property
    def num_stages(self) -> int:
        """J: virtual stages of one micro-batch's path."""
        return self.p * self.v if not self.record.bidirectional else self.p

    def rank(self, mb: int, j: int) -> int:
        p = self.p
        if self.record.v_shaped:
            return j if j < p else 2 * p - 1 - j
        if self.record.bidirectional:
            return j if mb < self.m // 2 else p - 1 - j
        return j % p

    def chunk(self, mb: int, j: int) -> int:
        """The chunk of its rank that stage j is (DualPipe: 0 for the direction entering at rank
        0, 1 for the other)."""
        if self.record.v_shaped:
            return 0 if j < self.p else 1
        if self.record.bidirectional:
            return 0 if mb < self.m // 2 else 1
        return j // self.p

    def content(self, mb: int, j: int) -> int:
        """Whose per-rank time stage j takes: its rank's, except under DualPipe, where rank r
        also runs stage p - 1 - r, the work of rank p - 1 - r's stage."""
        return j if self.record.bidirectional else self.rank(mb, j)

    @property
    def chunks_per_rank(self) -> int:
        """The share of a rank's per-micro-batch time one operation takes: 1 / this."""
        return 1 if self.record.bidirectional else self.v


def min_microbatches(schedule: int, p: int) -> int:
    """The micro-batches a schedule's order needs (its record, as ``perfmodel.engine.rules``)."""
    return pipeline.schedule_of(schedule).min_micro_batches(p)


def megatron_order(rank: int, p: int, v: int, m: int) -> list[tuple[str, int, int]]:
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


def _zero_bubble_linear(r: int, p: int, m: int, warmup: int, lag: int, forward_first: bool) -> list[tuple]:
    """Forwards and input gradients in a 1F1B pattern after ``warmup`` forwards, each weight
    gradient run once more than ``lag`` of them wait (ZB-H1: warm-up p - r - 1, F before I,
    lag r; ZB-H2: warm-up 2(p - r) - 1, I before F, lag 2r)."""
    warm = min(warmup, m)
    out = [("F", k, r) for k in range(warm)]
    waiting = 0

    def grad(i):
        nonlocal waiting
        waiting += 1
        ops = [("I", i, r)]
        if waiting > lag:
            ops.append(("W",))
            waiting -= 1
        return ops

    for i in range(m - warm):
        out += [("F", warm + i, r)] + grad(i) if forward_first else grad(i) + [("F", warm + i, r)]
    for k in range(m - warm, m):
        out += grad(k)
    return out + [("W",)] * waiting


def _zb_v(r: int, p: int, m: int) -> list[tuple]:
    s0, s1 = r, 2 * p - 1 - r
    n = {"F0": 0, "F1": 0, "I0": 0, "I1": 0}

    def op(kind, chunk):
        key = f"{kind}{chunk}"
        n[key] += 1
        return (kind, n[key] - 1, s0 if chunk == 0 else s1)

    out = [op("F", 0) for _ in range(2 * (p - r) - 1)]
    for _ in range(r):
        out += [op("F", 1), op("F", 0)]
    for _ in range(p - r):
        out += [op("F", 1), op("I", 1), ("W",)]
    while n["F1"] < n["F0"] or n["F0"] < m:
        if n["F0"] < m:
            out.append(op("F", 0))
        out += [op("I", 0), ("W",), op("F", 1), op("I", 1), ("W",)]
    for _ in range(r):
        out += [op("I", 0), op("I", 1)]
    for _ in range(p - r):
        out += [op("I", 0), ("W",)]
    waiting = sum(o[0] == "I" for o in out) - sum(o[0] == "W" for o in out)
    return out + [("W",)] * waiting


def _dualpipe(r: int, p: int, m: int, v_shaped: bool) -> list[tuple]:
    """DualPipe's eight steps on rank r (phase 0 and 1 are the rank's two chunks)."""
    if v_shaped:
        h, half, mm = r, p, m
        stage = (r, 2 * p - 1 - r)
        first_mb = (0, 0)
        bottom = r == p - 1
    else:
        h, half, mm = min(r, p - 1 - r), p // 2, m // 2
        stage = (h, p - 1 - h)
        # phase 0 is the direction that enters at this rank's end of the pipeline
        first_mb = (0, m // 2) if r < p // 2 else (m // 2, 0)
        bottom = h == half - 1
    n = {"F0": 0, "F1": 0, "B0": 0, "B1": 0}

    def nxt(kind, ph):
        key = f"{kind}{ph}"
        n[key] += 1
        return (first_mb[ph] + n[key] - 1, stage[ph])

    def F(ph):
        return [("F", *nxt("F", ph))]

    def B(ph, input_only=False):
        return [("I" if input_only else "B", *nxt("B", ph))]

    def FB(pf, pb):
        return [("FB", nxt("F", pf), nxt("B", pb))]

    W = [("W",)]
    out = []
    for _ in range(2 * (half - h - 1)):
        out += F(0)
    for _ in range(h + 1):
        out += F(0) + F(1)
    for _ in range(half - h - 1):
        out += B(1, True) + W + F(1)
    for i in range(mm - 2 * half + h + 1):
        out += F(0) + B(1) if i == 0 and bottom else FB(0, 1)
        out += FB(1, 0)
    for _ in range(half - h - 1):
        out += B(1) + FB(1, 0)
    input_only = False
    for i in range(h + 1):   # the second half of these backwards leave their weight gradients
        if i == (h + 1) // 2 and h % 2 == 1:
            input_only = True
        out += B(1, input_only)
        if i == (h + 1) // 2 and h % 2 == 0:
            input_only = True
        out += B(0, input_only)
    for _ in range(half - h - 1):
        out += W + B(0, True)
    return out + W * (h + 1)


ORDERS = {
    "1f1b": lambda p, v, m: [[(op, mb, c * p + r) for op, mb, c in megatron_order(r, p, v, m)] for r in range(p)],
    "zb-h1": lambda p, v, m: [_zero_bubble_linear(r, p, m, p - r - 1, r, True) for r in range(p)],
    "zb-h2": lambda p, v, m: [_zero_bubble_linear(r, p, m, 2 * (p - r) - 1, 2 * r, False) for r in range(p)],
    "zb-v": lambda p, v, m: [_zb_v(r, p, m) for r in range(p)],
    "dualpipe": lambda p, v, m: [_dualpipe(r, p, m, False) for r in range(p)],
    "dualpipe-v": lambda p, v, m: [_dualpipe(r, p, m, True) for r in range(p)],
}
"""Each schedule's operation order, by name (the module's table): ``order(p, v, m)``, every
rank's operations."""
ORDERS["interleaved"] = ORDERS["1f1b"]


def rank_orders(schedule: int, p: int, v: int, m: int) -> list[list[tuple]]:
    """Every rank's operations, in the order it runs them (the module's table)."""
    name = pipeline.schedule_name(schedule)
    if name not in ORDERS:
        raise InputError("timeline", f"{name} has no operation order to draw (perfmodel.formulas.schedule_orders.ORDERS)")
    return ORDERS[name](p, v, m)
