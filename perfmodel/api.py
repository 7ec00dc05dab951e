"""perfmodel's public Python API: what the CLI and the app call, and nothing else does more.

    import perfmodel as pm
    sc = pm.load_scenario("my_job.yaml")          # or a mapping
    p = pm.predict(sc)                            # the numbers `perfmodel predict` prints
    p.to_dict() == json.loads(`perfmodel predict my_job.yaml --format json`)

Every function takes a ``Scenario`` (or a mapping, parsed without opening any file) and keyword
options whose defaults are the CLI's: ``profile="auto"`` uses the project's calibration profile
for the hardware where one exists, ``profile=None`` the hardware spec's own efficiencies, and a
path a profile file of your own (``perfmodel.spec.profile``). ``cost`` prices GPU-hours
(``CostModel``; default: the scenario's ``cost`` section, whose own default is the hardware's
cloud price) and ``failures`` sets failures and recovery (``FailureModel``; default: the
scenario's ``reliability`` section). Results are frozen objects whose
``to_dict()`` is exactly the CLI's JSON. Invalid input raises ``InputError`` (one line:
``<field>: <reason>``). See docs/api.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from perfmodel.engine.band import ErrorBand, profile_band_note
from perfmodel.engine.band import band_for_job as _band_for_job
from perfmodel.engine.evaluate import COMPONENTS as BREAKDOWN_COMPONENTS  # noqa: F401  (public)
from perfmodel.engine.evaluate import LENS  # noqa: F401  (public)
from perfmodel.engine.prediction import Prediction
from perfmodel.engine.prediction import predict as _predict
from perfmodel.engine.rules import Resolved
from perfmodel.engine.rules import resolve as _resolve
from perfmodel.spec.cost import CostModel
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import HardwareSpec, list_hardware_ids, load_hardware
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.presets import list_presets, load_model
from perfmodel.spec.profile import AUTO, ProfileChoice, efficiencies_for, profile_lookup
from perfmodel.spec.reliability import FailureModel
from perfmodel.spec.scenario import Scenario, hardware_of, inline_local_files, model_of, parse_scenario
from perfmodel.spec.scenario import load_scenario as _load_scenario_file

ScenarioLike = Scenario | Mapping

_ON_FIRST_USE = {"TIMELINE_PHASES": ("perfmodel.formulas.timeline", "PHASES"), **{
    n: ("perfmodel.serving_api", n) for n in ("load_serving_scenario", "serve", "size_serving", "validate_serving")}}
"""Public names whose modules load on first use (PEP 562): a predict needs no timeline nor serving."""


def __getattr__(name: str):
    if name not in _ON_FIRST_USE:
        raise AttributeError(f"module 'perfmodel.api' has no attribute {name!r}")
    from importlib import import_module
    value = globals()[name] = getattr(import_module(_ON_FIRST_USE[name][0]), _ON_FIRST_USE[name][1])
    return value


def load_scenario(source: str | Path | Mapping) -> Scenario:
    """A scenario from a file you name (YAML or JSON) or from a mapping. The hardware YAML or
    Hugging Face config.json a file or mapping names by path is read and inlined (paths in a
    mapping are taken from the working directory). For data from someone else (a link, an
    upload) use ``parse_scenario``, which never opens a file."""
    if isinstance(source, Mapping):
        return parse_scenario(inline_local_files(dict(source)))
    return _load_scenario_file(source)


def _scenario(s: ScenarioLike) -> Scenario:
    if isinstance(s, Scenario):
        return s
    if isinstance(s, Mapping):
        return parse_scenario(dict(s))
    raise InputError("scenario", f"expected a Scenario or a mapping, got {type(s).__name__} "
                                 f"(load a file with perfmodel.load_scenario)")


def hardware(hw_id: str) -> HardwareSpec:
    """The catalogue spec ``hardware/<hw_id>.yaml``."""
    return load_hardware(hw_id)


def model(preset_id: str) -> ModelSpec:
    """The model preset ``preset_id`` (``perfmodel/data/models.yaml``)."""
    return load_model(preset_id)


def hardware_ids() -> list[str]:
    return list_hardware_ids()


def model_ids() -> list[str]:
    return list_presets()


def efficiencies(scenario: ScenarioLike, profile: ProfileChoice = AUTO):
    """(the efficiencies a prediction of ``scenario`` uses, where they come from)."""
    return efficiencies_for(hardware_of(_scenario(scenario)), profile)


def resolve(scenario: ScenarioLike, *, profile: ProfileChoice = AUTO) -> Resolved:
    """The scenario checked by every rule and bound to its job and layout (for the roofline,
    the timeline and other views of one prediction)."""
    sc = _scenario(scenario)
    return _resolve(sc, efficiencies_for(hardware_of(sc), profile)[0])


def predict(scenario: ScenarioLike, *, profile: ProfileChoice = AUTO, cost: CostModel | None = None) -> Prediction:
    """Step time, throughput, MFU, memory, goodput (its fraction and waterfall), the error band
    and, with ``training_tokens``, time, cost and energy."""
    sc = _scenario(scenario)
    eff = efficiencies_for(hardware_of(sc), profile)[0]
    p = _predict(sc, eff, cost)
    custom = profile != AUTO and eff != efficiencies_for(hardware_of(sc), AUTO)[0]
    note = profile_band_note(profile) if custom else ""
    return p if not (note and p.band) else replace(p, band_note=f"{p.band_note}; {note}")


def band(scenario: ScenarioLike) -> ErrorBand:
    """The error band of ``scenario``'s predictions: quantiles of r = log(predicted / measured)
    tokens/s per GPU among published runs like it (its GPU generation, dense or MoE), fitted by
    ``perfmodel validate ... --fit-bands`` (``perfmodel.engine.band``). ``band.rate(x)`` and
    ``band.duration(t)`` give {p10, p50, p90} of a rate or a time (or cost); ``band.rank_of(
    predicted, measured)`` where a measured rate falls among such runs; ``band.cdf(r)``."""
    sc = _scenario(scenario)
    out = _band_for_job(hardware_of(sc), model_of(sc), sc.software.stack, sc.seq_length, sc.num_gpus)
    if out is None:
        raise InputError("band", "no band table: run perfmodel validate perfmodel/data/published_runs.yaml "
                                 "--fit-bands perfmodel/data/error_bands.yaml")
    return out


def describe(scenario: ScenarioLike):
    """Parameters, FLOPs per token, placement and memory per GPU (no timing)."""
    from perfmodel.studies.views.describe import describe as _describe
    return _describe(_scenario(scenario))


def search(scenario: ScenarioLike, options=None, *, profile: ProfileChoice = AUTO, cost: CostModel | None = None,
           progress=None):
    """Every parallel layout of the job, ranked (``SearchOptions``: objective, what to try, pins)."""
    from perfmodel.studies.search.search import search as _search
    sc = _scenario(scenario)
    return _search(sc, options, cost, progress, efficiency=efficiencies_for(hardware_of(sc), profile)[0])


def scale(scenario: ScenarioLike, gpu_counts=None, *, mode: str | None = None, options=None,
          profile: ProfileChoice = AUTO, cost: CostModel | None = None, failures: FailureModel | None = None,
          efficiency_threshold: float | None = None, value_of_time_usd_per_day: float | None = None,
          deadline_s: float | None = None, max_batch_tokens: float | None = None, progress=None):
    """The best layout at each GPU count, the knee, and a verdict: a count, or why none serves
    (``value_of_time_usd_per_day`` and ``deadline_s`` state the purpose; None: the scenario's
    ``purpose`` section). ``gpu_counts``, ``mode`` (strong, weak, grow) and ``max_batch_tokens``
    (the batch limit of grow) default to the scenario's ``studies`` section."""
    from perfmodel.studies.search.scaling import EFFICIENCY_THRESHOLD_DEFAULT, scale_sweep
    sc = _scenario(scenario)
    if value_of_time_usd_per_day is None:
        value_of_time_usd_per_day = sc.purpose.value_of_time_usd_per_day
    if deadline_s is None:
        deadline_s = sc.purpose.deadline_s
    if gpu_counts is None:
        gpu_counts = sc.studies.scale_gpu_counts
        if gpu_counts is None:
            raise InputError("gpus", "give the GPU counts (or the scenario's studies.scale_gpu_counts)")
    return scale_sweep(sc, gpu_counts, mode or sc.studies.scale_mode, options, cost, failures,
                       efficiency_threshold=EFFICIENCY_THRESHOLD_DEFAULT if efficiency_threshold is None
                       else efficiency_threshold,
                       value_of_time_usd_per_day=value_of_time_usd_per_day, deadline_s=deadline_s,
                       efficiency=efficiencies_for(hardware_of(sc), profile)[0],
                       max_batch_tokens=sc.studies.max_batch_tokens if max_batch_tokens is None else max_batch_tokens,
                       progress=progress)


def size(scenario: ScenarioLike, tokens: float | None = None, *, deadline_s: float | None = None,
         budget_usd: float | None = None, hardware_ids=None, gpu_counts=None, options=None,
         profile: ProfileChoice = AUTO, cost: CostModel | None = None, failures: FailureModel | None = None,
         grow_batch: bool | None = None, max_batch_tokens: float | None = None, progress=None, workers: int = 1,
         facility=None):
    """Per hardware type, the cheapest GPU count, layout and global batch that trains ``tokens``
    within the deadline and the budget, or why none does; the probability that it meets them, and
    its cost rented and owned with the break-even. The batch grows (doubling, up to
    ``max_batch_tokens``) only where the scenario's batch misses a target, and the result says so
    (``grow_batch=False``: the scenario's batch only). None: the scenario's ``purpose`` (deadline,
    budget), ``studies`` (hardware, GPU counts, batch growth and limit) and ``training_tokens``.
    ``facility`` (a ``perfmodel.spec.facility.Facility``; None: the scenario's) caps each count at
    what its power envelope holds, and the rows name the constraint that binds."""
    from perfmodel.studies.search.sizing import size_cluster
    sc = _scenario(scenario)
    deadline_s = sc.purpose.deadline_s if deadline_s is None else deadline_s
    budget_usd = sc.purpose.budget_usd if budget_usd is None else budget_usd
    tokens = sc.training_tokens if tokens is None else tokens
    if tokens is None:
        raise InputError("tokens", "give the training tokens (or the scenario's training_tokens)")
    grow = sc.studies.grow_batch if grow_batch is None else grow_batch
    limit = sc.studies.max_batch_tokens if max_batch_tokens is None else max_batch_tokens
    return size_cluster(sc, tokens, deadline_s, budget_usd, hardware_ids or sc.studies.size_hardware,
                        gpu_counts or sc.studies.size_gpu_counts, cost, failures, options=options,
                        efficiency_lookup=profile_lookup(profile), max_batch_tokens=limit if grow else None,
                        progress=progress, workers=workers, facility=facility)


def recommendable(hardware_ids, cost: CostModel) -> tuple[list[str], dict[str, str]]:
    """(the ids of ``hardware_ids`` sizing may recommend unasked, {id left out: why}): announced
    hardware and placeholder prices stay out unless named (``studies.recommendable``)."""
    from perfmodel.studies.search.recommendable import recommendable as _recommendable
    return _recommendable(hardware_ids, cost)


def fit_fixes(scenario: ScenarioLike, *, profile: ProfileChoice = AUTO, cost: CostModel | None = None):
    """Whether the scenario runs and fits and, when it does not, the smallest changes (recompute,
    ZeRO stage, tp, pp, cp, micro-batch, more GPUs; one lever, else two, else three) that make it,
    each with its step time, fastest first (``FitFixes``)."""
    from perfmodel.studies.search.fixes import fit_fixes as _fit_fixes
    sc = _scenario(scenario)
    return _fit_fixes(sc, efficiencies_for(hardware_of(sc), profile)[0], cost)


def price(scenario: ScenarioLike, *, cost: CostModel | None = None):
    """What one GPU-hour of the scenario's hardware costs on the cost model's basis (your price,
    the spec's listed, hyperscaler or neocloud price, or owning it), and the source of the number
    (``PriceQuote``); InputError when the spec has no price on that basis."""
    from perfmodel.formulas.cost import price_quote
    sc = _scenario(scenario)
    return price_quote(hardware_of(sc), cost or sc.cost)


def validate(cases, *, profile: ProfileChoice = AUTO):
    """Predicted against published runs: a case file's path, or a list of case mappings."""
    from perfmodel.studies.observed.validation import load_cases
    from perfmodel.studies.observed.validation import validate as _validate
    if isinstance(cases, (str, Path)):
        cases = load_cases(cases)
    return _validate(list(cases), profile)


def roofline(scenario: ScenarioLike, *, profile: ProfileChoice = AUTO):
    """Each operation of a layer against the GPU's compute and memory roofs."""
    from perfmodel.studies.views.roofline import roofline as _roofline
    return _roofline(resolve(scenario, profile=profile))


def timeline(scenario: ScenarioLike, *, profile: ProfileChoice = AUTO, max_microbatches: int | None = None):
    """The pipeline schedule of one step, who computes what and when."""
    from perfmodel.formulas.timeline import MAX_MICROBATCHES_DRAWN
    from perfmodel.studies.views.timeline import scenario_timeline
    cap = MAX_MICROBATCHES_DRAWN if max_microbatches is None else max_microbatches
    return scenario_timeline(resolve(scenario, profile=profile), cap)


def stage_memory(scenario: ScenarioLike, *, profile: ProfileChoice = AUTO):
    """Memory per GPU of each pipeline stage, by component (``StageMemory``); its largest total
    is ``predict``'s ``memory_per_gpu_bytes``."""
    from perfmodel.studies.views.stages import stage_memory as _stage_memory
    return _stage_memory(resolve(scenario, profile=profile))


def bench(repeat: int = 5):
    """Layout evaluations per second and full-search wall time on one core (``perfmodel bench``)."""
    from perfmodel.spec import limits
    from perfmodel.studies.bench import bench as _bench
    if isinstance(repeat, bool) or not isinstance(repeat, int) or not 1 <= repeat <= limits.MAX_BENCH_REPEATS:
        raise InputError("repeat", f"must be 1 to {limits.MAX_BENCH_REPEATS}, got {repeat!r}")
    return _bench(repeat)


def software_histories(*, profile: ProfileChoice = AUTO) -> list[dict]:
    """Each published software history (one job's throughput as its software improved), with
    perfmodel's prediction for its layout and each step's fraction of it."""
    from perfmodel.studies.observed.history import history_rows, load_software_history, predicted_tflop_per_s_per_gpu
    out = []
    for h in load_software_history():
        eff, note = efficiencies_for(hardware_of(h.scenario), profile)
        predicted = predicted_tflop_per_s_per_gpu(h, eff)
        out.append({"title": h.title, "source": h.source, "unit": h.unit, "notes": list(h.scenario_notes),
                    "hardware": h.scenario.hardware, "efficiency": note, "predicted_tflop_per_s": predicted,
                    "rows": history_rows(h, predicted)})
    return out


# ---------------------------------------------------------------- observed runs (issue 34)
def read_log(path: str | Path):
    """The measured runs of a training log file you name (Megatron-LM, NeMo, torchtitan, Hugging
    Face Trainer, Lightning or plain CSV, YAML): a tuple of ``MeasuredRun``."""
    from perfmodel.spec.observed.logs import read_log as _read_log
    return _read_log(path)


def parse_log(text: str, name: str = "log"):
    """``read_log`` for text you already hold (an upload): no file is opened."""
    from perfmodel.spec.observed.logs import parse_log as _parse_log
    return _parse_log(text, name)


def load_runs(path: str | Path, logs=()):
    """The measured runs of a RUN file (a cases file, one case, or a scenario measured by ``logs``)."""
    from perfmodel.spec.observed.runs import load_runs as _load_runs
    return _load_runs(path, logs)


def load_runs_assumed(path: str | Path, logs=(), *, stack: str = "auto"):
    """(the runs of ``load_runs``, the assumptions made, one line each): the framework each log's
    format shows (``perfmodel.spec.observed.log_framework``) gives the software stack of runs whose scenario
    names none (``stack="auto"``); a stack name sets every run's; the GPU a log names is checked
    against the scenario's hardware."""
    from perfmodel.spec import limits
    from perfmodel.spec.errors import read_text_file
    from perfmodel.spec.observed.log_framework import assume_stack, infer_framework
    runs = load_runs(path, logs)
    guesses = [(Path(log).name, infer_framework(read_text_file(Path(log), f"log({Path(log).name})",
                                                               limits.MAX_LOG_FILE_BYTES))) for log in logs]
    return assume_stack(runs, guesses, stack)


def trace(scenario: ScenarioLike, *, profile: ProfileChoice = AUTO) -> dict:
    """The predicted step as a Chrome trace (Trace Event Format: Perfetto and chrome://tracing open
    it): each pipeline rank's ops, exposed communication, bubble and step tail on their streams."""
    from perfmodel.studies.views.trace_out import chrome_trace
    return chrome_trace(resolve(scenario, profile=profile))


def compare_trace(scenario: ScenarioLike, path: str | Path, *, profile: ProfileChoice = AUTO):
    """A PyTorch profiler trace the user names against the scenario's predicted step, per kernel
    class (GEMM, attention, element-wise, communication, idle): ``TraceComparison``."""
    from perfmodel.spec.observed.profiler_trace import read_trace
    from perfmodel.studies.observed.trace_compare import compare_trace as _compare
    return _compare(read_trace(path), resolve(scenario, profile=profile))


def observed_run(scenario: ScenarioLike, measured, run_id: str | None = None):
    """A run of ``scenario`` measured by ``measured`` (a ``MeasuredRun`` or a ``measured:`` mapping)."""
    from perfmodel.spec.observed.measured import MeasuredRun, bind_run, measured_from_mapping
    sc = _scenario(scenario)
    m = measured if isinstance(measured, MeasuredRun) else measured_from_mapping(measured)
    return bind_run(run_id or sc.name, sc, m)


def _runs(runs):
    from perfmodel.spec.observed.measured import ObservedRun
    runs = [runs] if isinstance(runs, ObservedRun) else list(runs)
    if not runs or not all(isinstance(r, ObservedRun) for r in runs):
        raise InputError("runs", "give one or more observed runs (perfmodel.observed_run, perfmodel.load_runs)")
    from perfmodel.studies.observed.diagnose import check_run_count
    check_run_count(runs)
    return runs


def diagnose(runs, *, profile: ProfileChoice = AUTO):
    """Predicted against measured for observed runs (one, or a series of GPU counts, batches or
    layouts), the gap's ranked causes, the scaling series, the symptoms and the sensitivity."""
    from perfmodel.studies.observed.diagnose import diagnose as _diagnose
    runs = _runs(runs)
    return _diagnose(runs, [resolve(r.scenario, profile=profile) for r in runs],
                     [predict(r.scenario, profile=profile) for r in runs])


def sensitivity(scenario: ScenarioLike, *, profile: ProfileChoice = AUTO, path_steps: int | None = None):
    """The step time's elasticity to each resource (what 2x of it buys), the bottleneck it names,
    and how the bottleneck moves as the binding resource doubles, ``path_steps`` times."""
    from perfmodel.studies.views.sensitivity import PATH_STEPS_DEFAULT
    from perfmodel.studies.views.sensitivity import sensitivity as _sensitivity
    return _sensitivity(resolve(scenario, profile=profile), PATH_STEPS_DEFAULT if path_steps is None else path_steps)


def fit_anchor(runs, *, profile: ProfileChoice = AUTO):
    """The stack-level factors (compute, communication) that the observed runs identify."""
    from perfmodel.studies.observed.anchor import fit_anchor as _fit_anchor
    from perfmodel.studies.observed.diagnose import run_data
    runs = _runs(runs)
    data = [run_data(r, resolve(r.scenario, profile=profile), predict(r.scenario, profile=profile)) for r in runs]
    return _fit_anchor([(d.id, d.model.resolved, d.step_s) for d in data])


def predict_anchored(scenario: ScenarioLike, anchor, *, profile: ProfileChoice = AUTO, cost: CostModel | None = None):
    """A what-if predicted with an anchor (``fit_anchor``, or the observed runs to fit one from),
    with the band of the published anchored what-ifs."""
    from perfmodel.studies.observed.anchor import Anchor, AnchoredPrediction, anchored_band, anchored_efficiency
    from perfmodel.studies.observed.anchor_check import load_band
    from perfmodel.studies.observed.anchor_limits import anchor_mismatch, widened_band
    sc = _scenario(scenario)
    runs = None if isinstance(anchor, Anchor) else _runs(anchor)
    limits = () if runs is None else anchor_mismatch([r.scenario for r in runs], sc)
    a = anchor if runs is None else fit_anchor(runs, profile=profile)
    eff = efficiencies_for(hardware_of(sc), profile)[0]
    p = _predict(sc, anchored_efficiency(eff, a.factors), cost)
    band = load_band()
    notes = limits
    if runs and any(hardware_of(r.scenario).reference_id != hardware_of(sc).reference_id for r in runs):
        notes += (f"the anchor ran on {hardware_of(runs[0].scenario).reference_id}; its factors are carried to "
                  f"{hardware_of(sc).reference_id} as they are",)
    if runs is None:
        notes += ("an anchor given as factors: its stack, precision and model family are not checked against the "
                  "what-if's",)
    b = anchored_band(p, band["error_quantiles"])
    source = f"{band['pairs']} published anchored what-ifs (p10-p90 of their error)"
    if limits:
        b = widened_band(b, _band_for_job(hardware_of(sc), model_of(sc), sc.software.stack, sc.seq_length,
                                          sc.num_gpus), p.tokens_per_s_per_gpu, p.step_time_s)
        source += ", widened to the unanchored band where that is wider"
    return AnchoredPrediction(prediction=p, unanchored=predict(sc, profile=profile, cost=cost), anchor=a,
                              band=b, band_source=source, notes=notes)
