"""Scenario: one training job to predict (format: shared/contracts/scenario.md).

``load_scenario`` turns a file the user names into a frozen ``Scenario``; ``parse_scenario``
does the same for a mapping (a link, an upload, a Python dict) and never opens a file. Whether
the layout can run is the engine's to say (``perfmodel.engine.rules``), with
``InputError("<field>", "<arithmetic>")``. Nothing is silently adjusted.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from perfmodel.spec.cost import CostModel
from perfmodel.spec.errors import InputError, read_data_file, validated
from perfmodel.spec.fabric import FabricSpec
from perfmodel.spec.facility import Facility
from perfmodel.spec.hardware import HardwareSpec, list_hardware_ids, load_hardware, load_hardware_file, parse_hardware
from perfmodel.spec.input_pipeline import InputPipeline
from perfmodel.spec.limits import (
    MAX_GLOBAL_BATCH_SIZE,
    MAX_NUM_GPUS,
    MAX_SEQ_LENGTH,
    MAX_TRAINING_TOKENS,
    MAX_VIRTUAL_STAGES,
    Name,
    int_choice,
    int_field,
    real_field,
)
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.purpose import Purpose
from perfmodel.spec.reliability import FailureModel
from perfmodel.spec.schedules import check_schedule_name, default_schedule, schedule_names
from perfmodel.spec.software import SOFTWARE_FIELDS, SoftwareStack, software_to_dict
from perfmodel.spec.startup import Startup
from perfmodel.spec.studies import Studies

Recompute = Literal["none", "selective", "full"]
Precision = Literal["bf16", "fp16", "fp8", "fp4"]
PipelineSchedule = Annotated[str, AfterValidator(check_schedule_name)]
"""The name of a pipeline schedule of ``perfmodel.spec.schedules.SCHEDULES``: 1F1B and
interleaved 1F1B (Narayanan et al. 2021), ZB-H1 and ZB-H2 (Qi et al. 2023), ZB-V (Qi et al.
2024), DualPipe and DualPipeV (DeepSeek-AI 2024, DeepSeek-V3 technical report; github
deepseek-ai/DualPipe)."""
PIPELINE_SCHEDULES: tuple[str, ...] = schedule_names()
"""The built-in schedules (``perfmodel.spec.schedules.schedule_names`` also lists any registered
since)."""
RECOMPUTE_CHOICES: tuple[str, ...] = get_args(Recompute)
PRECISION_CHOICES: tuple[str, ...] = get_args(Precision)


class ScenarioNote(UserWarning):
    """Something about a scenario the user should hear of that is not an error."""


class MovedKeysNote(ScenarioNote):
    """Software options given at the top level of a scenario, where they used to be."""

    def __init__(self, keys):
        self.keys = tuple(keys)
        super().__init__(moved_keys_text(self.keys))


def moved_keys_text(keys) -> str:
    return f"{', '.join(keys)} moved under software: (read from the top level this time)"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Parallelism(_Frozen):
    tp: int_field(MAX_NUM_GPUS) = 1
    """Tensor parallel degree."""
    pp: int_field(MAX_NUM_GPUS) = 1
    """Pipeline parallel degree."""
    vpp: int_field(MAX_VIRTUAL_STAGES) = 1
    """Virtual stages per pipeline rank (interleaved 1F1B; 2 for the V schedules zb-v and
    dualpipe-v, whose two chunks per rank form a V)."""
    pipeline_schedule: PipelineSchedule | None = None
    """The pipeline schedule (perfmodel extension of the contract): 1f1b, interleaved, zb-h1,
    zb-h2, zb-v, dualpipe or dualpipe-v. null = Megatron-Core's choice, 1f1b when vpp = 1 and
    interleaved when vpp > 1. What each needs of pp, vpp and the micro-batches is in
    ``perfmodel.engine.rules``; its bubble, memory and overlap in ``perfmodel.formulas.pipeline``."""
    cp: int_field(MAX_NUM_GPUS) = 1
    """Context parallel degree."""
    ep: int_field(MAX_NUM_GPUS) = 1
    """Expert parallel degree (carved out of dp * cp)."""
    etp: int_field(MAX_NUM_GPUS) = 1
    """Tensor parallel degree inside experts."""
    sequence_parallel: StrictBool | None = None
    """Megatron sequence parallelism; null = (tp > 1)."""
    zero_stage: int_choice(0, 1, 2, 3) = 0
    """0 none, 1 optimizer states, 2 + gradients, 3 + parameters (FSDP)."""

    @property
    def sp(self) -> bool:
        return self.tp > 1 if self.sequence_parallel is None else self.sequence_parallel

    @property
    def schedule(self) -> str:
        """The schedule in force: ``pipeline_schedule``, or the default for ``vpp``."""
        return self.pipeline_schedule or default_schedule(self.vpp)


class Scenario(_Frozen):
    name: Name = "scenario"
    hardware: Name | HardwareSpec
    """Id of hardware/<id>.yaml, or an inline spec (a mapping in the hardware YAML format). A
    path to a hardware YAML file is read by ``load_scenario`` (a file the user names) and
    inlined; a parsed mapping (a link, an upload) never opens a file."""
    num_gpus: int_field(MAX_NUM_GPUS)
    model: Name | ModelSpec
    """A preset id, or an inline mapping. A path to a Hugging Face config.json is read by
    ``load_scenario`` only, and inlined."""
    seq_length: int_field(MAX_SEQ_LENGTH)
    global_batch_size: int_field(MAX_GLOBAL_BATCH_SIZE)
    """Sequences per optimizer step."""
    micro_batch_size: int_field(MAX_GLOBAL_BATCH_SIZE) = 1
    parallelism: Parallelism = Field(default_factory=Parallelism)
    recompute: Recompute = "none"
    precision: Precision = "bf16"
    software: SoftwareStack = Field(default_factory=SoftwareStack)
    """How the framework runs the job (``perfmodel.spec.software``; perfmodel extension of the
    contract). Its options used to sit at the top level; a scenario that still has them there
    loads, with a one-line note that they moved."""
    training_tokens: real_field(MAX_TRAINING_TOKENS) | None = None
    """Optional: enables time to train, GPU-hours, cost and energy."""
    reliability: FailureModel = Field(default_factory=FailureModel)
    """Failures, restarts and checkpoints (perfmodel extension; every key optional, sourced
    defaults in ``perfmodel.spec.reliability``)."""
    startup: Startup = Field(default_factory=Startup)
    """Launch, compilation and warm-up, once per run (``perfmodel.spec.startup``)."""
    input_pipeline: InputPipeline = Field(default_factory=InputPipeline)
    """Storage read and data-loader throughput per GPU (``perfmodel.spec.input_pipeline``)."""
    cost: CostModel = Field(default_factory=CostModel)
    """How a GPU-hour is priced: cloud rental or owned hardware (``perfmodel.spec.cost``)."""
    purpose: Purpose = Field(default_factory=Purpose)
    """The run's targets, a value of time, a deadline, a budget (``perfmodel.spec.purpose``): the
    defaults of ``scale`` and ``size``."""
    studies: Studies = Field(default_factory=Studies)
    """How the studies look at the job: the batch limit sizing may grow to, and the options of
    ``search``, ``scale`` and ``size`` (``perfmodel.spec.studies``), so a link carries them."""
    fabric: FabricSpec | None = None
    """The scale-out network bought for the job (``perfmodel.spec.fabric``): its bill of
    materials, and its oversubscription slowing the collectives that cross it. None: a
    non-blocking network, as the hardware spec's bandwidths describe."""
    facility: Facility = Field(default_factory=Facility)
    """The site's power envelope and PUE (``perfmodel.spec.facility``): the GPUs ``size`` may
    place there."""

    @model_validator(mode="before")
    @classmethod
    def _software_options_moved(cls, data):
        """Read the software options where they used to be (the top level), with a note."""
        if not isinstance(data, dict):
            return data
        moved = [k for k in SOFTWARE_FIELDS if k in data]
        if not moved:
            return data
        software = data.get("software", {})
        if not isinstance(software, dict):
            return data   # the field's own validation says what is wrong
        both = [k for k in moved if k in software]
        if both:
            raise ValueError(f"{both[0]} is given both at the top level and under software; keep the one "
                             f"under software")
        warnings.warn(MovedKeysNote(moved), stacklevel=2)
        rest = {k: v for k, v in data.items() if k not in moved}
        return {**rest, "software": {**software, **{k: data[k] for k in moved}}}

    @field_validator("hardware", mode="before")
    @classmethod
    def _hardware_by_id_or_inline(cls, v):
        if isinstance(v, str):
            if v not in list_hardware_ids():
                raise ValueError(_reason(lambda: load_hardware(v)))
            return v
        if isinstance(v, dict):
            return _checked(lambda: parse_hardware(v, "hardware"))
        return v

    @field_validator("model", mode="before")
    @classmethod
    def _model_by_preset_or_inline(cls, v):
        if isinstance(v, str):
            from perfmodel.spec.presets import list_presets, load_model
            if v not in list_presets():
                raise ValueError(_reason(lambda: load_model(v)))
        return v


def _reason(call) -> str:
    """The reason of the InputError ``call()`` raises (the field name is pydantic's to add)."""
    try:
        call()
    except InputError as exc:
        return exc.reason
    return "invalid"


def _checked(call):
    """``call()``, with an InputError turned into the ValueError pydantic reports under the field."""
    try:
        return call()
    except InputError as exc:
        raise ValueError(str(exc).split(": ", 1)[1] if str(exc).startswith("hardware: ") else str(exc)) from None


def hardware_of(s: Scenario) -> HardwareSpec:
    """The scenario's hardware spec: the catalogue's for an id, else the inline spec."""
    return s.hardware if isinstance(s.hardware, HardwareSpec) else load_hardware(s.hardware)


def hardware_id(s: Scenario) -> str:
    """The id of the scenario's hardware (an inline spec's own ``id``)."""
    return s.hardware.id if isinstance(s.hardware, HardwareSpec) else s.hardware


def model_of(s: Scenario) -> ModelSpec:
    """The scenario's model: the preset for an id, else the inline spec."""
    from perfmodel.spec.presets import load_model
    return s.model if isinstance(s.model, ModelSpec) else load_model(s.model)


def parse_scenario(data: dict) -> Scenario:
    return validated(Scenario, data, "scenario")


def inline_local_files(data: dict, base: Path | None = None) -> dict:
    """A scenario mapping with the files it names read and inlined: ``hardware`` as a path to a
    hardware YAML, ``model`` as a path to a Hugging Face config.json. For files the person
    running perfmodel names (their scenario file, their Python mapping); relative paths are
    looked up beside the scenario file first, then in the working directory. ``parse_scenario``
    itself never opens a file."""
    def local(ref: str) -> Path:
        p = Path(ref)
        beside = None if p.is_absolute() or base is None else base / p
        try:
            return beside if beside is not None and beside.is_file() else p
        except (OSError, ValueError):   # a name the file system refuses (too long, a NUL): the reader says why
            return p

    out = dict(data)
    hw = out.get("hardware")
    if isinstance(hw, str) and hw.endswith((".yaml", ".yml")) and hw not in list_hardware_ids():
        out["hardware"] = load_hardware_file(local(hw))
    model = out.get("model")
    if isinstance(model, str) and model.endswith(".json"):
        from perfmodel.spec.presets import load_model_file
        out["model"] = load_model_file(local(model))
    return out


def load_scenario(path: str | Path) -> Scenario:
    """A scenario file the user names; hardware and model files it names are read and inlined."""
    data = read_data_file(path, "scenario")
    if isinstance(data, dict):
        data = inline_local_files(data, Path(path).parent)
    return parse_scenario(data)


RUN_SECTIONS = ("reliability", "startup", "input_pipeline", "cost", "purpose", "studies", "facility")
"""Scenario sections about the run rather than the step; written with only the keys that differ
from their defaults, and left out when none does."""


def scenario_to_dict(s: Scenario) -> dict:
    """Plain mapping in the contract's field names (for YAML export and round trips).

    ``software`` names its stack and only the options that differ from it
    (``perfmodel.spec.software.software_to_dict``). The run sections (``RUN_SECTIONS``) keep only
    what differs from their defaults."""
    d = s.model_dump(mode="json", exclude_none=True, exclude=set(RUN_SECTIONS))
    d["software"] = software_to_dict(s.software)
    for name in RUN_SECTIONS:
        section = getattr(s, name).model_dump(mode="json", exclude_defaults=True)
        if section:
            d[name] = section
    return d


def pipeline_stages(s: Scenario) -> tuple[str, ...] | None:
    """The scenario's pipeline layout as virtual stages (``perfmodel.spec.pipeline_layout.parse``)."""
    return s.software.pipeline_stages


