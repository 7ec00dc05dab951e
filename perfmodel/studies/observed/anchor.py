"""Anchored what-ifs: fit the few stack-level factors that measured runs identify, then predict
a what-if with them.

A release of a software stack on a cluster sits at a common offset from the model (its kernels
reach more or less of peak, its collectives more or less of the links); between two runs of one
stack that offset cancels, which is why perfmodel's predicted ratios are closer than its absolute
figures (docs/validation.md, 'What-if accuracy'). Anchoring measures the offset on the user's own
runs and carries it to the what-if:

==================  =====================================================================================
factor              what it multiplies (``anchored_efficiency``)
==================  =====================================================================================
``compute``         every precision's GEMM ``efficiency_max`` and the attention kernels' maxima (both curves)
``communication``   the scale-up and scale-out bus efficiencies, and measured collective fits' busbw;
                    it divides their latencies (a collective runs that many times faster)
==================  =====================================================================================

The factors are the most probable ones (each with the log-normal prior of
``perfmodel.studies.observed.causes``: a factor of 2 is one standard deviation) that reproduce the runs'
step times. One run identifies one number, so the fit shares its gap between the factors in
proportion to how much the step depends on each: a compute-bound anchor moves ``compute``, one
bound by exposed communication (ZeRO-3 at 1,536 GPUs) moves ``communication``. Two or more runs
whose mix differs (GPU counts, layouts) tell the two apart. A factor may pass 1 on an efficiency: the stack
then does more per FLOP than the model counts (a FLOP convention, fused kernels).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from perfmodel.engine.evaluate import evaluate
from perfmodel.engine.prediction import Prediction
from perfmodel.engine.rules import Resolved
from perfmodel.spec import limits
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import InputError
from perfmodel.studies.observed.causes import CALIBRATED_PRIOR_LOG_SD

FACTORS = ("compute", "communication")
ANCHOR_NOISE_FRAC = 0.01
"""How closely a measured run pins its own step: steady steps of one job on one GPU spread by
0.4% (1.386 to 1.391 s over five steps of calibration/results/nvidia-h100-80gb-hbm3-2026-11-22/
step_check_llama3-8b_4l_s8192/measured.yaml); 1% leaves room for a cluster's noisier network."""
ANCHOR_MISS = 0.5
"""A fit that leaves a run more than e^0.5 - 1 = 65% off did not anchor it (the factors hit
``FACTOR_BOUNDS``): the run is refused, with the step it would predict."""
FACTOR_BOUNDS = (0.05, 20.0)
"""A factor outside these says the scenario, not the stack, is wrong (a layout or a model other
than the one that ran): the fit refuses it rather than carry it to a what-if."""


@dataclass(frozen=True)
class AnchorRun:
    id: str
    measured_step_time_s: float
    predicted_step_time_s: float
    """Before anchoring."""
    anchored_step_time_s: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Anchor:
    """Stack-level factors fitted to measured runs, and how well they reproduce them."""

    factors: dict
    """factor name -> multiplier (1: as modelled)."""
    fitted: tuple[str, ...]
    """The factors fitted, in ``FACTORS`` order."""
    runs: tuple[AnchorRun, ...]
    note: str = ""

    def to_dict(self) -> dict:
        return {"factors": dict(self.factors), "fitted": list(self.fitted), "runs": [r.to_dict() for r in self.runs],
                "note": self.note}


def anchored_efficiency(eff: Efficiencies, factors: dict) -> Efficiencies:
    """``eff`` with the anchor's factors applied (a copy; no field is validated against 1)."""
    c, n = factors.get("compute", 1.0), factors.get("communication", 1.0)

    def scaled(a):
        return None if a is None else a.model_copy(update={"fwd_efficiency_max": a.fwd_efficiency_max * c,
                                                           "bwd_efficiency_max": a.bwd_efficiency_max * c})
    return eff.model_copy(update={
        "gemm": {k: g.model_copy(update={"efficiency_max": g.efficiency_max * c}) for k, g in eff.gemm.items()},
        "attention": scaled(eff.attention), "attention_cudnn": scaled(eff.attention_cudnn),
        "scale_up_bus_efficiency": eff.scale_up_bus_efficiency * n,
        "scale_out_bus_efficiency": eff.scale_out_bus_efficiency * n,
        "scale_up_latency_s": eff.scale_up_latency_s / n, "scale_out_latency_s": eff.scale_out_latency_s / n,
        "collectives": tuple(f.model_copy(update={"busbw_bytes_per_s": f.busbw_bytes_per_s * n,
                                                  "latency_s": f.latency_s / n}) for f in eff.collectives)})


def anchored_step_s(r: Resolved, factors: dict) -> float:
    job = dataclasses.replace(r.job, efficiency=anchored_efficiency(r.job.efficiency, factors))
    return float(evaluate(job, r.layouts).step_time_s[0])


def fit_anchor(runs: list[tuple[str, Resolved, float]]) -> Anchor:
    """Factors fitted to ``runs`` (id, resolved scenario with the efficiencies in force, measured
    seconds per step): the most probable factors (log-normal priors, ``CALIBRATED_PRIOR_LOG_SD``)
    that reproduce the runs' step times to ``ANCHOR_NOISE_FRAC``. With one run that puts the gap
    on each factor in proportion to how much the step depends on it: a compute-bound anchor
    moves compute, one bound by exposed communication moves communication."""
    if not 0 < len(runs) <= limits.MAX_OBSERVED_RUNS:
        raise InputError("anchor", f"{len(runs):,} measured runs; anchor on 1 to {limits.MAX_OBSERVED_RUNS}")
    from scipy.optimize import least_squares  # here, not at import: scipy.optimize costs a predict 0.1-0.3 s

    def resid(log_f):
        fs = dict(zip(FACTORS, np.exp(log_f)))
        steps = [math.log(anchored_step_s(r, fs) / m) / ANCHOR_NOISE_FRAC for _, r, m in runs]
        return np.array(steps + list(log_f / CALIBRATED_PRIOR_LOG_SD))
    lo, hi = (math.log(b) for b in FACTOR_BOUNDS)
    sol = least_squares(resid, np.zeros(len(FACTORS)), bounds=([lo] * len(FACTORS), [hi] * len(FACTORS)),
                        xtol=1e-10, ftol=1e-10)
    factors = dict(zip(FACTORS, map(float, np.exp(sol.x))))
    out = tuple(AnchorRun(i, m, anchored_step_s(r, {}), anchored_step_s(r, factors)) for i, r, m in runs)
    worst = max(out, key=lambda a: abs(math.log(a.anchored_step_time_s / a.measured_step_time_s)))
    if abs(math.log(worst.anchored_step_time_s / worst.measured_step_time_s)) > ANCHOR_MISS:
        raise InputError(f"anchor.{worst.id}", f"no stack factors from {FACTOR_BOUNDS[0]:g} to {FACTOR_BOUNDS[1]:g} "
                                               f"reproduce the measured step ({worst.measured_step_time_s:.4g} s "
                                               f"against {worst.anchored_step_time_s:.4g} s); check the scenario's "
                                               "layout and model")
    note = ("one run: the gap is shared between the factors in proportion to how much its step depends on each"
            if len(runs) == 1 else f"{len(runs)} runs: least squares on log step time")
    return Anchor(factors=factors, fitted=FACTORS, runs=out, note=note)


@dataclass(frozen=True)
class AnchoredPrediction:
    """A what-if predicted with an anchor's factors, beside the plain prediction."""

    prediction: Prediction
    unanchored: Prediction
    anchor: Anchor
    band: dict
    """{tokens_per_s_per_gpu, step_time_s} -> {p10, p50, p90}: the anchored prediction spread by
    the published anchored what-ifs' error quantiles (``anchor_check``)."""
    band_source: str
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """``predict --anchor --format json``: the prediction's keys, and the anchor beside them."""
        u = self.unanchored
        return {**self.prediction.to_dict(), "anchored_band": {k: dict(v) for k, v in self.band.items()},
                "anchored_band_source": self.band_source, "anchor": self.anchor.to_dict(),
                "unanchored": {"step_time_s": u.step_time_s, "tokens_per_s_per_gpu": u.tokens_per_s_per_gpu,
                               "mfu": u.mfu}, "notes": list(self.notes)}


def anchored_band(p: Prediction, quantiles: dict) -> dict:
    """The band of an anchored prediction from quantiles of e = predicted / measured - 1: a
    measured tokens/s per GPU is predicted / (1 + e), a measured step predicted x (1 + e)."""
    e = {k: quantiles[k] for k in ("p10", "p50", "p90")}
    tps, step = p.tokens_per_s_per_gpu, p.step_time_s
    return {"tokens_per_s_per_gpu": {"p10": tps / (1 + e["p90"]), "p50": tps / (1 + e["p50"]),
                                     "p90": tps / (1 + e["p10"])},
            "step_time_s": {q: step * (1 + e[q]) for q in ("p10", "p50", "p90")}}
