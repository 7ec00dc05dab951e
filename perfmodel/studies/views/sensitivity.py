"""Which resource the step time depends on: what twice as much of each would buy.

For each resource r (``perfmodel.studies.views.perturb.RESOURCES``) the job is evaluated again with r
twice as fast and nothing else changed:

    gain_r       = 1 - t(2r) / t                  (the share of the step 2x of r removes)
    elasticity_r = log2(t / t(2r))                (1: the step is all r; 0: r is off the critical path)

A resource that is not on the critical path (traffic hidden behind compute, a host that keeps
ahead of the GPU, a loader faster than the step, a fabric the job does not use) has elasticity 0
exactly: the step is the same number. The bottleneck is the resource of the largest elasticity,
and ``path`` shows how it moves when that resource is doubled, then the next, and so on
(LENSES.md pattern 1: bottlenecks move, they do not vanish).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from perfmodel.engine.rules import Resolved
from perfmodel.spec.errors import InputError
from perfmodel.studies.views.perturb import RESOURCES, Evaluator, Speeds

SPEEDUP = 2.0
"""'What 2x of each would buy' (issue 34): the speed-up applied to one resource at a time."""
PATH_STEPS_DEFAULT = 4
"""Steps of the bottleneck path by default: compute, then what compute exposes, and two more."""
MAX_PATH_STEPS = 16
"""Each step of the path evaluates the job once per resource; 16 doublings is 65,536x."""
RESOURCE_LENS = {
    "peak_flops": "co-design", "hbm_bandwidth": "co-design", "scale_up_bandwidth": "scale serves purpose",
    "scale_out_bandwidth": "scale serves purpose", "latency": "amortisation", "host_overhead": "amortisation",
    "input_pipeline": "balanced pipeline",
}
"""The lens (/work/shared/LENSES.md) that explains a step bound by each resource."""


@dataclass(frozen=True)
class ResourceEffect:
    resource: str
    step_time_s: float
    """The step with this resource ``SPEEDUP`` times faster."""
    gain_frac: float
    elasticity: float

    def to_dict(self) -> dict:
        return {"resource": self.resource, "lens": RESOURCE_LENS[self.resource], "step_time_s": self.step_time_s,
                "gain_frac": self.gain_frac, "elasticity": self.elasticity}


@dataclass(frozen=True)
class PathStep:
    """One step of the bottleneck path: the speeds so far, the step time there and what binds."""

    speeds: dict
    """resource -> speed factor reached (1 = as modelled)."""
    step_time_s: float
    bottleneck: str
    elasticity: float

    def to_dict(self) -> dict:
        return {"speeds": dict(self.speeds), "step_time_s": self.step_time_s, "bottleneck": self.bottleneck,
                "elasticity": self.elasticity}


@dataclass(frozen=True)
class Sensitivity:
    step_time_s: float
    speedup: float
    effects: tuple[ResourceEffect, ...]
    """One per resource, in ``RESOURCES`` order."""
    path: tuple[PathStep, ...]
    """The job as modelled, then after each doubling of the resource that bound it."""

    @property
    def bottleneck(self) -> str:
        """The resource of the largest elasticity ('' when no resource moves the step)."""
        best = max(self.effects, key=lambda e: e.elasticity)
        return best.resource if best.elasticity > 0 else ""

    def effect(self, resource: str) -> ResourceEffect:
        return next(e for e in self.effects if e.resource == resource)

    def to_dict(self) -> dict:
        return {"step_time_s": self.step_time_s, "speedup": self.speedup, "bottleneck": self.bottleneck,
                "bottleneck_lens": RESOURCE_LENS.get(self.bottleneck, ""),
                "effects": [e.to_dict() for e in self.effects], "path": [p.to_dict() for p in self.path]}


def effects_at(r: Resolved | Evaluator, s: Speeds,
               speedup: float = SPEEDUP) -> tuple[float, tuple[ResourceEffect, ...]]:
    """(the step at speeds ``s``, each resource's effect when it alone runs ``speedup`` x faster)."""
    ev = r if isinstance(r, Evaluator) else Evaluator(r)
    base = ev.step_s(s)
    out = []
    for res in RESOURCES:
        t = ev.step_s(s.times(res, speedup))
        out.append(ResourceEffect(res, t, 1.0 - t / base, math.log(base / t) / math.log(speedup)))
    return base, tuple(out)


def sensitivity(r: Resolved, path_steps: int = PATH_STEPS_DEFAULT) -> Sensitivity:
    """Elasticities of the resolved job's step, and the bottleneck path of ``path_steps`` doublings."""
    if isinstance(path_steps, bool) or not isinstance(path_steps, int) or not 0 <= path_steps <= MAX_PATH_STEPS:
        raise InputError("path_steps", f"must be a whole number from 0 to {MAX_PATH_STEPS}, got {path_steps!r}")
    ev = Evaluator(r)
    base, effects = effects_at(ev, Speeds())
    path, s, step, here = [], Speeds(), base, effects
    for i in range(path_steps + 1):
        best = max(here, key=lambda e: e.elasticity)
        name = best.resource if best.elasticity > 0 else ""
        path.append(PathStep({k: getattr(s, k) for k in RESOURCES}, step, name, max(best.elasticity, 0.0)))
        if i == path_steps or not name:
            break
        s = s.times(name, SPEEDUP)
        step, here = effects_at(ev, s)
    return Sensitivity(step_time_s=base, speedup=SPEEDUP, effects=effects, path=tuple(path))
