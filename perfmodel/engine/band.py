"""The error band of a prediction: how far the truth may lie from it, read from how far past
predictions lay from published runs.

=========  ==================================================================================
r          log(predicted / measured) tokens/s per GPU of one published run (its residual)
q_p        the p-quantile of r for runs like this one (same GPU generation, dense or MoE)
p10..p90   the band: a measured rate lies between predicted / e^{q_.9} and predicted / e^{q_.1}
           for 80% of such runs; step time, time to train and cost (each proportional to
           1 / rate) between predicted x e^{q_.1} and predicted x e^{q_.9}; p50 is the median
=========  ==================================================================================

The quantiles come from ``perfmodel/data/error_bands.yaml``, which ``perfmodel validate
perfmodel/data/published_runs.yaml --fit-bands perfmodel/data/error_bands.yaml`` derives from the
current model's residuals
(``perfmodel.studies.observed.bands`` says how, and measures the band's coverage on sources it was not
fitted on). The band is about the step model; the failure, start-up and price inputs are taken
as given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

import numpy as np

from perfmodel.engine.band_groups import poor_coverage_text
from perfmodel.engine.band_mixture import spread
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.paths import DATA_DIR

BAND_FILE = DATA_DIR / "error_bands.yaml"
BAND_FORMAT = "perfmodel-error-bands/1"
NOMINAL_LOW, NOMINAL_HIGH = 0.10, 0.90
"""The band users see: p10 to p90, a nominal 80% interval."""
ANY_GENERATION = "any"
"""The stratum of a GPU generation no published run is on: offsets of every generation."""

GPU_GENERATION = {
    "a100-sxm-40gb": "ampere", "a100-sxm-80gb": "ampere",
    "h100-sxm": "hopper", "h200-sxm": "hopper", "h800-sxm": "hopper",
    "b200": "blackwell", "b300": "blackwell", "gb200-nvl72": "blackwell", "gb300-nvl72": "blackwell",
    "mi300x": "cdna3", "mi355x": "cdna4",
}
"""GPU architecture of each catalogue GPU (a variant counts as its ``variant_of``): NVIDIA's A100
(Ampere), H100 (Hopper; H200 and H800 are the same GH100 die) and Blackwell architecture
whitepapers; AMD's CDNA 3 and CDNA 4 whitepapers. A GPU not listed (an inline spec of its own)
has generation ``any``."""


def generation_of(hw: HardwareSpec) -> str:
    return GPU_GENERATION.get(hw.reference_id, ANY_GENERATION)


def kind_of(model: ModelSpec) -> str:
    return "moe" if model.moe is not None else "dense"


DENSE_FFN_MULTIPLE = 4
"""d_ff = 4 d_model: the dense MLP width against which Krajewski et al. 2024 ("Scaling Laws for
Fine-Grained Mixture of Experts", arXiv 2402.07871, section 3) define granularity."""
FINE_GRAINED_MIN_GRANULARITY = 2
"""G = d_ff / d_expert at or above which an MoE counts as fine-grained: its experts are at most
half a standard expert, the segmentation DeepSeekMoE introduced (Dai et al. 2024, arXiv
2401.06066, section 3.1). Of the published runs: Grok-1 0.75 and Mixtral 1.14 are coarse; Llama 4
Maverick 2.5, GPT-OSS 4, Qwen3 10.7 and DeepSeek-V3 14 fine. Chosen as a round threshold between
the two groups, not tuned to residuals."""
FAMILIES = ("dense", "moe-coarse", "moe-fine")


def family_of(model: ModelSpec) -> str:
    """The model family the out-of-family band holds out: dense, coarse MoE or fine-grained MoE."""
    if model.moe is None:
        return "dense"
    granularity = DENSE_FFN_MULTIPLE * model.hidden_size / model.moe.expert_ffn_hidden_size
    return "moe-fine" if granularity >= FINE_GRAINED_MIN_GRANULARITY else "moe-coarse"


DEFAULT_STACK = "megatron-core"
"""A scenario that names no stack runs Megatron-Core's defaults (``perfmodel.spec.software``)."""
DIMENSIONS = ("stack", "family", "generation", "seq_length", "scale")
"""The ways a job can lie outside the validated runs, each fitted by holding its groups out.
Stack, family and generation are categories (outside: not among the runs); sequence length and GPU
count are ranges (outside: beyond the runs' smallest and largest)."""
CATEGORIES = ("stack", "family", "generation")
"""Dimensions whose random effect the band adds (``spread``): a new stack, family or generation sits
off the runs by a draw of N(0, tau_d^2), tau_d the spread of the held-out groups' offsets beyond what
the band already holds (``perfmodel.studies.observed.band_families``)."""
RANGES = ("seq_length", "scale")
"""Dimensions whose band is widened by a factor (``widen``): beyond a range there is one held-out
group on each side, which shows how much wider the error gets, not where a new group sits."""


@dataclass(frozen=True)
class Context:
    """Where a job sits among the validated runs."""

    stack: str
    family: str
    generation: str
    seq_length: int
    num_gpus: int


@dataclass(frozen=True)
class Validated:
    """What the published runs behind a band span."""

    stacks: frozenset
    families: frozenset
    generations: frozenset
    seq_length: tuple[int, int]
    num_gpus: tuple[int, int]


def novel_dimensions(ctx: Context, v: Validated) -> tuple[str, ...]:
    """The dimensions in which ``ctx`` lies outside ``v`` (a generation no run is on counts)."""
    out = {"stack": ctx.stack not in v.stacks, "family": ctx.family not in v.families,
           "generation": ctx.generation == ANY_GENERATION or ctx.generation not in v.generations,
           "seq_length": not v.seq_length[0] <= ctx.seq_length <= v.seq_length[1],
           "scale": not v.num_gpus[0] <= ctx.num_gpus <= v.num_gpus[1]}
    return tuple(d for d in DIMENSIONS if out[d])


DIMENSION_TEXT = {
    "stack": lambda c, v: f"stack {c.stack} (validated: {', '.join(sorted(v.stacks))})",
    "family": lambda c, v: f"model family {c.family} (validated: {', '.join(sorted(v.families))})",
    "generation": lambda c, v: f"GPU generation {c.generation} (validated: {', '.join(sorted(v.generations))})",
    "seq_length": lambda c, v: f"sequence length {c.seq_length} (validated {v.seq_length[0]}-{v.seq_length[1]})",
    "scale": lambda c, v: f"{c.num_gpus} GPUs (validated {v.num_gpus[0]}-{v.num_gpus[1]})",
}


def combined_widening(factors: dict | None, dims) -> float:
    """The factor for a job outside the runs' ranges in several dimensions (``RANGES``): each
    dimension's extra spread adds in quadrature, k = sqrt(1 + sum(k_d^2 - 1)) (independent errors
    add their variances). A dimension without a fitted factor adds nothing."""
    factors = factors or {}
    return math.sqrt(1.0 + sum(max(factors.get(d, 1.0), 1.0) ** 2 - 1.0 for d in dims if d in RANGES))


def category_spread(spreads: dict | None, dims) -> float:
    """tau of a job new in several categories: independent random effects add their variances,
    tau = sqrt(sum tau_d^2) over the categories in ``dims``."""
    spreads = spreads or {}
    return math.sqrt(sum(spreads.get(d, 0.0) ** 2 for d in dims if d in CATEGORIES))


def out_of_family(levels, log_ratio, dims, spreads: dict | None, factors: dict | None) -> tuple[float, ...]:
    """The band of a job outside the validated runs in ``dims``: the categories' random effects
    added (``spread``), then widened by the ranges' factor (``widen``)."""
    q = spread(levels, tuple(log_ratio), category_spread(spreads, dims))
    return widen(levels, q, combined_widening(factors, dims))


def widen(levels, log_ratio, k: float) -> tuple[float, ...]:
    """Quantiles k times as far from their median: q' = q_50 + k (q - q_50)."""
    q = np.asarray(log_ratio, dtype=float)
    mid = float(np.interp(0.5, levels, q))
    return tuple(float(x) for x in mid + k * (q - mid))


def _interp(x: float, xs, ys) -> float:
    return float(np.interp(x, xs, ys))


@dataclass(frozen=True)
class ErrorBand:
    """Quantiles of r = log(predicted / measured) for one stratum (a GPU generation, dense or MoE)."""

    stratum: str
    """``<generation>/<dense|moe>``: the runs the band was read from."""
    levels: tuple[float, ...]
    """Probability levels, ascending (0.05 to 0.95)."""
    log_ratio: tuple[float, ...]
    """The quantile of r at each level (non-decreasing)."""
    software_stacks: int
    """Published sources x GPU generations whose offsets the band spans."""
    held_out_coverage: float | None
    """Share of the stratum's published runs the p10-p90 band covered when fitted without their
    source (leave-one-source-out); None when the stratum has no runs."""
    widening: float = 1.0
    """This band's p10-p90 width over the stratum's: above 1 where the job lies outside the
    validated runs (``novel_dimensions``)."""
    note: str = ""
    """One line: the family the band comes from, and how the job lies outside the validated runs."""

    def quantile(self, level: float) -> float:
        """The ``level`` quantile of r (levels outside the stored range take its ends)."""
        return _interp(level, self.levels, self.log_ratio)

    def cdf(self, log_ratio: float) -> float:
        """P(r <= log_ratio), read between the stored levels and held at their ends (0.05, 0.95):
        the band does not claim to know its own tails."""
        r, lv = np.asarray(self.log_ratio), np.asarray(self.levels)
        if log_ratio < r[0]:
            return float(lv[0])
        if log_ratio >= r[-1]:
            return float(lv[-1])
        i = int(np.searchsorted(r, log_ratio, side="right"))   # r[i-1] <= x < r[i]
        span = r[i] - r[i - 1]
        return float(lv[i - 1] + (lv[i] - lv[i - 1]) * (log_ratio - r[i - 1]) / span) if span > 0 else float(lv[i])

    @cached_property
    def nominal(self) -> tuple[float, float, float]:
        """The quantiles of r at ``NOMINAL_LOW``, 0.5 and ``NOMINAL_HIGH`` (read once per band)."""
        return self.quantile(NOMINAL_LOW), self.quantile(0.5), self.quantile(NOMINAL_HIGH)

    def rate(self, predicted: float) -> dict:
        """{p10, p50, p90} of a rate (tokens/s per GPU) predicted as ``predicted``."""
        q_low, q_mid, q_high = self.nominal
        return {"p10": predicted * math.exp(-q_high), "p50": predicted * math.exp(-q_mid),
                "p90": predicted * math.exp(-q_low)}

    def duration(self, predicted: float) -> dict:
        """{p10, p50, p90} of a time or a cost (proportional to 1 / rate) predicted as ``predicted``."""
        q_low, q_mid, q_high = self.nominal
        return {"p10": predicted * math.exp(q_low), "p50": predicted * math.exp(q_mid),
                "p90": predicted * math.exp(q_high)}

    def probability_within(self, predicted: float, limit: float) -> float:
        """P(actual <= limit) for a time or cost predicted as ``predicted``: P(r <= log(limit /
        predicted)), held in [0.05, 0.95] (``cdf``)."""
        if not (predicted > 0 and limit > 0):
            raise InputError("limit", f"predicted ({predicted}) and limit ({limit}) must be > 0")
        return self.cdf(math.log(limit / predicted))

    def rank_of(self, predicted_rate: float, measured_rate: float) -> float:
        """Where a measured rate falls among the runs like this one: P(r <= log(predicted /
        measured)). Near 0.5 the measurement is as the model expects; beyond 0.9 (or below 0.1)
        it is slower (or faster) than 80% of the published runs of its stratum."""
        if not (predicted_rate > 0 and measured_rate > 0):
            raise InputError("measured_rate", f"rates must be > 0, got {predicted_rate} and {measured_rate}")
        return self.cdf(math.log(predicted_rate / measured_rate))

    def to_dict(self) -> dict:
        return {"stratum": self.stratum, "levels": list(self.levels), "log_ratio": list(self.log_ratio),
                "software_stacks": self.software_stacks, "held_out_coverage": self.held_out_coverage,
                "widening": self.widening, "note": self.note}


@dataclass(frozen=True, eq=False)
class BandTable:
    """Every stratum's band (``perfmodel/data/error_bands.yaml``); equal only to itself, so that it
    keys the bands worked out from it (``_band_in``)."""

    levels: tuple[float, ...]
    strata: dict
    """``<generation>/<kind>`` -> ErrorBand."""
    validated: Validated | None = None
    """What the published runs span (None in a table fitted before out-of-family bands)."""
    widening: dict | None = None
    """Range dimension -> factor fitted by holding its groups out (``perfmodel.studies.observed.band_families``)."""
    spreads: dict | None = None
    """Category dimension -> tau_d, the spread of a new group's offset
    (``perfmodel.studies.observed.band_families``)."""
    poor: dict | None = None
    """Dimension -> {group: (runs, nested held-out coverage of the 80% band)} for the groups the band
    covered poorly when they were held out whole (``POOR_COVERAGE``)."""

    def band(self, generation: str, kind: str) -> ErrorBand:
        """The stratum's band; a generation with no published runs takes the ``any`` stratum."""
        return self.strata.get(f"{generation}/{kind}") or self.strata[f"{ANY_GENERATION}/{kind}"]


def band_table_from_dict(data: dict) -> BandTable:
    """The band table of a parsed ``error_bands.yaml`` (a project file: its shape is checked,
    not trusted blindly)."""
    if not isinstance(data, dict) or data.get("format") != BAND_FORMAT:
        raise InputError("error_bands", f"expected format {BAND_FORMAT}")
    levels = tuple(float(x) for x in data["levels"])
    strata = {}
    for name, s in data["strata"].items():
        q = tuple(float(x) for x in s["log_ratio"])
        if len(q) != len(levels) or any(b < a for a, b in zip(q, q[1:])):
            raise InputError(f"error_bands.strata.{name}", "needs one non-decreasing quantile per level")
        strata[name] = ErrorBand(name, levels, q, int(s["software_stacks"]), s.get("held_out_coverage"))
    oof = data.get("out_of_family")
    if not isinstance(oof, dict):
        return BandTable(levels, strata)
    v = oof["validated"]
    validated = Validated(frozenset(v["stacks"]), frozenset(v["families"]), frozenset(v["generations"]),
                          tuple(int(x) for x in v["seq_length"]), tuple(int(x) for x in v["num_gpus"]))
    factors = {k: float(x) for k, x in oof["widening"].items()}
    if any(not (1.0 <= x < 100.0) for x in factors.values()):
        raise InputError("error_bands.out_of_family.widening", "factors must lie in [1, 100)")
    spreads = {k: float(x) for k, x in (oof.get("spread") or {}).items()}
    if any(not (0.0 <= x < 10.0) for x in spreads.values()):
        raise InputError("error_bands.out_of_family.spread", "spreads must lie in [0, 10)")
    poor = {d: {g: (int(c["runs"]), float(c["coverage"])) for g, c in groups.items()}
            for d, groups in (oof.get("poor_coverage") or {}).items()}
    return BandTable(levels, strata, validated, factors, spreads, poor)


@lru_cache(maxsize=1)
def band_table() -> BandTable | None:
    """The project's band table (read once); None before the first ``--fit-bands`` has written it
    (the fit itself predicts the published runs, and needs no band to do so)."""
    from perfmodel.spec.errors import read_data_file
    if not BAND_FILE.exists():
        return None
    return band_table_from_dict(read_data_file(BAND_FILE, "error_bands"))


def band_for(hw: HardwareSpec, model: ModelSpec) -> ErrorBand | None:
    """The error band of a job on ``hw`` training ``model`` (None without a band table)."""
    table = band_table()
    return None if table is None else table.band(generation_of(hw), kind_of(model))


def band_for_job(hw: HardwareSpec, model: ModelSpec, stack: str | None, seq_length: int, num_gpus: int) -> ErrorBand | None:
    """The error band of a job, widened where the job lies outside the validated runs, with its
    one-line note (None without a band table)."""
    table = band_table()
    if table is None:
        return None
    return _band_in(table, kind_of(model),
                    Context(stack or DEFAULT_STACK, family_of(model), generation_of(hw), seq_length, num_gpus))


JOB_BANDS = 256
"""Bands kept by ``_band_in``: a job's band depends on its GPU generation, model family, stack,
sequence and GPU count, not on its layout, so every layout of a job shares one."""


@lru_cache(maxsize=JOB_BANDS)
def _band_in(table: BandTable, kind: str, ctx: Context) -> ErrorBand:
    """``band_for_job`` from the table, the kind (dense or MoE) and where the job sits."""
    base = table.band(ctx.generation, kind)
    if table.validated is None:
        return replace(base, note=f"band from {base.stratum} runs ({ctx.family}); the band table predates "
                                  "out-of-family widening: refit with --fit-bands")
    dims = novel_dimensions(ctx, table.validated)
    q = out_of_family(base.levels, base.log_ratio, dims, table.spreads, table.widening)
    k = (_width(q, base.levels) / _width(base.log_ratio, base.levels)) if _width(base.log_ratio, base.levels) > 0 else 1.0
    if dims:
        why = "; ".join(DIMENSION_TEXT[d](ctx, table.validated) for d in dims)
        note = (f"band from {base.stratum} runs (model family {ctx.family}), {k:.2f}x as wide (held-out groups' "
                f"spread): outside the validated runs: {why}")
    else:
        note = (f"band from {base.stratum} runs (model family {ctx.family}, stack {ctx.stack}: both among the "
                "validated runs)")
    return replace(base, log_ratio=q, widening=k, note=note + poor_coverage_text(ctx, table.poor))


def _width(q, levels) -> float:
    return float(np.interp(NOMINAL_HIGH, levels, q) - np.interp(NOMINAL_LOW, levels, q))


def band_dict(band: ErrorBand, tokens_per_s_per_gpu: float, step_time_s: float, time_to_train_s: float | None,
              cost_usd: float | None) -> dict:
    """The prediction's ``band``: {figure: {p10, p50, p90}} for the figures it has."""
    out = {"tokens_per_s_per_gpu": band.rate(tokens_per_s_per_gpu), "step_time_s": band.duration(step_time_s)}
    if time_to_train_s is not None:
        out["time_to_train_s"] = band.duration(time_to_train_s)
    if cost_usd is not None:
        out["cost_usd"] = band.duration(cost_usd)
    return out


def profile_band_note(profile) -> str:
    """A line saying the efficiencies in force, other than the project's profiles (whose residuals
    the band is), have no residuals of their own ('' for ``"auto"``); ``profile`` as
    ``perfmodel.spec.profile.ProfileChoice``."""
    from pathlib import Path
    if profile == "auto":
        return ""
    if profile is None:
        return ("--profile none: the hardware spec's own efficiencies: no residuals of their own; the band is "
                "the project profiles' residuals")
    return (f"profile {Path(str(profile)).name}: no residuals of its own; the band is the project profiles' "
            "residuals (validate your runs with --profile to measure its own)")
