"""Software histories: one workload on fixed hardware, measured after each software change.

Hardware-software co-design made concrete: the GPUs, the model and the layout stay the same,
and the measured model FLOP/s per GPU still move by about 2x as kernels, fusions, CUDA Graphs
and communication libraries mature. perfmodel's calibrated efficiencies describe a mature
stack, so its prediction for the layout is drawn beside the measured steps: the gap to each
step is the part of the software the model does not describe. Data:
``perfmodel/data/software_history.yaml``, each series with its source.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from perfmodel.engine.prediction import predict
from perfmodel.spec.errors import InputError, pydantic_message, read_data_file
from perfmodel.spec.paths import DATA_DIR
from perfmodel.spec.scenario import Scenario, hardware_of, parse_scenario
from perfmodel.spec.units import TERA

HISTORY_PATH = DATA_DIR / "software_history.yaml"
FORMAT = "perfmodel-software-history/1"


class SoftwareStep(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    dispatcher: str
    change: str
    tflop_per_s_per_gpu: float = Field(gt=0)


class SoftwareHistory(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    title: str
    source: str
    trust: str
    unit: str
    scenario: Scenario
    scenario_notes: tuple[str, ...] = ()
    steps: tuple[SoftwareStep, ...] = Field(min_length=1)


def load_software_history(path: str | Path = HISTORY_PATH) -> tuple[SoftwareHistory, ...]:
    """Every series in ``path``; a malformed file raises InputError naming the field."""
    raw = read_data_file(path, "software history")
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise InputError("software history", f"{path} is not a {FORMAT} file")
    out = []
    for i, entry in enumerate(raw.get("series") or ()):
        prefix = f"series[{i}]"
        if not isinstance(entry, dict):
            raise InputError(prefix, "must be a mapping")
        try:
            scenario = parse_scenario(entry.get("scenario"))
        except InputError as exc:
            raise InputError(f"{prefix}.{exc.field}", exc.reason) from None
        try:
            out.append(SoftwareHistory.model_validate({**entry, "scenario": scenario}))
        except ValidationError as exc:
            raise InputError(prefix, pydantic_message(exc)) from None
    return tuple(out)


def predicted_tflop_per_s_per_gpu(history: SoftwareHistory, efficiency=None) -> float:
    """perfmodel's model FLOP/s per GPU for the series' layout, in TFLOP/s: predicted tokens/s
    per GPU x model FLOPs per token (the convention the series' unit names)."""
    p = predict(history.scenario, efficiency or hardware_of(history.scenario).efficiency)
    return p.tokens_per_s_per_gpu * p.model_flops_per_token / TERA


def history_rows(history: SoftwareHistory, predicted_tflop_per_s: float) -> list[dict]:
    """One row per step: its measured TFLOP/s and the fraction of the model's prediction."""
    return [{"step": i + 1, "change": s.change, "dispatcher": s.dispatcher,
             "measured_tflop_per_s": s.tflop_per_s_per_gpu,
             "fraction_of_model": s.tflop_per_s_per_gpu / predicted_tflop_per_s}
            for i, s in enumerate(history.steps)]
