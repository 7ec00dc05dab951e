"""When a layout does not fit (or cannot run): the smallest changes that make it fit, each with its
step time.

One change is one of the levers Korthikanti et al. 2022 and Rajbhandari et al. 2020 name for
memory, tried one at a time from the scenario as it is:

==================  ==========================================================================
recompute           selective, then full: activations kept shrink from 34 s b h / t per layer
                    towards 2 s b h (Korthikanti et al. 2022, table 2)
zero_stage          1, 2, 3: optimizer states, then gradients, then weights sharded over dp
                    (Rajbhandari et al. 2020)
tp                  x2, x4 within the scale-up domain: weights and activations split t ways
pp                  x2, x4: each stage holds 1/p of the layers (and p micro-batches in flight)
cp                  x2: activations split over the sequence
micro_batch_size    halved, down to 1: activations in proportion
num_gpus            x2, x4, x8 (the layout kept, dp grows): ZeRO shards over more ranks; where
                    tp x pp x cp does not divide the count, its nearest multiples too
==================  ==========================================================================

The fixes are the single changes that make the job run and fit, fastest first; when none does,
the pairs of changes of two different levers, then the triples (at most ``MAX_EVALUATIONS``
predictions in all). Each is evaluated by ``predict`` (the same numbers
as the Plan page), so a fix's step time is the prediction of the changed scenario.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

from perfmodel.engine.prediction import predict as _predict
from perfmodel.spec.cost import CostModel
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import InputError
from perfmodel.spec.scenario import Scenario, hardware_of, parse_scenario, scenario_to_dict

MAX_FIXES = 8
"""Fixes returned, fastest first (the page shows them all)."""
RECOMPUTE_ORDER = ("none", "selective", "full")
MAX_CHANGES = 3
"""Levers changed at once, at most."""
MAX_EVALUATIONS = 600
"""Predictions one call may make (about 2.5 ms each): the singles, pairs and triples of the 15 or
so single changes stay under it; the rest is not tried."""


@dataclass(frozen=True)
class Fix:
    """One or two changes to the scenario that make it run and fit, and what they give."""

    changes: tuple[tuple[str, object, object], ...]
    """(field, from, to) per change."""
    scenario: Scenario
    step_time_s: float
    memory_per_gpu_bytes: float
    tokens_per_s_per_gpu: float
    mfu: float

    def to_dict(self) -> dict:
        return {"changes": [{"field": f, "from": a, "to": b} for f, a, b in self.changes],
                "step_time_s": self.step_time_s, "memory_per_gpu_bytes": self.memory_per_gpu_bytes,
                "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu, "mfu": self.mfu,
                "num_gpus": self.scenario.num_gpus}


@dataclass(frozen=True)
class FitFixes:
    """Whether the scenario fits, why not, and the smallest changes that make it fit."""

    fits: bool
    reason: str
    """'' when it fits; else the memory against the usable HBM, or the rule it breaks."""
    memory_per_gpu_bytes: float | None
    usable_bytes: float
    fixes: tuple[Fix, ...]

    def to_dict(self) -> dict:
        return {"fits": self.fits, "reason": self.reason, "memory_per_gpu_bytes": self.memory_per_gpu_bytes,
                "usable_bytes": self.usable_bytes, "fixes": [f.to_dict() for f in self.fixes]}


def _gpu_counts(sc: Scenario) -> list[int]:
    """More GPUs (2x, 4x, 8x); where the layout does not divide the count, also the nearest
    multiples of tp x pp x cp below and above it."""
    p = sc.parallelism
    unit = p.tp * p.pp * p.cp
    near = [] if sc.num_gpus % unit == 0 else [n for n in (sc.num_gpus // unit * unit, -(-sc.num_gpus // unit) * unit)
                                               if n >= 1]
    return near + [sc.num_gpus * k for k in (2, 4, 8)]


def _levers(sc: Scenario) -> list[tuple[str, str, list]]:
    """(lever, field, values to try) from the scenario as it is."""
    p, hw = sc.parallelism, hardware_of(sc)
    domain = hw.scale_up.domain_size
    rc = RECOMPUTE_ORDER.index(sc.recompute)
    out = [("recompute", "recompute", list(RECOMPUTE_ORDER[rc + 1:])),
           ("zero_stage", "parallelism.zero_stage", list(range(p.zero_stage + 1, 4))),
           ("tp", "parallelism.tp", [p.tp * k for k in (2, 4) if p.tp * k <= domain]),
           ("pp", "parallelism.pp", [p.pp * k for k in (2, 4)]),
           ("cp", "parallelism.cp", [p.cp * 2]),
           ("micro_batch_size", "micro_batch_size", [m for m in (sc.micro_batch_size // 2, 1)
                                                     if 1 <= m < sc.micro_batch_size]),
           ("num_gpus", "num_gpus", _gpu_counts(sc))]
    return [(lever, field, list(dict.fromkeys(vals))) for lever, field, vals in out if vals]


def _get(d: dict, field: str):
    for part in field.split("."):
        d = d.get(part, {}) if isinstance(d, dict) else {}
    return d


def _with(base: dict, changes) -> dict:
    d = {**base, "parallelism": dict(base.get("parallelism", {}))}
    for field, _, value in changes:
        if field.startswith("parallelism."):
            d["parallelism"][field.split(".", 1)[1]] = value
        else:
            d[field] = value
    if any(f == "parallelism.pp" for f, _, _ in changes):
        d["parallelism"]["vpp"] = 1           # interleaving depends on the layers per stage: start plain
        d.setdefault("software", {})
        d["software"] = {k: v for k, v in d["software"].items() if k != "pipeline_layout"}
    return d


def _try(base: dict, changes, efficiency, cost_model) -> Fix | None:
    try:
        sc = parse_scenario(_with(base, changes))
        p = _predict(sc, efficiency or hardware_of(sc).efficiency, cost_model)
    except InputError:
        return None
    if not p.fits_in_memory:
        return None
    return Fix(tuple(changes), sc, p.step_time_s, p.memory_per_gpu_bytes, p.tokens_per_s_per_gpu, p.mfu)


def fit_fixes(scenario: Scenario, efficiency: Efficiencies | None = None, cost_model: CostModel | None = None,
              max_fixes: int = MAX_FIXES) -> FitFixes:
    """The scenario's memory fit and, when it does not fit or cannot run, the smallest changes
    (one lever, else two) that make it run and fit, fastest first."""
    usable = hardware_of(scenario).gpu.hbm_usable_bytes
    try:
        p = _predict(scenario, efficiency or hardware_of(scenario).efficiency, cost_model)
        if p.fits_in_memory:
            return FitFixes(True, "", p.memory_per_gpu_bytes, usable, ())
        reason, memory = "does not fit in memory", p.memory_per_gpu_bytes
    except InputError as exc:
        reason, memory = str(exc), None
    base = scenario_to_dict(scenario)
    singles = [((field, _get(base, field) if "." in field else base.get(field), v),)
               for _, field, vals in _levers(scenario) for v in vals]
    found, tried = [], 0
    for size in range(1, MAX_CHANGES + 1):
        for combo in combinations(singles, size):
            if len({c[0][0] for c in combo}) < size or tried >= MAX_EVALUATIONS:
                continue          # one value per lever
            tried += 1
            f = _try(base, [c[0] for c in combo], efficiency, cost_model)
            if f is not None:
                found.append(f)
        if found:
            break
    found.sort(key=lambda f: f.step_time_s)
    return FitFixes(False, reason, memory, usable, tuple(found[:max_fixes]))
