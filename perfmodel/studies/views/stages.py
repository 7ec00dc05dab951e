"""Memory per pipeline stage: what each pipeline rank's GPUs hold (weights, gradients, optimizer
states, activations, workspace), the largest of which is ``Prediction.memory_per_gpu_bytes``.

The first rank holds the embedding and the most micro-batches in flight (pp under 1F1B), the
last the output layer and its fp32 logits (Korthikanti et al. 2022, sec. 4.2-4.3), so a layout
that does not fit usually does not fit at one end: the rows show which."""

from __future__ import annotations

from dataclasses import dataclass, fields

from perfmodel.engine.rules import Resolved
from perfmodel.formulas.memory import MemoryBreakdown, memory_per_stage


@dataclass(frozen=True)
class StageMemory:
    """Bytes per GPU of each pipeline rank, by component."""

    stages: tuple[dict, ...]
    """One mapping per rank: {component: bytes}, in rank order."""
    usable_bytes: float
    """What a training process can allocate on one GPU."""

    @property
    def totals(self) -> tuple[float, ...]:
        return tuple(sum(s.values()) for s in self.stages)

    def rows(self) -> list[dict]:
        """Long form for charts: (stage, component, bytes)."""
        return [{"stage": i, "component": k, "bytes": v} for i, s in enumerate(self.stages) for k, v in s.items()]

    def to_dict(self) -> dict:
        return {"stages": [dict(s) for s in self.stages], "usable_bytes": self.usable_bytes,
                "totals": list(self.totals)}


def stage_memory(r: Resolved) -> StageMemory:
    """Memory per GPU of every pipeline rank of the resolved scenario."""
    j = r.job
    per = memory_per_stage(j.model, j.seq_length, j.recompute, j.precision, r.layouts, j.software)
    names = [f.name for f in fields(MemoryBreakdown)]
    return StageMemory(tuple({n: float(getattr(m, n)[0]) for n in names} for m in per),
                       float(r.hardware.gpu.hbm_usable_bytes))
