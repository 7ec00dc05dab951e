"""The causes of a gap between measured and predicted runs, fitted and ranked.

Each cause is one lever of the step model (``perfmodel.studies.views.perturb``: a resource such as the
scale-out network or the host, or the pipeline bubble) running at a speed other than modelled.
For each lever the speed factor x that best explains everything measured is fitted, over all
runs at once, by least squares on

    step times      log(measured / predicted(x)) / sigma
    timers          (measured - predicted(x) of the terms the timer covers) / step / sigma
    utilisation     (measured - predicted(x) GPU busy fraction) / sigma

plus a prior (log x / tau)^2 that makes a large departure from the calibrated figure less likely,
and a plausibility term for a factor below what hardware and software can do (GEMMs off the
tensor cores, NVLink fallen back to PCIe, a loader slower than on-the-fly tokenising with no data
wait measured: ``plausibility_penalty``).
The causes are ranked by that score; a cause's weight is its relative likelihood
exp(-score / 2) among all causes and 'no cause' (the gap is the model's usual error). One step
time alone fits every lever exactly, so it ranks the levers by how little change each needs (its
elasticity); timers, GPU utilisation, the data loader's wait and a series of runs (GPU counts,
batch sizes, layouts) are what tell them apart. A cause names the term that absorbs the change,
that term's lens, its patterns, the next measurement that would confirm it and the usual action
(``perfmodel.studies.observed.symptoms``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from perfmodel.engine.evaluate import COMPONENTS
from perfmodel.spec.observed.measured import MeasuredRun
from perfmodel.studies.observed.symptoms import TERMS, term_lens
from perfmodel.studies.views.perturb import LEVERS, Evaluator, Speeds, gpu_idle_s

NOISE_FRAC = 0.04
"""sigma: how closely the model predicts one run relative to another of the same stack. The
median error of predicted speed-ups between published runs of one source, GPU and model is 3.8%
(docs/validation.md, 'What-if accuracy'); timers and utilisation are read to the same fraction of
the step."""
CALIBRATED_PRIOR_LOG_SD = math.log(2.0)
"""tau for a calibrated figure (peaks and kernel efficiencies, HBM, NVLink, NICs, latencies, the
pipeline schedule): half or twice its calibrated speed is one standard deviation away. The mean
signed error of tokens/s per GPU per published source spans -4% to +31% (docs/validation.md, 'By
source'), and single runs of early-release software miss by up to +170% (DeepSeek-V3 on GB200 in
the DGX Cloud recipes v25.05): a factor of 2 at one standard deviation covers whole stacks and
leaves such runs within reach."""
HOST_PRIOR_LOG_SD = math.log(4.0)
"""tau for the host's dispatch cost: the model's figure is a generic eager-PyTorch 10-20 us per
operation (REFERENCES.md 'Efficiency'), not a measurement of the user's training loop, which can
dispatch several times faster (C++ launch paths, CUDA graphs) or slower (Python-heavy code, a
contended CPU)."""
INPUT_PRIOR_LOG_SD = math.log(100.0)
"""tau for the data loader: the model's loader reads pre-tokenised ids from local NVMe
(``perfmodel.formulas.overheads``), the fastest a loader goes; tokenising or decoding on the fly
on a few CPU cores per GPU is one to three orders of magnitude slower, so one standard deviation
is 100x."""
PRIOR_LOG_SD = {"host_overhead": HOST_PRIOR_LOG_SD, "input_pipeline": INPUT_PRIOR_LOG_SD}
"""Per lever; every other lever has ``CALIBRATED_PRIOR_LOG_SD``."""
FACTOR_RANGE = {"input_pipeline": (1e-5, 1e5), "host_overhead": (1e-3, 1e3)}
"""Speed factors tried, per lever: a calibrated figure from 1/100 to 100 times its speed (the
ends sit 6.6 prior standard deviations out), the host's and the loader's further (a loader far
slower than local NVMe still shows)."""
CALIBRATED_RANGE = (1e-2, 1e2)
OFF_TENSOR_CORE_FRAC = 67.0 / 989.0
"""The slowest GEMMs plausibly run: on the CUDA cores instead of the tensor cores (a dtype or a
layout the tensor-core kernels do not take). NVIDIA H100 SXM datasheet: FP32 67 TFLOP/s against
BF16 tensor core 989 TFLOP/s dense (1,979 with sparsity), 0.068."""
PCIE_FALLBACK_FRAC = 64.0 / 450.0
"""The slowest scale-up plausibly runs: NVLink unused and peer traffic over PCIe Gen5 x16 (64 GB/s
per direction, PCI-SIG) instead of NVLink 4 (450 GB/s per direction, H100 SXM datasheet), 0.14."""
ON_THE_FLY_TOKENS_PER_S_PER_GPU = 50e6 / 4.0 / 8
"""The slowest text loader plausibly runs without a data wait showing: tokenising on the fly. Hugging
Face tokenizers tokenise 1 GB of text in under 20 s on a server CPU (huggingface/tokenizers README),
50 MB/s; at about 4 characters per token (OpenAI's tokenizer guide) 12.5 M tokens/s, shared by 8
GPUs per server: 1.6 M tokens/s per GPU."""
IMPLAUSIBLE_LOG_SD = math.log(2.0)
"""Beyond a lever's plausible floor the prior falls off this much faster: each halving past the
floor is another standard deviation, on top of the lever's own prior."""
PLAUSIBLE_FLOOR = {"peak_flops": OFF_TENSOR_CORE_FRAC, "scale_up_bandwidth": PCIE_FALLBACK_FRAC}
"""Lever -> the slowest speed factor hardware and software plausibly reach (the data loader's,
which depends on the modelled loader rate, is ``input_floor``). Levers not listed have none."""
GRID_POINTS_PER_DECADE = 2
"""Log-spaced factors tried (neighbours 3.2x apart), beside each run's exact fit, before refining
around the best: a lever that only binds far from its modelled speed (a loader hidden behind the
step) is found, and so is a narrow valley (a host just past keeping ahead of the GPU)."""
TIMER_TERMS = {
    "batch-generator": ("data_wait",),
    "all-grads-sync": ("dp_comm",), "grads-all-reduce": ("dp_comm",), "grads-reduce-scatter": ("dp_comm",),
    "params-all-gather": ("dp_comm",),
    "optimizer": ("optimizer",),
    "forward-compute": ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "fsdp_comm"),
    "backward-compute": ("compute", "recompute", "tp_comm", "cp_comm", "ep_comm", "fsdp_comm"),
    **{name: ("pp_comm", "pipeline_bubble") for name in (
        "forward-recv", "forward-send", "backward-recv", "backward-send", "forward-send-forward-recv",
        "forward-send-backward-recv", "backward-send-forward-recv", "backward-send-backward-recv",
        "forward-backward-send-forward-backward-recv")},
    **{term: (term,) for term in COMPONENTS},
}
"""Megatron-LM timers (``training_log``; per iteration, the slowest rank) and perfmodel's own
component names -> the terms of the step each one times. Megatron-LM's all-grads-sync times the
gradient reduce the backward left exposed; its pipeline send and receive timers include the wait
for the neighbouring stage, so they cover the bubble too. Timers of one set of terms are summed."""


@dataclass(frozen=True)
class RunData:
    """One run as the fit reads it."""

    id: str
    model: Evaluator
    """The run's resolved scenario, evaluated at any speeds."""
    measured: MeasuredRun
    step_s: float
    """Measured seconds per step."""
    basis: str
    """Which figure gave it (step time, tokens/s, ...)."""
    timer_groups: tuple[tuple[tuple[str, ...], float, str], ...]
    """(terms, measured seconds per step, the timers' names) per set of terms."""


def timer_groups(m: MeasuredRun) -> tuple:
    groups: dict = {}
    timers = dict(m.timers_s)
    if m.data_wait_s is not None and not any(TIMER_TERMS.get(k) == ("data_wait",) for k in timers):
        timers["data_wait"] = m.data_wait_s
    for name, seconds in timers.items():
        terms = TIMER_TERMS.get(name)
        if terms:
            total, names = groups.get(terms, (0.0, ()))
            groups[terms] = (total + seconds, (*names, name))
    return tuple((terms, total, "+".join(names)) for terms, (total, names) in groups.items())


def residuals(runs: list[RunData], s: Speeds) -> np.ndarray:
    """The scaled residuals of every observation of every run at the speeds ``s``."""
    out = []
    for run in runs:
        bd = run.model.breakdown(s)
        step = sum(bd.values())
        out.append(math.log(run.step_s / step) / NOISE_FRAC)
        for terms, seconds, _ in run.timer_groups:
            out.append((seconds - sum(bd[t] for t in terms)) / run.step_s / NOISE_FRAC)
        if run.measured.gpu_utilisation is not None:
            out.append((run.measured.gpu_utilisation - (1.0 - gpu_idle_s(bd) / step)) / NOISE_FRAC)
    return np.asarray(out)


@dataclass(frozen=True)
class Cause:
    lever: str
    """The mechanism (``perturb.LEVERS``)."""
    term: str
    """The step term that takes the change."""
    speed_factor: float
    """The lever's fitted speed relative to the model (0.5: half as fast as modelled)."""
    score: float
    weight: float
    """Relative likelihood among the causes and 'no cause' (they sum to 1)."""
    explained_frac: float
    """Share of the step-time misfit (sum of squares) this cause removes."""
    term_change_s: float
    """Seconds per step the term gains at the fitted speed (summed over the runs)."""
    evidence: tuple[str, ...]
    """What was fitted: 'step time', the timers' names, 'GPU utilisation', 'series of N runs'."""

    @property
    def lens(self) -> str:
        return term_lens(self.term)

    def to_dict(self) -> dict:
        advice = TERMS[self.term]
        return {"lever": self.lever, "term": self.term, "label": advice.label, "lens": self.lens,
                "patterns": list(advice.patterns), "measure_next": advice.measure_next, "action": advice.action,
                "speed_factor": self.speed_factor, "score": self.score, "weight": self.weight,
                "explained_frac": self.explained_frac, "term_change_s": self.term_change_s,
                "evidence": list(self.evidence)}


def input_floor(runs: list[RunData]) -> float | None:
    """The data loader's plausible floor as a speed factor: an on-the-fly tokeniser's rate over the
    modelled loader rate (at most 1); None where a data wait was measured (the measurement, not a
    prior, then says how slow the loader is)."""
    from perfmodel.formulas.overheads import input_s_per_token
    if any(r.measured.data_wait_s is not None or any(t == ("data_wait",) for t, _, _ in r.timer_groups) for r in runs):
        return None
    return min(min(ON_THE_FLY_TOKENS_PER_S_PER_GPU * input_s_per_token(r.model.resolved.job.input_pipeline)
                   for r in runs), 1.0)


def plausibility_penalty(runs: list[RunData], lever: str, log_x: float) -> float:
    """((log floor - log x) / ``IMPLAUSIBLE_LOG_SD``)^2 for a speed factor below the lever's
    plausible floor, else 0."""
    floor = input_floor(runs) if lever == "input_pipeline" else PLAUSIBLE_FLOOR.get(lever)
    if floor is None or log_x >= math.log(floor):
        return 0.0
    return ((math.log(floor) - log_x) / IMPLAUSIBLE_LOG_SD) ** 2


def _score(runs: list[RunData], lever: str, log_x: float) -> float:
    tau = PRIOR_LOG_SD.get(lever, CALIBRATED_PRIOR_LOG_SD)
    return (float(np.sum(residuals(runs, Speeds().times(lever, math.exp(log_x))) ** 2)) + (log_x / tau) ** 2
            + plausibility_penalty(runs, lever, log_x))


def _step_roots(runs: list[RunData], lever: str, lo: float, hi: float) -> list[float]:
    """For each run, the log speed of ``lever`` at which its predicted step equals the measured
    one, where one lies in [lo, hi]: the fit's valley sits near these, however narrow it is."""
    from scipy.optimize import brentq  # here, not at import: scipy.optimize costs a predict ~0.1-0.3 s

    out = []
    for run in runs:
        def gap(g, run=run):
            return math.log(run.model.step_s(Speeds().times(lever, math.exp(g))) / run.step_s)
        g_lo, g_hi = gap(lo), gap(hi)
        if g_lo * g_hi < 0:
            out.append(brentq(gap, lo, hi, xtol=1e-3))
    return out


def fit_lever(runs: list[RunData], lever: str) -> tuple[float, float] | None:
    """(fitted speed factor, score) of ``lever``, or None when no speed in its range changes any
    step (the lever is off the critical path however fast or slow it runs). The score is taken on
    a log-spaced grid and at each run's exact fit of its own step, then refined around the best."""
    from scipy.optimize import minimize_scalar  # here, not at import (see _step_roots)

    lo, hi = (math.log(v) for v in FACTOR_RANGE.get(lever, CALIBRATED_RANGE))
    ends = [tuple(run.model.step_s(Speeds().times(lever, math.exp(g))) for run in runs) for g in (lo, hi)]
    if ends[0] == ends[1]:
        return None
    grid = np.linspace(lo, hi, 1 + round(GRID_POINTS_PER_DECADE * (hi - lo) / math.log(10)))
    points = np.unique(np.concatenate([grid, _step_roots(runs, lever, lo, hi), [0.0]]))
    scores = [_score(runs, lever, g) for g in points]
    j = int(np.argmin(scores))
    bracket = points[max(j - 1, 0)], points[min(j + 1, len(points) - 1)]
    best = minimize_scalar(lambda g: _score(runs, lever, g), bounds=bracket, method="bounded",
                           options={"xatol": 1e-3})
    log_x, score = (best.x, best.fun) if best.fun <= scores[j] else (points[j], scores[j])
    return math.exp(log_x), float(score)


def _term_change(runs: list[RunData], lever: str, x: float) -> tuple[str, float]:
    """The term whose time moves most, in the direction of the lever's change, and by how much."""
    delta = dict.fromkeys(COMPONENTS, 0.0)
    for run in runs:
        before, after = run.model.breakdown(Speeds()), run.model.breakdown(Speeds().times(lever, x))
        for k in COMPONENTS:
            delta[k] += after[k] - before[k]
    sign = 1.0 if x < 1.0 else -1.0
    term = max(COMPONENTS, key=lambda k: sign * delta[k])
    named = "memory_bandwidth" if lever == "hbm_bandwidth" and term == "compute" else term
    return named, delta[term]


def evidence_of(runs: list[RunData]) -> tuple[str, ...]:
    out = ["step time" if len(runs) == 1 else f"series of {len(runs)} runs"]
    out += sorted({label for run in runs for _, _, label in run.timer_groups})
    if any(run.measured.gpu_utilisation is not None for run in runs):
        out.append("GPU utilisation")
    return tuple(out)


def rank_causes(runs: list[RunData]) -> tuple[tuple[Cause, ...], float]:
    """Every lever that explains the runs better than 'no cause' does, fitted and ranked (best
    first), and the weight of 'no cause': the gap is the model's usual error."""
    null = float(np.sum(residuals(runs, Speeds()) ** 2))
    null_steps = sum(math.log(r.step_s / r.model.step_s(Speeds())) ** 2 for r in runs)
    fits = []
    for lever in LEVERS:
        fitted = fit_lever(runs, lever)
        if fitted is not None and fitted[1] < null:    # a cause explains more than 'no cause'
            fits.append((lever, *fitted))
    scores = [null] + [score for _, _, score in fits]
    low = min(scores)
    likelihood = [math.exp(-(s - low) / 2.0) for s in scores]
    total = sum(likelihood)
    evidence = evidence_of(runs)
    causes = []
    for (lever, x, score), lk in zip(fits, likelihood[1:]):
        term, change = _term_change(runs, lever, x)
        steps = sum(math.log(r.step_s / r.model.step_s(Speeds().times(lever, x))) ** 2 for r in runs)
        explained = 1.0 - steps / null_steps if null_steps > 0 else 0.0
        causes.append(Cause(lever, term, x, score, lk / total, explained, change, evidence))
    causes.sort(key=lambda c: c.score)
    return tuple(causes), likelihood[0] / total
