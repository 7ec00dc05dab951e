"""Scaling sweeps: the best layout at each GPU count, and where adding GPUs stops paying.

==========  ===========================================================================
N_i         GPU counts of the sweep, ascending; N_0 the smallest that runs
x_i         tokens/s per GPU of the best layout at N_i
E_i         parallel efficiency x_i / x_0 (1 at N_0; per-GPU throughput ratio)
T_i         ideal time to train = training_tokens / (N_i x_i)
g_i         goodput at N_i (``goodput.goodput_fraction``: checkpoints, rework, restarts)
W_i         time to solution T_i / g_i (the GPUs are held, and paid for, for W_i)
C_i         cost of N_i GPUs for W_i (``cost.job_cost``), energy likewise
M_i         marginal dollars per hour saved going from N_{i-1} to N_i:
            (C_i - C_{i-1}) / ((W_{i-1} - W_i) / 3600)   (``cost.marginal_usd_per_hour_saved``)
==========  ===========================================================================

Strong scaling keeps the global batch (counts where it does not split are skipped, with the
reason); weak scaling grows it in proportion to N (global_batch x N / scenario.num_gpus).
The knee is the first N_i where E_i falls below a threshold, or where M_i exceeds the user's
value of time. The verdict picks a count from the same numbers: the cheapest that meets a
deadline, or the one that minimises cost + value of time x W, or the largest above the
efficiency threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from perfmodel.formulas.cost import job_cost, marginal_usd_per_hour_saved
from perfmodel.formulas.counts import param_count
from perfmodel.formulas.goodput import checkpoint_state_bytes, goodput_fraction
from perfmodel.spec.cost import CostModel
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import InputError
from perfmodel.spec.limits import MAX_NUM_GPUS, MAX_SWEEP_POINTS
from perfmodel.spec.reliability import FailureModel
from perfmodel.spec.scenario import hardware_of, model_of
from perfmodel.spec.units import SECONDS_PER_DAY, SECONDS_PER_HOUR
from perfmodel.studies.search import Candidate, SearchOptions, search

Mode = Literal["strong", "weak"]
EFFICIENCY_THRESHOLD_DEFAULT = 0.8
"""A common rule of thumb for "scales well" (no single source; pass your own)."""


@dataclass(frozen=True)
class ScalingPoint:
    num_gpus: int
    global_batch_size: int
    candidate: Candidate | None
    """Best layout by the search objective; None when no layout runs and fits."""
    skipped_reason: str = ""
    tokens_per_s: float = float("nan")
    tokens_per_s_per_gpu: float = float("nan")
    parallel_efficiency: float = float("nan")
    ideal_time_s: float = float("nan")
    goodput_frac: float = float("nan")
    time_to_solution_s: float = float("nan")
    gpu_hours: float = float("nan")
    cost_usd: float = float("nan")
    energy_kwh: float = float("nan")
    marginal_usd_per_hour_saved: float | None = None
    """Versus the previous point that runs; None for the first."""

    @property
    def ok(self) -> bool:
        return self.candidate is not None

    def to_dict(self) -> dict:
        """The point's fields; a count where no layout runs has no speed, time or cost (None,
        not the NaN its fields hold, which JSON does not have)."""
        out = {k: getattr(self, k) for k in (
            "num_gpus", "global_batch_size", "skipped_reason", "tokens_per_s", "tokens_per_s_per_gpu",
            "parallel_efficiency", "ideal_time_s", "goodput_frac", "time_to_solution_s", "gpu_hours",
            "cost_usd", "energy_kwh", "marginal_usd_per_hour_saved")}
        if not self.ok:
            out.update({k: None for k in out if k not in ("num_gpus", "global_batch_size", "skipped_reason")})
        out["layout"] = self.candidate.layout() if self.candidate else None
        out["mfu"] = self.candidate.mfu if self.candidate else None
        out["bottleneck"] = self.candidate.bottleneck if self.candidate else None
        return out


KneeRule = Literal["efficiency", "no_faster", "value_of_time"]
VerdictRule = Literal["none_runs", "deadline_missed", "value_of_time", "cheapest_on_time", "efficiency"]


@dataclass(frozen=True)
class Knee:
    """Where adding GPUs stops paying: the count, the rule that fired, and the points it compared."""

    num_gpus: int | None
    rule: KneeRule | None
    """efficiency: parallel efficiency fell below the threshold; no_faster: more GPUs did not
    shorten the time to solution; value_of_time: an hour saved cost more than it is worth."""
    point: ScalingPoint | None
    previous: ScalingPoint | None
    efficiency_threshold: float
    value_of_time_usd_per_hour: float | None

    def to_dict(self) -> dict:
        return {"num_gpus": self.num_gpus, "rule": self.rule,
                "previous_num_gpus": self.previous.num_gpus if self.previous else None}


@dataclass(frozen=True)
class Verdict:
    """The recommended count, the rule that chose it, and the numbers behind it."""

    num_gpus: int | None
    rule: VerdictRule
    """none_runs: no count has a layout that runs and fits; deadline_missed: none meets the
    deadline (the fastest is given); value_of_time: the count minimising cost + value of time x
    time; cheapest_on_time: the cheapest that meets the deadline; efficiency: the largest count
    whose parallel efficiency stays above the threshold."""
    chosen: ScalingPoint | None
    next_point: ScalingPoint | None
    """The next larger count considered, for the reason to stop there."""
    marginal_usd_per_hour_saved: float | None
    """From the chosen count to the next, where that buys time (value-of-time rule)."""
    efficiency_threshold: float
    value_of_time_usd_per_hour: float | None
    deadline_s: float | None

    def to_dict(self) -> dict:
        return {"num_gpus": self.num_gpus, "rule": self.rule,
                "next_num_gpus": self.next_point.num_gpus if self.next_point else None,
                "marginal_usd_per_hour_saved": self.marginal_usd_per_hour_saved}


@dataclass(frozen=True)
class ScalingResult:
    mode: str
    points: tuple[ScalingPoint, ...]
    knee: Knee
    verdict: Verdict

    @property
    def knee_num_gpus(self) -> int | None:
        return self.knee.num_gpus

    def runnable(self) -> tuple[ScalingPoint, ...]:
        return tuple(p for p in self.points if p.ok)

    def to_dict(self) -> dict:
        return {"mode": self.mode, "points": [p.to_dict() for p in self.points],
                "knee": self.knee.to_dict(), "verdict": self.verdict.to_dict()}


def _batch_for(scenario, n: int, mode: str) -> tuple[int | None, str]:
    gbs = scenario.global_batch_size
    if mode == "strong":
        return gbs, ""
    grown = gbs * n
    if grown % scenario.num_gpus:
        return None, (f"weak scaling: global_batch_size({gbs}) * {n} / num_gpus({scenario.num_gpus}) "
                      f"= {grown / scenario.num_gpus:g} is not a whole number")
    return grown // scenario.num_gpus, ""


def scale_sweep(scenario, gpu_counts, mode: Mode = "strong", options: SearchOptions | None = None,
                cost_model: CostModel | None = None, failure_model: FailureModel | None = None, *,
                efficiency_threshold: float = EFFICIENCY_THRESHOLD_DEFAULT,
                value_of_time_usd_per_day: float | None = None, deadline_s: float | None = None,
                efficiency: Efficiencies | None = None,
                progress=None) -> ScalingResult:
    """Best layout, throughput, efficiency, time to solution and cost at each GPU count."""
    if mode not in ("strong", "weak"):
        raise InputError("mode", f"must be 'strong' or 'weak', got {mode!r}")
    counts = sorted(set(int(n) for n in gpu_counts))
    if not counts or counts[0] < 1 or counts[-1] > MAX_NUM_GPUS:
        raise InputError("gpus", f"give one or more GPU counts from 1 to {MAX_NUM_GPUS:,}")
    if len(counts) > MAX_SWEEP_POINTS:
        raise InputError("gpus", f"{len(counts)} GPU counts; at most {MAX_SWEEP_POINTS}")
    if not scenario.training_tokens:
        raise InputError("training_tokens", "a scaling sweep needs training_tokens (time to solution)")
    if not 0 < efficiency_threshold <= 1:
        raise InputError("efficiency_threshold", f"must be in (0, 1], got {efficiency_threshold}")
    for name, v in (("value_of_time", value_of_time_usd_per_day), ("deadline", deadline_s)):
        if v is not None and not v > 0:
            raise InputError(name, f"must be > 0, got {v}")
    options = (options or SearchOptions()).model_copy(update={"gpu_counts": None})
    cost_model, fm = cost_model or CostModel(), failure_model or FailureModel()
    m, hw = model_of(scenario), hardware_of(scenario)
    state_bytes = checkpoint_state_bytes(param_count(m).total)

    raw = []
    for k, n in enumerate(counts):
        gbs, why = _batch_for(scenario, n, mode)
        if gbs is None:
            raw.append(ScalingPoint(n, scenario.global_batch_size, None, why))
            continue
        sc = scenario.model_copy(update={"num_gpus": n, "global_batch_size": gbs})
        res = search(sc, options, cost_model, efficiency=efficiency, best_only=True)
        if progress is not None:
            progress(k + 1, len(counts))
        if res.best is None:
            raw.append(ScalingPoint(n, gbs, None, f"no layout runs and fits ({res.top_reason() or 'none enumerated'})"))
            continue
        raw.append(ScalingPoint(n, gbs, res.best))

    points, base, prev = [], None, None
    for p in raw:
        if not p.ok:
            points.append(p)
            continue
        c = p.candidate
        g = float(goodput_fraction(p.num_gpus, state_bytes, fm).fraction)
        ideal = scenario.training_tokens / c.tokens_per_s
        wall = ideal / g
        jc = job_cost(p.num_gpus, wall, hw, cost_model)
        base = base or c
        marginal = None
        if prev is not None:
            marginal = float(marginal_usd_per_hour_saved(prev.cost_usd, prev.time_to_solution_s, jc.cost_usd, wall))
            marginal = marginal if np.isfinite(marginal) else None   # equal times: no hour is saved
        prev = ScalingPoint(
            p.num_gpus, p.global_batch_size, c, tokens_per_s=c.tokens_per_s,
            tokens_per_s_per_gpu=c.tokens_per_s_per_gpu,
            parallel_efficiency=c.tokens_per_s_per_gpu / base.tokens_per_s_per_gpu, ideal_time_s=ideal,
            goodput_frac=g, time_to_solution_s=wall, gpu_hours=float(jc.gpu_hours), cost_usd=float(jc.cost_usd),
            energy_kwh=float(jc.energy_kwh), marginal_usd_per_hour_saved=marginal)
        points.append(prev)

    vot_per_hour = (None if value_of_time_usd_per_day is None
                    else value_of_time_usd_per_day * SECONDS_PER_HOUR / SECONDS_PER_DAY)
    return ScalingResult(mode=mode, points=tuple(points), knee=find_knee(points, efficiency_threshold, vot_per_hour),
                         verdict=recommend(points, efficiency_threshold, vot_per_hour, deadline_s))


def find_knee(points, efficiency_threshold: float, value_of_time_usd_per_hour: float | None = None) -> Knee:
    """First runnable count whose parallel efficiency is below the threshold or, given a
    value of time, whose marginal dollars per hour saved exceed it (or that saves no time)."""
    prev = None
    for p in (q for q in points if q.ok):
        if p.parallel_efficiency < efficiency_threshold:
            return Knee(p.num_gpus, "efficiency", p, prev, efficiency_threshold, value_of_time_usd_per_hour)
        if value_of_time_usd_per_hour is not None and prev is not None:
            if p.time_to_solution_s >= prev.time_to_solution_s:
                return Knee(p.num_gpus, "no_faster", p, prev, efficiency_threshold, value_of_time_usd_per_hour)
            mc = p.marginal_usd_per_hour_saved
            if mc is not None and mc > value_of_time_usd_per_hour:
                return Knee(p.num_gpus, "value_of_time", p, prev, efficiency_threshold, value_of_time_usd_per_hour)
        prev = p
    return Knee(None, None, None, None, efficiency_threshold, value_of_time_usd_per_hour)


def recommend(points, efficiency_threshold: float, value_of_time_usd_per_hour: float | None,
              deadline_s: float | None) -> Verdict:
    """A GPU count, the rule that chose it and the points behind it (``present.verdicts`` words it)."""
    def verdict(rule, chosen, nxt=None, marginal=None):
        return Verdict(None if chosen is None else chosen.num_gpus, rule, chosen, nxt, marginal,
                       efficiency_threshold, value_of_time_usd_per_hour, deadline_s)

    ok = [p for p in points if p.ok]
    if not ok:
        return verdict("none_runs", None)
    pool = ok
    if deadline_s is not None:
        pool = [p for p in ok if p.time_to_solution_s <= deadline_s]
        if not pool:
            return verdict("deadline_missed", min(ok, key=lambda p: p.time_to_solution_s))
    if value_of_time_usd_per_hour is not None:
        v = value_of_time_usd_per_hour / SECONDS_PER_HOUR
        best = min(pool, key=lambda p: (p.cost_usd + v * p.time_to_solution_s, p.num_gpus))
        larger = [p for p in pool if p.num_gpus > best.num_gpus]
        if not larger:
            return verdict("value_of_time", best)
        nxt = larger[0]
        mc = float(marginal_usd_per_hour_saved(best.cost_usd, best.time_to_solution_s, nxt.cost_usd,
                                               nxt.time_to_solution_s))
        return verdict("value_of_time", best, nxt, mc if np.isfinite(mc) and mc > 0 else None)
    if deadline_s is not None:
        return verdict("cheapest_on_time", min(pool, key=lambda p: (p.cost_usd, p.time_to_solution_s)))
    above = [p for p in ok if p.parallel_efficiency >= efficiency_threshold]
    best = above[-1] if above else ok[0]
    nxt = [p for p in ok if p.num_gpus > best.num_gpus]
    return verdict("efficiency", best, nxt[0] if nxt else None)
