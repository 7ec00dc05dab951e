"""A job as the formulas take it: a scenario bound to its model, hardware, efficiencies and
software stack, everything but the parallel layout (which the engine varies as arrays).

``bind`` is the one place a scenario's fields become a ``Job``; the layout search binds the same
scenario at other GPU counts and precisions. ``scenario_layouts`` is the scenario's own layout as
a batch of one. ``shared_job`` is the one job that every GPU count of a study shares for the
work that depends on the layer shapes alone.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace

from pydantic import BaseModel

from perfmodel.formulas.fabric import for_job, host_gpus, with_fabric
from perfmodel.formulas.layouts import Layouts, layouts_for
from perfmodel.formulas.pipeline import schedule_code
from perfmodel.formulas.placement import placed
from perfmodel.formulas.power import capped
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.input_pipeline import InputPipeline
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.reliability import FailureModel
from perfmodel.spec.scenario import Scenario
from perfmodel.spec.software import SoftwareStack
from perfmodel.spec.startup import Startup


@dataclass(frozen=True)
class Job:
    """Everything about a training job except its parallel layout."""

    model: ModelSpec
    hardware: HardwareSpec
    """The job's view of the hardware: its scale-up domain holds the GPUs the job places there
    (``perfmodel.formulas.placement``)."""
    efficiency: Efficiencies
    """The efficiencies in force: a calibration profile's, or the hardware spec's."""
    software: SoftwareStack
    seq_length: int
    global_batch_size: int
    num_gpus: int
    precision: str
    recompute: str
    training_tokens: float | None
    reliability: FailureModel
    """Failures, restarts and checkpoints: the goodput of the run (``perfmodel.formulas.goodput``)."""
    startup: Startup
    input_pipeline: InputPipeline
    """What feeds the GPUs their tokens (the step's ``data_wait``)."""

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch_size * self.seq_length


def bind(scenario: Scenario, model: ModelSpec, hardware: HardwareSpec, efficiency: Efficiencies, *,
         num_gpus: int | None = None, precision: str | None = None) -> Job:
    """The scenario as a ``Job`` (at another GPU count or precision where given: the search's)."""
    n = scenario.num_gpus if num_gpus is None else num_gpus
    reserved = scenario.software.moe_comm_reserved_sms
    if reserved >= hardware.gpu.num_sms:
        raise InputError("software.moe_comm_reserved_sms", f"{reserved} SMs reserved for communication leave "
                                                           f"none of the GPU's num_sms({hardware.gpu.num_sms})")
    hardware = capped(hardware, scenario.facility.gpu_power_cap_w)
    if scenario.fabric is not None:
        fabric = for_job(scenario.fabric, n, host_gpus(hardware), hardware.scale_out.nics_per_gpu)
        hardware = with_fabric(hardware, fabric)
    return Job(model=model, hardware=_placed(hardware, n), efficiency=efficiency, software=scenario.software,
               seq_length=scenario.seq_length, global_batch_size=scenario.global_batch_size, num_gpus=n,
               precision=scenario.precision if precision is None else precision, recompute=scenario.recompute,
               training_tokens=scenario.training_tokens, reliability=scenario.reliability, startup=scenario.startup,
               input_pipeline=scenario.input_pipeline)


PLACED = 64
"""Hardware placements kept (``_placed``)."""
_placements: OrderedDict = OrderedDict()


def _placed(hardware: HardwareSpec, n: int) -> HardwareSpec:
    """``placed(hardware, n)``, the same object for the same hardware object and GPU count: the
    jobs a search binds at one count (one per precision and recompute mode) then share their
    hardware by identity, and so what is worked out per identity (``engine.block.blocks_shared``)."""
    key = (id(hardware), n)
    hit = _placements.get(key)
    if hit is None or hit[0] is not hardware:
        if len(_placements) >= PLACED:
            _placements.popitem(last=False)
        hit = _placements[key] = (hardware, placed(hardware, n))
    return hit[1]


def scenario_layouts(scenario: Scenario) -> Layouts:
    """The scenario's own layout as a batch of one (dp and the micro-batch count from their
    home, ``perfmodel.formulas.layouts.layouts_for``)."""
    p, s = scenario.parallelism, scenario
    return layouts_for(
        s.num_gpus, s.global_batch_size,
        tp=[p.tp], pp=[p.pp], vpp=[p.vpp], cp=[p.cp], ep=[p.ep], etp=[p.etp], sp=[p.sp],
        zero_stage=[p.zero_stage], mbs=[s.micro_batch_size], schedule=[schedule_code(p.schedule)],
    )


SHARED_JOBS = 64
"""Jobs kept by ``shared_job`` (the least recently used go first)."""
_shared_jobs: OrderedDict = OrderedDict()
_seen_jobs: dict = {}
"""(id of a job, recompute) -> (the job, held so that its id stays its own; its ``shared_job``):
a search asks for the same job's once per chunk, and working out the hardware's identity
(``_identity``, field by field) each time cost about 3% of a ``size``."""


def _identity(x):
    """What tells ``x`` apart for ``shared_job``: a model's fields, each by value where it is
    hashable and by identity where not (a copy that changes one field shares the others)."""
    if isinstance(x, BaseModel):
        return type(x), tuple((k, _identity(v)) for k, v in x.__dict__.items())
    try:
        hash(x)
    except TypeError:
        return "id", id(x)
    return x


_hardware_identities: dict = {}
"""id of a hardware object -> (it, held so that its id stays its own; its ``_identity``): the jobs
a search binds per recompute mode and precision share their hardware object (``_placed``)."""


def _hardware_identity(hardware: HardwareSpec):
    """``_identity(hardware)``, worked out once per hardware object (frozen: its fields stay)."""
    hit = _hardware_identities.get(id(hardware))
    if hit is None or hit[0] is not hardware:
        if len(_hardware_identities) >= SHARED_JOBS:
            _hardware_identities.pop(next(iter(_hardware_identities)))
        hit = _hardware_identities[id(hardware)] = (hardware, _identity(hardware))
    return hit[1]


def shared_job(c: Job, *, recompute: bool) -> Job:
    """One ``Job`` for every job that the per-shape parts (a layer's time, the output layer's,
    the floors' parts) cannot tell apart: the same model, software, efficiencies, sequence
    length and precision (and recompute, where ``recompute``) on the same hardware as placed,
    whatever the GPU count, batch, tokens, failures, start-up and input pipeline. Those fields
    are None in it, so that a part that read one would fail rather than be shared wrongly;
    their memos (``perfmodel.engine.distinct``, keyed by the job's identity) then serve every
    GPU count and every batch of a study on the hardware that places it alike. Held, so that
    the identities in the key stay theirs."""
    seen = _seen_jobs.get((id(c), recompute))
    if seen is not None and seen[0] is c:       # the same job object as a call before: its answer
        return seen[1]
    key = (id(c.model), _hardware_identity(c.hardware), id(c.efficiency), id(c.software), c.seq_length,
           c.precision, c.recompute if recompute else None)
    job = _shared_jobs.get(key)
    if job is None:
        if len(_shared_jobs) >= SHARED_JOBS:
            _shared_jobs.popitem(last=False)
        job = _shared_jobs[key] = replace(c, num_gpus=None, global_batch_size=None, training_tokens=None,
                                          reliability=None, startup=None, input_pipeline=None,
                                          recompute=c.recompute if recompute else None)
    else:
        _shared_jobs.move_to_end(key)
    if len(_seen_jobs) >= SHARED_JOBS:
        _seen_jobs.pop(next(iter(_seen_jobs)))
    _seen_jobs[id(c), recompute] = (c, job)
    return job
