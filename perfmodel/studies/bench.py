"""How fast the engine is: full-search wall time and layout evaluations per second on one job
(GPT-3 175B on 1,024 H100s, Narayanan et al. 2021's batch), for ``perfmodel bench``."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from perfmodel.engine.enumerate import enumerate_layouts
from perfmodel.engine.evaluate import evaluate
from perfmodel.engine.job import bind
from perfmodel.engine.rules import layout_rule_fields, layout_violation, with_recompute
from perfmodel.formulas.layouts import layouts_from_arrays
from perfmodel.spec.scenario import hardware_of, model_of, parse_scenario
from perfmodel.studies.search import CHUNK, SearchOptions, bounds_for, search

BENCH_SCENARIO = dict(
    name="bench-gpt3-175b-1024xh100", hardware="h100-sxm", num_gpus=1024, model="gpt3-175b",
    seq_length=2048, global_batch_size=1536, training_tokens=3.0e11,
)
"""GPT-3 175B with the batch and sequence of Narayanan et al. 2021 (table 1: 1,536 x 2,048 on
1,024 GPUs) and GPT-3's 300B training tokens (Brown et al. 2020, sec. 2.2)."""


@dataclass(frozen=True)
class BenchResult:
    cores: int | None
    layouts_enumerated: int
    layouts_valid: int
    layouts_fit: int
    full_search_wall_s_best: float
    full_search_wall_s_median: float
    evaluations_in_search_per_s: float
    raw_layouts: int
    raw_evaluate_s: float
    raw_evaluations_per_s: float
    best_layout: dict
    best_step_time_s: float

    def to_dict(self) -> dict:
        """The CLI's JSON (``perfmodel bench --format json``)."""
        return {"scenario": BENCH_SCENARIO, **self.__dict__}


def bench(repeat: int) -> BenchResult:
    """Search the bench job ``repeat`` times (after one warm-up), and time ``evaluate`` over every
    valid layout, fitting or not, on one core."""
    if hasattr(os, "sched_setaffinity"):   # one core, literally
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    sc = parse_scenario(BENCH_SCENARIO)
    opts = SearchOptions()
    search(sc, opts)   # warm caches (presets, hardware, imports)
    walls = []
    for _ in range(repeat):
        res = search(sc, opts)
        walls.append(res.elapsed_s)
    m, hw = model_of(sc), hardware_of(sc)
    cols = enumerate_layouts(m, hw, sc.num_gpus, sc.global_batch_size, sc.seq_length, bounds_for(sc, opts))
    ok = layout_violation(m, hw, sc.seq_length, sc.global_batch_size, sc.num_gpus, sc.precision, tp=cols["tp"],
                          pp=cols["pp"], vpp=cols["vpp"], cp=cols["cp"], ep=cols["ep"], etp=cols["etp"],
                          sp=cols["sp"], micro_batch_size=cols["mbs"], **layout_rule_fields(sc)) == ""
    cols = {k: v[ok] for k, v in cols.items()}
    dp = sc.num_gpus // (cols["tp"] * cols["pp"] * cols["cp"])
    L = layouts_from_arrays(**{k: cols[k] for k in ("tp", "pp", "vpp", "cp", "ep", "etp", "sp", "zero_stage", "mbs")},
                            dp=dp, num_mb=sc.global_batch_size // (cols["mbs"] * dp))
    job = bind(with_recompute(sc, "selective"), m, hw, hw.efficiency)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for s in range(0, len(L), CHUNK):
            evaluate(job, L.take(slice(s, s + CHUNK)))
        best = min(best, time.perf_counter() - t0)
    walls.sort()
    return BenchResult(
        cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        layouts_enumerated=res.num_enumerated, layouts_valid=res.num_valid, layouts_fit=res.num_fit,
        full_search_wall_s_best=walls[0], full_search_wall_s_median=walls[len(walls) // 2],
        evaluations_in_search_per_s=res.num_evaluated / res.evaluate_s, raw_layouts=len(L), raw_evaluate_s=best,
        raw_evaluations_per_s=len(L) / best, best_layout=res.best.layout(), best_step_time_s=res.best.step_time_s)
