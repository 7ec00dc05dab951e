"""How fast the engine is, for ``perfmodel bench``, on one core:

- layout evaluations per second: a full search of one job (GPT-3 175B on 1,024 H100s,
  Narayanan et al. 2021's batch) timed end to end, and ``evaluate`` alone over every valid
  layout; then the same job with the widened search (precisions bf16 and fp8, every overlap
  setting);
- the wall time of one ``perfmodel predict`` process, start-up included, beside a process that
  only imports the libraries perfmodel stands on (``IMPORT_FLOOR``), run in turn;
- the time of one ``predict`` in a warm process (the app, ``sensitivity`` and the fits call it
  hundreds of times);
- the whole search's rate over ``evaluate``'s alone (what the search spends outside the model);
- the peak memory of a large search (DeepSeek-V3 on GB200 NVL72), in a process of its own.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

from perfmodel.engine.distinct import forget
from perfmodel.engine.enumerate import enumerate_layouts
from perfmodel.engine.evaluate import evaluate
from perfmodel.engine.job import bind
from perfmodel.engine.prediction import predict
from perfmodel.engine.rules import layout_rule_fields, layout_violation, with_recompute
from perfmodel.formulas.layouts import layouts_for
from perfmodel.spec.paths import DATA_DIR
from perfmodel.spec.profile import AUTO, efficiencies_for
from perfmodel.spec.scenario import PIPELINE_SCHEDULES, hardware_of, load_scenario, model_of, parse_scenario
from perfmodel.studies.search.job_variants import OVERLAP_KINDS
from perfmodel.studies.search.search import CHUNK, SearchOptions, bounds_for, search

BENCH_SCENARIO = dict(
    name="bench-gpt3-175b-1024xh100", hardware="h100-sxm", num_gpus=1024, model="gpt3-175b",
    seq_length=2048, global_batch_size=1536, training_tokens=3.0e11,
)
"""GPT-3 175B with the batch and sequence of Narayanan et al. 2021 (table 1: 1,536 x 2,048 on
1,024 GPUs) and GPT-3's 300B training tokens (Brown et al. 2020, sec. 2.2)."""
WIDE_OPTIONS = dict(precisions=("bf16", "fp16", "fp8"), sequence_parallel=(True, False), overlap=OVERLAP_KINDS,
                    schedules=PIPELINE_SCHEDULES)
"""The widened search: every precision the H100 has a dense tensor-core peak for (Megatron's
``--bf16``, ``--fp16``, ``--fp8-format``; fp16 keeps its gradients in fp16 and its main
gradients among the optimizer states), sequence parallelism on and off where tp > 1, every
overlap switch and every pipeline schedule."""
LARGE_SCENARIO = dict(
    name="bench-deepseek-v3-2048xgb200", hardware="gb200-nvl72", num_gpus=2048, model="deepseek-v3",
    seq_length=4096, global_batch_size=15360, training_tokens=14.8e12,
)
"""DeepSeek-V3 with its pre-training batch, sequence and tokens (DeepSeek-AI 2024, sec. 4.2:
15,360 x 4,096, 14.8T tokens) on 2,048 GPUs of GB200 NVL72 racks."""
LARGE_OPTIONS = dict(precisions=("bf16", "fp8"))
EXAMPLE_SCENARIO = DATA_DIR / "example_scenario.yaml"
"""What ``perfmodel predict`` predicts when it is given no scenario."""


@dataclass(frozen=True)
class BenchResult:
    cores: int | None
    layouts_enumerated: int
    layouts_valid: int
    layouts_fit: int
    full_search_wall_s_best: float
    full_search_wall_s_median: float
    evaluations_per_s: float
    """Layouts timed per second of the whole search (enumeration, rules, memory and ranking
    included), median of the repeats."""
    evaluations_in_search_per_s: float
    """... per second spent in ``evaluate`` during the search."""
    raw_layouts: int
    raw_evaluate_s: float
    raw_evaluations_per_s: float
    """``evaluate`` (memory included) over every valid layout, fitting or not, best of the repeats."""
    best_layout: dict
    best_step_time_s: float
    wide_candidates: int
    """The widened search: candidates enumerated (layouts x pipeline schedules x recompute x
    precision x overlap settings that differ for the layout), ..."""
    wide_evaluated: int
    """... those timed, ..."""
    wide_search_wall_s: float
    """... its wall time (median), ..."""
    wide_evaluations_per_s: float
    """... and layouts timed per second of it."""
    search_over_raw_rate: float
    """``evaluations_per_s`` over ``raw_evaluations_per_s``: 1 would be a search that spends no
    time outside ``evaluate``."""
    warm_predict_s: float
    """Median time of one ``predict`` of the built-in example in this (warm) process, the
    calibration profile's efficiencies, as ``perfmodel.predict`` gives it."""
    predict_wall_s: float | None
    """Median wall time of ``perfmodel predict --format json`` (the built-in example) as a new
    process, start-up included, ..."""
    import_floor_wall_s: float | None
    """... of a process that only runs ``IMPORT_FLOOR``, in turn with it, ..."""
    predict_over_import_floor: float | None
    """... and the median of their ratios, run by run (both with one BLAS thread)."""
    large_search_peak_rss_bytes: float | None
    """Peak resident memory of a process that runs the large search (interpreter and imports
    included), ..."""
    large_search_baseline_rss_bytes: float | None
    """... and of the same process before the search."""
    large_search_candidates: int | None
    large_search_wall_s: float | None

    def to_dict(self) -> dict:
        """The CLI's JSON (``perfmodel bench --format json``)."""
        return {"scenario": BENCH_SCENARIO, "wide_options": {k: list(v) for k, v in WIDE_OPTIONS.items()},
                "large_scenario": LARGE_SCENARIO, "large_options": {k: list(v) for k, v in LARGE_OPTIONS.items()},
                **self.__dict__}


IMPORT_FLOOR = "import numpy, pydantic, yaml"
"""The libraries every ``perfmodel predict`` process imports before any of perfmodel's own code
runs: a floor under its start-up."""
WARM_PREDICT_CALLS = 200


def _wall_s(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t0


def predict_wall_s(runs: int) -> tuple[float, float, float]:
    """(median wall time of ``runs`` ``perfmodel predict`` processes, of as many processes that
    run ``IMPORT_FLOOR``, the median of their ratios), the two run in turn so that a change in the
    machine's load falls on both; one BLAS thread, as ``perfmodel predict`` sets it."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    predict_cmd = [sys.executable, "-m", "perfmodel.cli", "predict", "--format", "json"]
    floor_cmd = [sys.executable, "-c", IMPORT_FLOOR]
    pairs = [(_wall_s(predict_cmd, env), _wall_s(floor_cmd, env)) for _ in range(runs)]
    return (statistics.median(p for p, _ in pairs), statistics.median(f for _, f in pairs),
            statistics.median(p / f for p, f in pairs))


def warm_predict_s(calls: int = WARM_PREDICT_CALLS) -> float:
    """Median time of ``calls`` predictions of the built-in example in this process, after one."""
    sc = load_scenario(EXAMPLE_SCENARIO)
    eff = efficiencies_for(hardware_of(sc), AUTO)[0]
    predict(sc, eff)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        predict(sc, eff)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def peak_rss_bytes() -> float:
    """The process's peak resident memory: Linux's VmHWM (``/proc/self/status``), which starts
    afresh with the process, unlike ``ru_maxrss``, which keeps the parent's peak across fork and
    exec; ``ru_maxrss`` elsewhere."""
    try:
        with open("/proc/self/status") as f:
            return next(float(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError):
        import resource

        scale = 1 if sys.platform == "darwin" else 1024   # bytes on macOS, KiB on Linux
        return float(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale)


def large_search_child() -> None:
    """Run the large search and print its peak memory as JSON (``python -c`` from ``bench``)."""
    sc = parse_scenario(LARGE_SCENARIO)
    before = peak_rss_bytes()
    t0 = time.perf_counter()
    res = search(sc, SearchOptions(**LARGE_OPTIONS))
    wall = time.perf_counter() - t0
    print(json.dumps({"peak": peak_rss_bytes(), "before": before, "candidates": res.num_enumerated, "wall_s": wall}))


def large_search_memory() -> dict:
    code = "from perfmodel.studies.bench import large_search_child; large_search_child()"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _cold(study, *args):
    """``study(*args)`` with no layer shape kept from an earlier one (as in a new process)."""
    forget()
    return study(*args)


def bench(repeat: int, *, predict_runs: int = 5, large: bool = True) -> BenchResult:
    """Search the bench job ``repeat`` times (after one warm-up), time ``evaluate`` over every
    valid layout, fitting or not, and run the widened search, on one core; then time
    ``predict_runs`` predict processes and (``large``) measure the large search's memory."""
    if hasattr(os, "sched_setaffinity"):   # one core, literally (child processes inherit it)
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    sc = parse_scenario(BENCH_SCENARIO)
    opts = SearchOptions()
    search(sc, opts)   # warm caches (presets, hardware, imports)
    results = [_cold(search, sc, opts) for _ in range(repeat)]
    walls_sorted = sorted(r.elapsed_s for r in results)
    res = results[-1]
    m, hw = model_of(sc), hardware_of(sc)
    cols = enumerate_layouts(m, hw, sc.num_gpus, sc.global_batch_size, sc.seq_length, bounds_for(sc, opts))
    ok = layout_violation(m, hw, sc.seq_length, sc.global_batch_size, sc.num_gpus, sc.precision, tp=cols["tp"],
                          pp=cols["pp"], vpp=cols["vpp"], cp=cols["cp"], ep=cols["ep"], etp=cols["etp"],
                          sp=cols["sp"], micro_batch_size=cols["mbs"], **layout_rule_fields(sc)) == ""
    cols = {k: v[ok] for k, v in cols.items()}
    L = layouts_for(sc.num_gpus, sc.global_batch_size,
                    **{k: cols[k] for k in ("tp", "pp", "vpp", "cp", "ep", "etp", "sp", "zero_stage", "mbs")})
    best = float("inf")
    for _ in range(repeat):
        job = bind(with_recompute(sc, "selective"), m, hw, hw.efficiency)
        forget()                               # nothing kept from the last (layer shapes, perfmodel.engine.distinct)
        t0 = time.perf_counter()
        for s in range(0, len(L), CHUNK):
            evaluate(job, L.take(slice(s, s + CHUNK)))
        best = min(best, time.perf_counter() - t0)
    wide = [_cold(search, sc, SearchOptions(**WIDE_OPTIONS)) for _ in range(repeat)]
    wide_wall = statistics.median(w.elapsed_s for w in wide)
    large = large_search_memory() if large else None
    walls = predict_wall_s(predict_runs) if predict_runs else (None, None, None)
    rate = res.num_evaluated / walls_sorted[len(walls_sorted) // 2]
    return BenchResult(
        cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        layouts_enumerated=res.num_enumerated, layouts_valid=res.num_valid, layouts_fit=res.num_fit,
        full_search_wall_s_best=walls_sorted[0], full_search_wall_s_median=walls_sorted[len(walls_sorted) // 2],
        evaluations_per_s=rate,
        evaluations_in_search_per_s=res.num_evaluated / res.evaluate_s, raw_layouts=len(L), raw_evaluate_s=best,
        raw_evaluations_per_s=len(L) / best, best_layout=res.best.layout(), best_step_time_s=res.best.step_time_s,
        wide_candidates=wide[-1].num_enumerated, wide_evaluated=wide[-1].num_evaluated, wide_search_wall_s=wide_wall,
        wide_evaluations_per_s=wide[-1].num_evaluated / wide_wall,
        search_over_raw_rate=rate / (len(L) / best), warm_predict_s=warm_predict_s(),
        predict_wall_s=walls[0], import_floor_wall_s=walls[1], predict_over_import_floor=walls[2],
        large_search_peak_rss_bytes=large and large["peak"], large_search_baseline_rss_bytes=large and large["before"],
        large_search_candidates=large and large["candidates"], large_search_wall_s=large and large["wall_s"])
