"""Predicted against published: the accuracy report behind ``perfmodel validate``.

The comparison metric is tokens/s per GPU (equivalently step time): it does not depend on
the attention-FLOP convention a source used for its TFLOP/s. Measured values come first;
``derived`` values (arithmetic on published numbers, see the case file's notes) are used
when the source published only a step time or a TFLOP/s figure.
"""

from __future__ import annotations

import itertools
import json
import math
import reprlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from perfmodel.engine.band import family_of, kind_of
from perfmodel.engine.prediction import predict
from perfmodel.spec.errors import InputError, read_data_file
from perfmodel.spec.profile import AUTO, ProfileChoice, efficiencies_for
from perfmodel.spec.scenario import hardware_id, hardware_of, model_of, parse_scenario, scenario_to_dict
from perfmodel.spec.units import GIBI

CASES_FORMAT = "perfmodel-cases/1"


@dataclass(frozen=True)
class CaseResult:
    id: str
    hardware: str
    source: str
    trust: str
    basis: str
    """'measured' or 'derived': where the compared tokens/s comes from."""
    measured_tokens_per_s_per_gpu: float
    predicted_tokens_per_s_per_gpu: float
    predicted_step_time_s: float
    measured_step_time_s: float | None
    measured_mfu: float | None
    predicted_mfu: float
    bottleneck: str
    error: float
    """predicted / measured - 1 on tokens/s per GPU."""
    measured_peak_memory_gib: float | None = None
    predicted_memory_gib: float | None = None
    gpu: str = ""
    """The GPU the case is grouped under: the spec's ``variant_of``, else the spec id."""
    model: str = ""
    """The scenario's model (preset name or the inline model's name)."""
    predicted_fits: bool = True
    """Whether the model says the job fits in the GPU's memory. Every published run ran, so a
    False here is a miss of the memory model (or of a recipe feature the scenario cannot
    express), whether or not the source published a peak."""
    usable_memory_gib: float | None = None
    """The hardware spec's memory a training process can allocate."""
    memory_note: str = ""
    """The case file's ``memory:`` assumption, if any: what the scenario leaves out of memory."""
    scenario_key: str = ""
    """The scenario as canonical JSON without its name, its software as the options in force (not
    the stack's name): equal for cases that describe the same job."""
    kind: str = "dense"
    """'dense' or 'moe': one of the strata of the error band (``perfmodel.studies.observed.bands``)."""
    stack: str = ""
    """The scenario's named software stack (``software.stack``), '' where it names none: with the
    source and the GPU generation, the unit whose offset the error band draws."""
    family: str = "dense"
    """'dense', 'moe-coarse' or 'moe-fine' (``perfmodel.engine.band.family_of``): the model families
    the out-of-family band holds out."""
    seq_length: int = 0
    num_gpus: int = 0

    @property
    def memory_error(self) -> float | None:
        if self.measured_peak_memory_gib is None:
            return None
        return self.predicted_memory_gib / self.measured_peak_memory_gib - 1.0

    def to_dict(self) -> dict:
        """The case's fields for JSON, without ``scenario_key`` (the report's ``repeats`` groups by it)."""
        fields = {k: v for k, v in self.__dict__.items() if k != "scenario_key"}
        return {**fields, "memory_error": self.memory_error}


@dataclass(frozen=True)
class Skipped:
    id: str
    reason: str


MEASURED_NUMBERS = ("tokens_per_s_per_gpu", "step_time_s", "mfu", "peak_memory_gib")
"""Numbers of a case's ``measured`` and ``derived`` blocks that the report reads."""
JOB_SIZE_FIELDS = ("num_gpus", "global_batch_size", "seq_length")
"""Scenario fields that turn a published step time into tokens/s before the scenario is parsed."""


def load_cases(path: str | Path) -> list[dict]:
    """The cases of a ``perfmodel-cases/1`` file, each checked for what the report reads before
    its scenario is parsed (a scenario that does not parse is a skipped case, with its reason)."""
    from perfmodel.spec.limits import MAX_CASES, MAX_NAME_LENGTH

    p = Path(path)
    data = read_data_file(p, "cases")
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise InputError("cases", f"{p.name} must be a mapping with a 'cases' list (format {CASES_FORMAT})")
    if len(data["cases"]) > MAX_CASES:
        raise InputError("cases", f"{len(data['cases']):,} cases; at most {MAX_CASES:,} (perfmodel.spec.limits)")
    for i, c in enumerate(data["cases"]):
        if not isinstance(c, dict) or "id" not in c:
            raise InputError(f"cases[{i}]", "each case needs an 'id'")
        if not isinstance(c["id"], str) or not 0 < len(c["id"]) <= MAX_NAME_LENGTH:
            raise InputError(f"cases[{i}].id", f"must be a name of 1 to {MAX_NAME_LENGTH} characters")
        _check_case(c, f"cases[{i}]")
    return data["cases"]


def _check_case(case: dict, where: str) -> None:
    """The parts of a case that ``run_case`` and the report read as they are: mappings where
    mappings go, and finite positive numbers where numbers go."""
    for block in ("scenario", "measured", "derived"):
        if case.get(block) is not None and not isinstance(case[block], dict):
            raise InputError(f"{where}.{block}", "must be a mapping")
        for key in MEASURED_NUMBERS if block != "scenario" else ():
            value = (case.get(block) or {}).get(key)
            if value is not None and not _positive_number(value):
                raise InputError(f"{where}.{block}.{key}", f"must be a finite number > 0, got {reprlib.repr(value)}")
    if case.get("assumptions") is not None and not isinstance(case["assumptions"], list):
        raise InputError(f"{where}.assumptions", "must be a list")
    s = case.get("scenario")
    if s:
        for key in JOB_SIZE_FIELDS:
            if not (type(s.get(key)) is int and s[key] > 0):
                raise InputError(f"{where}.scenario.{key}",
                                 f"must be a positive integer, got {reprlib.repr(s.get(key))}")


def _positive_number(value) -> bool:
    return type(value) in (int, float) and value > 0 and math.isfinite(_float_or_inf(value))


def _float_or_inf(value: int | float) -> float:
    """``float(value)``, or inf for a whole number too large for a float (``-10**400`` and
    ``10**400`` are YAML's whole numbers, not floats)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def measured_tps(case: dict) -> tuple[float | None, str]:
    m = case.get("measured") or {}
    d = case.get("derived") or {}
    s = case["scenario"]
    tokens = s["global_batch_size"] * s["seq_length"]
    if m.get("tokens_per_s_per_gpu"):
        return float(m["tokens_per_s_per_gpu"]), "measured"
    if m.get("step_time_s"):
        return tokens / (float(m["step_time_s"]) * s["num_gpus"]), "measured"
    if d.get("tokens_per_s_per_gpu"):
        return float(d["tokens_per_s_per_gpu"]), "derived"
    if d.get("step_time_s"):
        return tokens / (float(d["step_time_s"]) * s["num_gpus"]), "derived"
    return None, ""


def run_case(case: dict, profile: ProfileChoice = AUTO) -> CaseResult | Skipped:
    s = case.get("scenario")
    if not s:
        return Skipped(case["id"], case.get("why_not_runnable", "no scenario"))
    meas, basis = measured_tps(case)
    if meas is None:
        return Skipped(case["id"], "no tokens/s or step time published or derived")
    try:
        sc = parse_scenario(s)
        p = predict(sc, efficiency=efficiencies_for(hardware_of(sc), profile)[0])
    except InputError as exc:
        return Skipped(case["id"], str(exc))
    m = case.get("measured") or {}
    hw = hardware_of(sc)
    return CaseResult(
        id=case["id"], hardware=hardware_id(sc), source=str(case.get("source", "")).split(" — ")[0][:80],
        trust=str(case.get("trust", "")), basis=basis, measured_tokens_per_s_per_gpu=meas,
        predicted_tokens_per_s_per_gpu=p.tokens_per_s_per_gpu, predicted_step_time_s=p.step_time_s,
        measured_step_time_s=m.get("step_time_s"), measured_mfu=m.get("mfu"), predicted_mfu=p.mfu,
        bottleneck=p.bottleneck, error=p.tokens_per_s_per_gpu / meas - 1.0,
        measured_peak_memory_gib=m.get("peak_memory_gib"), predicted_memory_gib=p.memory_per_gpu_bytes / GIBI,
        gpu=hw.reference_id, model=sc.model if isinstance(sc.model, str) else sc.model.name,
        predicted_fits=p.fits_in_memory, usable_memory_gib=hw.gpu.hbm_usable_gib,
        memory_note=next((" ".join(str(a).split()) for a in case.get("assumptions") or ()
                          if str(a).startswith("memory:")), ""),
        scenario_key=json.dumps(scenario_to_dict(sc) | {"name": "", "software": sc.software.model_dump(
            mode="json", exclude={"stack"})}, sort_keys=True),
        kind=kind_of(model_of(sc)), stack=sc.software.stack or "",
        family=family_of(model_of(sc)), seq_length=sc.seq_length, num_gpus=sc.num_gpus,
    )


def ratio_error(a: CaseResult, b: CaseResult) -> float:
    """Error of the predicted speed-up of case ``a`` over case ``b``: (pred_a / pred_b) /
    (meas_a / meas_b) - 1, which is (1 + e_a) / (1 + e_b) - 1 for errors e on tokens/s per GPU.
    A common offset of both cases (a software stack faster or slower than the model) cancels."""
    return (1.0 + a.error) / (1.0 + b.error) - 1.0


def _mean(values, average=np.mean) -> float:
    """``average`` (mean or median) of some numbers, nan for none."""
    values = list(values)
    return float(average(values)) if values else float("nan")


def _mape(results) -> float:
    """Mean absolute error on tokens/s per GPU of some results (nan for none)."""
    return _mean(abs(r.error) for r in results)


@dataclass(frozen=True)
class Report:
    results: tuple[CaseResult, ...]
    skipped: tuple[Skipped, ...]

    def mape(self, hardware: str | None = None) -> float:
        return _mape([r for r in self.results if hardware in (None, r.hardware)])

    def median_ape(self, gpu: str | None = None) -> float:
        """Median absolute error on tokens/s per GPU, over all cases or those of one GPU."""
        return _mean((abs(r.error) for r in self.results if gpu in (None, r.gpu)), np.median)

    def _grouped(self, *keys: str) -> dict:
        """Results by the value of one field (hardware, gpu or source), or by the tuple of the
        values of several, keys sorted."""
        def key(r):
            values = tuple(getattr(r, k) for k in keys)
            return values if len(keys) > 1 else values[0]
        out: dict = {}
        for r in sorted(self.results, key=key):
            out.setdefault(key(r), []).append(r)
        return out

    def by_hardware(self) -> dict:
        return {h: {"cases": len(rs), "mape": _mape(rs)} for h, rs in self._grouped("hardware").items()}

    def by_gpu(self) -> dict:
        """As ``by_hardware``, with each variant spec counted under its GPU (``variant_of``):
        the per-GPU accuracy targets are judged on these groups."""
        return {g: {"cases": len(rs), "mape": _mape(rs), "specs": sorted({r.hardware for r in rs})}
                for g, rs in self._grouped("gpu").items()}

    def by_source(self) -> dict:
        """Cases, MAPE and mean signed error per publication (and release): how far the model
        carries to each software stack, which the per-GPU figures mix together."""
        return {src: {"cases": len(rs), "mape": _mape(rs), "mean_error": float(np.mean([r.error for r in rs]))}
                for src, rs in self._grouped("source").items()}

    def what_if(self) -> dict:
        """Accuracy of predicted ratios, the question a what-if asks: every pair of cases that
        share a source (publication and release), a GPU and a model, and differ in anything
        else (GPU count, layout, precision, sequence length). ``mean`` and ``median`` are over
        pairs of |ratio_error|; ``groups`` gives each group's cases, pairs and mean."""
        rows, errs = [], []
        for (src, gpu, model), rs in self._grouped("source", "gpu", "model").items():
            pair_errs = [abs(ratio_error(a, b)) for a, b in itertools.combinations(rs, 2)]
            if pair_errs:
                errs += pair_errs
                rows.append({"source": src, "gpu": gpu, "model": model, "cases": len(rs),
                             "pairs": len(pair_errs), "mean": _mean(pair_errs)})
        return {"pairs": len(errs), "cases": sum(r["cases"] for r in rows), "mean": _mean(errs),
                "median": _mean(errs, np.median), "groups": rows}

    def repeats(self) -> dict:
        """Cases that describe the same job (equal scenarios) but were measured apart, most often
        by two releases of one software stack. A deterministic model predicts one number for
        such a group, so the group's spread is error no model can remove: for each group the
        least sum of |p / m - 1| over p (the minimum lies at one of the measurements, the sum
        being convex and piecewise linear in p). ``floor_mape`` is the sum over groups divided
        by all cases: the MAPE that remains when every other case is predicted exactly."""
        rows, floor = [], 0.0
        for _, rs in self._grouped("scenario_key").items():
            if len(rs) < 2:
                continue
            measured = [r.measured_tokens_per_s_per_gpu for r in rs]
            least = min(sum(abs(p / m - 1.0) for m in measured) for p in measured)
            floor += least
            rows.append({"cases": [r.id for r in rs], "measured": measured,
                         "spread": max(measured) / min(measured) - 1.0, "least_abs_error_sum": least})
        rows.sort(key=lambda g: -g["least_abs_error_sum"])
        return {"groups": rows, "floor_mape": floor / len(self.results) if self.results else float("nan")}

    def memory_results(self) -> list[CaseResult]:
        return [r for r in self.results if r.measured_peak_memory_gib is not None]

    def memory_mape(self) -> float:
        return _mean(abs(r.memory_error) for r in self.memory_results())

    def not_fitting(self) -> list[CaseResult]:
        """Published runs (so runs that fitted) that the model says do not fit in memory."""
        return [r for r in self.results if not r.predicted_fits]

    def worst(self, k: int = 10) -> list[CaseResult]:
        return sorted(self.results, key=lambda r: -abs(r.error))[:k]

    def to_dict(self) -> dict:
        return {
            "mape_tokens_per_s_per_gpu": self.mape(), "num_cases": len(self.results),
            "mape_peak_memory": self.memory_mape(), "num_memory_cases": len(self.memory_results()),
            "by_hardware": self.by_hardware(), "by_gpu": self.by_gpu(), "by_source": self.by_source(),
            "what_if": self.what_if(), "repeats": self.repeats(), "predicted_not_to_fit": [r.id for r in self.not_fitting()],
            "worst": [r.id for r in self.worst()],
            "cases": [r.to_dict() for r in self.results],
            "skipped": [s.__dict__ for s in self.skipped],
        }


def validate(cases: list[dict], profile: ProfileChoice = AUTO) -> Report:
    """Every case predicted with the efficiencies ``profile`` chooses (``perfmodel.spec.profile``)."""
    out = [run_case(c, profile) for c in cases]
    return Report(results=tuple(r for r in out if isinstance(r, CaseResult)),
                  skipped=tuple(r for r in out if isinstance(r, Skipped)))
