"""Scaling sweeps: the best layout at each GPU count, and where adding GPUs stops serving the purpose.

==========  ===========================================================================
N_i         GPU counts of the sweep, ascending (those where a layout runs and fits)
x_i         tokens/s per GPU of the best layout at N_i
f_i         share of the run's wall time spent training at N_i: failures, checkpoints and
            restarts, then start-up (``goodput.training_time_frac``, via ``predict``)
y_i         goodput-adjusted tokens/s per GPU, x_i f_i
E_i         parallel efficiency y_i / max_j y_j: against the best any count reaches, not
            against the smallest count of the sweep
W_i         time to solution = training_tokens / (N_i x_i f_i)
C_i         cost of N_i GPUs held for W_i (``cost.job_cost``), energy likewise
U_i         useful tokens per dollar, training_tokens / C_i (for one hardware and price,
            proportional to y_i, so U_i / max U = E_i)
M_i         marginal dollars per hour saved from N_{i-1} to N_i:
            (C_i - C_{i-1}) / ((W_{i-1} - W_i) / 3600)   (``cost.marginal_usd_per_hour_saved``)
V           the user's value of time, dollars per hour of wall time saved
==========  ===========================================================================

Strong scaling keeps the global batch (counts where it does not split are skipped, with the
reason); weak scaling grows it in proportion to N (global_batch x N / scenario.num_gpus); grow
doubles it each time N doubles past the scenario's count, never below the scenario's batch and
never past ``max_batch_tokens`` (``perfmodel.studies.search.batch.grown_batch``), as real runs grow it.

The knee is the first count past the best useful tokens per dollar where U_i falls below the
threshold times the best, where a count is no faster than the one before, or where M_i exceeds V.

The verdict (``recommend``) chooses from the same numbers. With a value of time it takes the count
that minimises C + V W (ties: fewer GPUs); for every slower count j, C_i + V W_i <= C_j + V W_j
means (C_i - C_j) / (W_j - W_i) <= V: no hour it saves over a smaller count costs more than V.
With a deadline it keeps the counts on time: the cheapest of them, or, with V too, the C + V W
choice when it is on time; when meeting the deadline costs more per hour saved than V, or no
count meets it, no count serves the purpose and the verdict says so. With neither, it takes the
largest count whose parallel efficiency stays at or above the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from perfmodel.engine.prediction import Prediction
from perfmodel.engine.prediction import predict as _predict
from perfmodel.formulas.cost import marginal_usd_per_hour_saved
from perfmodel.spec.cost import CostModel
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import InputError
from perfmodel.spec.limits import MAX_NUM_GPUS, MAX_SWEEP_POINTS
from perfmodel.spec.reliability import FailureModel
from perfmodel.spec.scenario import hardware_of
from perfmodel.spec.units import SECONDS_PER_DAY, SECONDS_PER_HOUR
from perfmodel.studies.search.batch import batch_rungs, grown_batch
from perfmodel.studies.search.search import Candidate, SearchOptions, search

Mode = Literal["strong", "weak", "grow"]
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
    training_time_frac: float = float("nan")
    """Share of the wall time spent training (failures, checkpoints, restarts, start-up take the rest)."""
    goodput_tokens_per_s_per_gpu: float = float("nan")
    """tokens_per_s_per_gpu x training_time_frac."""
    goodput_frac: float = float("nan")
    """Useful FLOP/s over the cluster's peak (``Prediction.goodput_frac``)."""
    parallel_efficiency: float = float("nan")
    """goodput_tokens_per_s_per_gpu over the best of the sweep."""
    ideal_time_s: float = float("nan")
    time_to_solution_s: float = float("nan")
    gpu_hours: float = float("nan")
    cost_usd: float = float("nan")
    energy_kwh: float = float("nan")
    useful_tokens_per_usd: float = float("nan")
    marginal_usd_per_hour_saved: float | None = None
    """Versus the previous point that runs; None for the first."""
    band: dict | None = None
    """The prediction's error band ({figure: {p10, p50, p90}}) for tokens/s per GPU, time and cost."""

    @property
    def ok(self) -> bool:
        return self.candidate is not None

    def to_dict(self) -> dict:
        """The point's fields; a count where no layout runs has no speed, time or cost (None,
        not the NaN its fields hold, which JSON does not have)."""
        out = {k: getattr(self, k) for k in (
            "num_gpus", "global_batch_size", "skipped_reason", "tokens_per_s", "tokens_per_s_per_gpu",
            "training_time_frac", "goodput_tokens_per_s_per_gpu", "goodput_frac", "parallel_efficiency",
            "ideal_time_s", "time_to_solution_s", "gpu_hours", "cost_usd", "energy_kwh", "useful_tokens_per_usd",
            "marginal_usd_per_hour_saved")}
        if not self.ok:
            out.update({k: None for k in out if k not in ("num_gpus", "global_batch_size", "skipped_reason")})
        out["band"] = self.band
        out["layout"] = self.candidate.layout() if self.candidate else None
        out["mfu"] = self.candidate.mfu if self.candidate else None
        out["bottleneck"] = self.candidate.bottleneck if self.candidate else None
        return out


KneeRule = Literal["tokens_per_usd", "no_faster", "value_of_time"]
VerdictRule = Literal["none_runs", "deadline_missed", "deadline_not_worth", "value_of_time", "cheapest_on_time",
                      "efficiency"]


@dataclass(frozen=True)
class Knee:
    """Where adding GPUs stops paying: the count, the rule that fired, and the points it compared."""

    num_gpus: int | None
    rule: KneeRule | None
    """tokens_per_usd: useful tokens per dollar fell below the threshold times the best of the
    sweep (``best``); no_faster: more GPUs did not shorten the time to solution; value_of_time:
    an hour saved cost more than it is worth."""
    point: ScalingPoint | None
    previous: ScalingPoint | None
    efficiency_threshold: float
    value_of_time_usd_per_hour: float | None
    best: ScalingPoint | None = None
    """The count with the most useful tokens per dollar."""

    def to_dict(self) -> dict:
        return {"num_gpus": self.num_gpus, "rule": self.rule,
                "previous_num_gpus": self.previous.num_gpus if self.previous else None,
                "best_num_gpus": self.best.num_gpus if self.best else None}


@dataclass(frozen=True)
class Verdict:
    """The recommended count (None when no count serves), the rule that chose it, and the numbers behind it."""

    num_gpus: int | None
    rule: VerdictRule
    """none_runs: no count has a layout that runs and fits; deadline_missed: none meets the deadline
    (``chosen`` is the fastest, not recommended); deadline_not_worth: the counts on time save hours
    at more than the value of time (``chosen`` is the cheapest on time, not recommended);
    value_of_time: the count minimising cost + value of time x time; cheapest_on_time: the
    cheapest that meets the deadline; efficiency: the largest count whose parallel efficiency
    stays at or above the threshold."""
    chosen: ScalingPoint | None
    next_point: ScalingPoint | None
    """The next count considered, for the reason to stop there: with a value of time the faster
    count that buys hours at the lowest price (else the next larger, no faster, count); with the
    efficiency rule the next larger count."""
    marginal_usd_per_hour_saved: float | None
    """From ``chosen`` to ``next_point`` (value-of-time rule: more than the value of time; None
    when ``next_point`` is no faster)."""
    efficiency_threshold: float
    value_of_time_usd_per_hour: float | None
    deadline_s: float | None
    previous_point: ScalingPoint | None = None
    """The smaller count whose hours ``chosen`` saves at the highest price (value-of-time rules)."""
    marginal_from_previous_usd_per_hour: float | None = None
    """What each hour ``chosen`` saves over ``previous_point`` costs: at most the value of time
    when ``chosen`` is recommended."""
    reference: ScalingPoint | None = None
    """The count with the best goodput-adjusted tokens/s per GPU (parallel efficiency 1)."""

    def to_dict(self) -> dict:
        return {"num_gpus": self.num_gpus, "rule": self.rule,
                "chosen_num_gpus": self.chosen.num_gpus if self.chosen else None,
                "next_num_gpus": self.next_point.num_gpus if self.next_point else None,
                "marginal_usd_per_hour_saved": self.marginal_usd_per_hour_saved,
                "previous_num_gpus": self.previous_point.num_gpus if self.previous_point else None,
                "marginal_from_previous_usd_per_hour": self.marginal_from_previous_usd_per_hour,
                "reference_num_gpus": self.reference.num_gpus if self.reference else None}


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


def _batch_for(scenario, n: int, mode: str, max_batch_tokens: float | None) -> tuple[int | None, str]:
    gbs = scenario.global_batch_size
    if mode == "strong":
        return gbs, ""
    if mode == "grow":
        return grown_batch(scenario, n, max_batch_tokens), ""
    grown = gbs * n
    if grown % scenario.num_gpus:
        return None, (f"weak scaling: global_batch_size({gbs}) * {n} / num_gpus({scenario.num_gpus}) "
                      f"= {grown / scenario.num_gpus:g} is not a whole number")
    return grown // scenario.num_gpus, ""


def scale_sweep(scenario, gpu_counts, mode: Mode = "strong", options: SearchOptions | None = None,
                cost_model: CostModel | None = None, failure_model: FailureModel | None = None, *,
                efficiency_threshold: float = EFFICIENCY_THRESHOLD_DEFAULT,
                value_of_time_usd_per_day: float | None = None, deadline_s: float | None = None,
                efficiency: Efficiencies | None = None, max_batch_tokens: float | None = None,
                progress=None) -> ScalingResult:
    """Best layout, throughput, efficiency, time to solution and cost at each GPU count
    (``max_batch_tokens``: the batch limit of ``mode="grow"``)."""
    if mode not in ("strong", "weak", "grow"):
        raise InputError("mode", f"must be 'strong', 'weak' or 'grow', got {mode!r}")
    if mode == "grow" and max_batch_tokens is None:
        raise InputError("max_batch_tokens", "mode 'grow' needs a batch limit in tokens")
    if mode == "grow":
        batch_rungs(scenario, max_batch_tokens)     # the limit's bound, checked before any search
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
    if failure_model is not None:
        scenario = scenario.model_copy(update={"reliability": failure_model})
    cost_model = cost_model or scenario.cost

    raw = []
    for k, n in enumerate(counts):
        gbs, why = _batch_for(scenario, n, mode, max_batch_tokens)
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
        best = res.best.scenario
        raw.append((n, gbs, res.best, _predict(best, efficiency or hardware_of(best).efficiency, cost_model)))

    runs = [r for r in raw if isinstance(r, tuple)]
    best_goodput = max((p.tokens_per_s_per_gpu * p.training_time_frac for *_, p in runs), default=1.0)
    points, prev = [], None
    for r in raw:
        if not isinstance(r, tuple):
            points.append(r)
            continue
        points.append(prev := _point(*r, scenario.training_tokens, best_goodput, prev))

    vot_per_hour = (None if value_of_time_usd_per_day is None
                    else value_of_time_usd_per_day * SECONDS_PER_HOUR / SECONDS_PER_DAY)
    return ScalingResult(mode=mode, points=tuple(points), knee=find_knee(points, efficiency_threshold, vot_per_hour),
                         verdict=recommend(points, efficiency_threshold, vot_per_hour, deadline_s))


def _point(n: int, gbs: int, c: Candidate, p: Prediction, tokens: float, best_goodput: float,
           prev: ScalingPoint | None) -> ScalingPoint:
    """A runnable point: its figures are its prediction's (the same as its search candidate's)."""
    wall = p.time_to_train_s
    goodput_per_gpu = p.tokens_per_s_per_gpu * p.training_time_frac
    marginal = None
    if prev is not None:
        marginal = float(marginal_usd_per_hour_saved(prev.cost_usd, prev.time_to_solution_s, p.cost_usd, wall))
        marginal = marginal if np.isfinite(marginal) else None   # equal times: no hour is saved
    return ScalingPoint(
        n, gbs, c, tokens_per_s=p.tokens_per_s, tokens_per_s_per_gpu=p.tokens_per_s_per_gpu,
        training_time_frac=p.training_time_frac, goodput_tokens_per_s_per_gpu=goodput_per_gpu,
        goodput_frac=p.goodput_frac, parallel_efficiency=goodput_per_gpu / best_goodput,
        ideal_time_s=tokens / p.tokens_per_s, time_to_solution_s=wall, gpu_hours=p.gpu_hours,
        cost_usd=p.cost_usd, energy_kwh=p.energy_kwh, useful_tokens_per_usd=tokens / p.cost_usd,
        marginal_usd_per_hour_saved=marginal, band=p.band)


def find_knee(points, efficiency_threshold: float, value_of_time_usd_per_hour: float | None = None) -> Knee:
    """First runnable count past the best useful tokens per dollar whose useful tokens per dollar
    fall below the threshold times the best, that is no faster than the count before it, or, given
    a value of time, whose marginal dollars per hour saved exceed it."""
    ok = [q for q in points if q.ok]
    best = max(ok, key=lambda q: q.useful_tokens_per_usd, default=None)

    def knee(rule, p, prev):
        return Knee(p.num_gpus, rule, p, prev, efficiency_threshold, value_of_time_usd_per_hour, best)

    prev = None
    for p in ok:
        if prev is not None and p.num_gpus > best.num_gpus:
            if p.useful_tokens_per_usd < efficiency_threshold * best.useful_tokens_per_usd:
                return knee("tokens_per_usd", p, prev)
            if p.time_to_solution_s >= prev.time_to_solution_s:
                return knee("no_faster", p, prev)
        if value_of_time_usd_per_hour is not None and prev is not None:
            mc = p.marginal_usd_per_hour_saved
            if mc is not None and mc > value_of_time_usd_per_hour:
                return knee("value_of_time", p, prev)
        prev = p
    return Knee(None, None, None, None, efficiency_threshold, value_of_time_usd_per_hour, best)


def _marginal(a: ScalingPoint, b: ScalingPoint) -> float:
    """Dollars per hour of wall time saved going from ``a`` to the faster ``b``."""
    return float(marginal_usd_per_hour_saved(a.cost_usd, a.time_to_solution_s, b.cost_usd, b.time_to_solution_s))


def _dearest_hour(p: ScalingPoint, ok) -> tuple[ScalingPoint | None, float | None]:
    """The slower count over which ``p``'s saved hours cost the most, and that price."""
    slower = [q for q in ok if q.time_to_solution_s > p.time_to_solution_s]
    if not slower:
        return None, None
    q = max(slower, key=lambda q: (_marginal(q, p), -q.num_gpus))
    return q, _marginal(q, p)


def _cheapest_hour(p: ScalingPoint, pool) -> tuple[ScalingPoint | None, float | None]:
    """The faster count that buys hours over ``p`` at the lowest price, and that price."""
    faster = [q for q in pool if q.time_to_solution_s < p.time_to_solution_s]
    if not faster:
        return None, None
    q = min(faster, key=lambda q: (_marginal(p, q), q.num_gpus))
    return q, _marginal(p, q)


def recommend(points, efficiency_threshold: float, value_of_time_usd_per_hour: float | None,
              deadline_s: float | None) -> Verdict:
    """A GPU count (or none that serves), the rule that chose it and the points behind it
    (``present.verdicts`` words it)."""
    ok = [p for p in points if p.ok]
    reference = max(ok, key=lambda p: (p.goodput_tokens_per_s_per_gpu, -p.num_gpus), default=None)

    def verdict(rule, chosen, nxt=None, marginal=None, recommended=True, prev=None, prev_marginal=None):
        return Verdict(chosen.num_gpus if chosen is not None and recommended else None, rule, chosen, nxt, marginal,
                       efficiency_threshold, value_of_time_usd_per_hour, deadline_s, prev, prev_marginal, reference)

    if not ok:
        return verdict("none_runs", None)
    on_time = ok if deadline_s is None else [p for p in ok if p.time_to_solution_s <= deadline_s]
    if not on_time:
        return verdict("deadline_missed", min(ok, key=lambda p: (p.time_to_solution_s, p.num_gpus)),
                       recommended=False)
    v = value_of_time_usd_per_hour
    if v is not None:
        per_s = v / SECONDS_PER_HOUR
        best = min(on_time, key=lambda p: (p.cost_usd + per_s * p.time_to_solution_s, p.num_gpus))
        prev, prev_marginal = _dearest_hour(best, ok)
        if prev_marginal is not None and prev_marginal > v:
            return verdict("deadline_not_worth", best, recommended=False, prev=prev, prev_marginal=prev_marginal)
        nxt, marginal = _cheapest_hour(best, on_time)
        if nxt is None:    # no count on time is faster: name the next larger one, which is not
            nxt = next((p for p in ok if p.num_gpus > best.num_gpus), None)
        return verdict("value_of_time", best, nxt, marginal, prev=prev, prev_marginal=prev_marginal)
    if deadline_s is not None:
        return verdict("cheapest_on_time", min(on_time, key=lambda p: (p.cost_usd, p.time_to_solution_s)))
    above = [p for p in ok if p.parallel_efficiency >= efficiency_threshold]
    best = above[-1]     # the reference has efficiency 1, so ``above`` is never empty
    nxt = [p for p in ok if p.num_gpus > best.num_gpus]
    return verdict("efficiency", best, nxt[0] if nxt else None)
