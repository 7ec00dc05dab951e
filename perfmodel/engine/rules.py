"""The one rule set of a runnable job: what ``predict``, ``search``, ``scale``, ``size`` and the
app all apply, so a layout the search returns is one predict accepts, with the same numbers.

``layout_violations`` holds the contract's layout rules over arrays of layouts (each
rule's message shows the arithmetic); ``check_job`` the rules on the job whatever its layout;
``recompute_violation`` the fields scoped to one recompute mode; ``with_recompute`` how those
fields follow a recompute mode the search tries; ``resolve`` all of them for one scenario.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perfmodel.engine.distinct import row_groups
from perfmodel.engine.job import Job, bind, scenario_layouts
from perfmodel.formulas import pipeline
from perfmodel.formulas.layouts import Layouts, data_parallel_size, micro_batches
from perfmodel.formulas.scalars import any_of, negated
from perfmodel.spec import pipeline_layout
from perfmodel.spec.efficiency import Efficiencies
from perfmodel.spec.errors import InputError
from perfmodel.spec.hardware import HardwareSpec
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.scenario import Scenario, hardware_of, model_of, pipeline_stages
from perfmodel.spec.software import selective_modules

PIPELINE_EXTRA_UNITS = 2
"""Embedding and loss, each placeable as a pipeline unit of its own (Megatron-Core)."""


def _indivisible(a, b):
    """True where ``a`` does not divide ``b`` (element-wise; a > 0; on numbers, a bool)."""
    return b % a != 0


def _name(code: int) -> str:
    return pipeline.schedule_name(code)


def _need_text(rec, pp: int) -> str:
    """``2 * pp(4) - 1 = 7``: the micro-batches a schedule needs (its record), with the arithmetic."""
    a, b = rec.min_micro_batches_per_pp, rec.min_micro_batches_offset
    text = f"{a} * pp({pp})" if a > 1 else f"pp({pp})"
    text += f" - {-b}" if b < 0 else (f" + {b}" if b > 0 else "")
    return text + (f" = {rec.min_micro_batches(pp)}" if a > 1 or b else "")


def schedule_rules(rule, sched, pp, vpp, pipeline_stages: int) -> None:
    """What each pipeline schedule needs of the layout (its record; ``layout_violations``' ``rule``)."""
    if np.array_equal(sched, pipeline.default_schedule_code(vpp)):
        return                             # each layout's default: nothing to check
    field = "parallelism.pipeline_schedule"
    prop = lambda name: pipeline.schedule_property(sched, name)   # noqa: E731
    own = prop("megatron_order")
    rule(field, ~own & (pp == 1), lambda s: f"{_name(s)} is a pipeline schedule: it needs pp > 1 (pp = 1)", s=sched)
    chunks = prop("chunks_per_rank")
    v_shaped = prop("v_shaped")
    rule(field, np.equal(chunks, 1) & (vpp != 1),
         lambda s, vpp: f"{_name(s)} runs one model chunk per rank: it needs vpp = 1 (vpp = {vpp})", s=sched, vpp=vpp)
    rule(field, np.equal(chunks, None) & (vpp == 1),
         lambda s: f"{_name(s)} runs several model chunks per rank: it needs vpp > 1 (vpp = 1)", s=sched)
    rule(field, v_shaped & (vpp != np.where(v_shaped, chunks, 0).astype(np.int64)),
         lambda s, vpp: f"{_name(s)} runs two model chunks per rank in a V: it needs vpp = 2 (vpp = {vpp})",
         s=sched, vpp=vpp)
    # DualPipe runs two directions of pp/2 ranks each (deepseek-ai/DualPipe, dualpipe.py: num_ranks % 2 == 0)
    rule(field, prop("bidirectional") & (pp % 2 == 1),
         lambda s, pp: f"{_name(s)} feeds micro-batches in from both ends: it needs an even pp (pp = {pp})",
         s=sched, pp=pp)
    if pipeline_stages:
        # DualPipe runs stage r and stage pp - 1 - r of the layout on rank r (pipeline_layout.mirrored).
        rule(field, v_shaped,
             lambda s: f"{_name(s)} places its stages in its own order; pipeline_layout places virtual stage k on "
                       f"rank k mod pp (Megatron-Core): drop one of them", s=sched)


def schedule_batch_rules(rule, sched, pp, num_mb) -> None:
    """The micro-batches each schedule needs to fill its pipeline (its record; ``layout_violations``).

    Qi et al. 2023 sec. 2: ZB-H1 warms up like 1F1B (p micro-batches), ZB-H2 with 2p - 1 on the
    first rank; ZB-V with 2p - 1 on its first chunk (PyTorch ScheduleZBVZeroBubble);
    deepseek-ai/DualPipe: num_chunks >= 2 * num_ranks, and even for DualPipe (half each way)."""
    field = "global_batch_size"
    rule(field, pipeline.schedule_property(sched, "micro_batches_multiple_of_pp") & _indivisible(pp, num_mb),
         lambda s, num_mb, pp: f"{_name(s)} schedule needs micro-batches({num_mb}) to be a multiple of pp({pp})",
         s=sched, num_mb=num_mb, pp=pp)
    if pipeline.only_defaults(sched):
        return
    per_pp = pipeline.schedule_property(sched, "min_micro_batches_per_pp")
    need = per_pp * pp + pipeline.schedule_property(sched, "min_micro_batches_offset")
    even = pipeline.schedule_property(sched, "bidirectional")
    rule(field, (per_pp > 0) & ((num_mb < need) | (even & (num_mb % 2 == 1))),
         lambda s, m, pp: (f"{_name(s)} needs an even number of micro-batches >= {_need_text(pipeline.schedule_of(s), pp)}; "
                           f"micro-batches = {m}" if pipeline.schedule_of(s).bidirectional else
                           f"{_name(s)} needs micro-batches({m}) >= {_need_text(pipeline.schedule_of(s), pp)}"),
         s=sched, m=num_mb, pp=pp)


@dataclass(frozen=True)
class Violations:
    """The first rule each layout of a batch breaks: ``code`` is -1 where the layout can run,
    else the index of its (field, reason) in ``fields`` and ``reasons`` (each distinct reason
    once, with the arithmetic)."""

    code: np.ndarray
    fields: tuple[str, ...]
    reasons: tuple[str, ...]

    @property
    def ok(self) -> np.ndarray:
        return self.code < 0

    def as_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(field, reason) object arrays, ``''`` where the layout can run."""
        field = np.array(("",) + self.fields, dtype=object)[self.code + 1]
        return field, np.array(("",) + self.reasons, dtype=object)[self.code + 1]


def layout_violations(model: ModelSpec, hw: HardwareSpec, seq_length: int, global_batch_size, num_gpus,
                      precision: str, *, tp, pp, vpp, cp, ep, etp, sp, micro_batch_size, schedule=None,
                      activation_offload_layers: int = 0, pipeline_stages: int = 0) -> Violations:
    """The layout rules of the scenario contract, over arrays of layouts.

    Every argument after ``precision`` is an integer (``sp``: boolean) array; ``num_gpus`` and
    ``global_batch_size`` may be scalars or arrays; ``schedule``: pipeline schedule codes
    (``perfmodel.formulas.pipeline.schedule_code``), None = each layout's default. Returns the
    first rule each layout breaks, with the arithmetic (``Violations``). This is the only home
    of the rules: ``check_layout`` calls it on a batch of one.
    """
    if schedule is None:
        schedule = pipeline.default_schedule_code(vpp)
    a = dict(tp=tp, pp=pp, vpp=vpp, cp=cp, ep=ep, etp=etp, mbs=micro_batch_size, n=num_gpus, gbs=global_batch_size,
             s=schedule)
    if type(sp) is bool and all(type(v) is int for v in a.values()):
        # one layout of Python numbers (``check_layout``): the same rules on them, a batch of one
        shape, ok = (1,), True
    else:
        a = {k: np.atleast_1d(np.asarray(v, dtype=np.int64)) for k, v in a.items()}
        shape = np.broadcast_shapes(*(v.shape for v in a.values()), np.shape(np.atleast_1d(sp)))
        a = {k: v if v.shape == shape else np.broadcast_to(v, shape) for k, v in a.items()}
        sp = np.broadcast_to(np.atleast_1d(np.asarray(sp, dtype=bool)), shape)
        ok = np.ones(shape, dtype=bool)
    tp, pp, vpp, cp, ep, etp, mbs, n, gbs = (a[k] for k in ("tp", "pp", "vpp", "cp", "ep", "etp", "mbs", "n", "gbs"))
    sched = a["s"]
    code = np.full(shape, -1, dtype=np.int64)
    fields, reasons = [], []

    def rule(name, broken, message, **cols):
        """Record ``message(**cols)`` where ``broken`` and no earlier rule fired."""
        nonlocal ok
        bad = ok & broken
        if not any_of(bad):
            return
        idx = np.flatnonzero(bad)
        keys = [np.broadcast_to(v, shape).ravel()[idx] for v in cols.values()] or [np.zeros(idx.size, dtype=np.int64)]
        first, inverse = row_groups(keys)
        # format each distinct combination once, then scatter (no per-layout Python)
        code.ravel()[idx] = len(reasons) + inverse
        reasons.extend(message(**{k: int(v[i]) for k, v in zip(cols, keys)}) for i in first)
        fields.extend([name] * len(first))
        ok = ok & negated(bad)

    model_par = tp * pp * cp
    rule("num_gpus", _indivisible(model_par, n),
         lambda tp, pp, cp, n: f"tp({tp}) * pp({pp}) * cp({cp}) = {tp * pp * cp} does not divide num_gpus({n})",
         tp=tp, pp=pp, cp=cp, n=n)
    dp = data_parallel_size(n, tp, pp, cp)
    m_heads, m_kv = model.num_attention_heads, model.kv_heads
    rule("parallelism.tp", _indivisible(tp, m_heads),
         lambda tp: f"tp({tp}) does not divide num_attention_heads({m_heads})", tp=tp)
    if model.mla is None:
        rule("parallelism.tp", _indivisible(tp, m_kv) & _indivisible(m_kv, tp),
             lambda tp: f"tp({tp}) and num_query_groups({m_kv}) do not divide one another", tp=tp)
    s = seq_length
    rule("parallelism.cp", _indivisible(cp, s), lambda cp: f"cp({cp}) does not divide seq_length({s})", cp=cp)
    rule("parallelism.sequence_parallel", sp & _indivisible(tp, s // cp),
         lambda cp, tp: f"seq_length({s}) / cp({cp}) = {s / cp:g} is not divisible by tp({tp})", cp=cp, tp=tp)
    rule("parallelism.vpp", (vpp > 1) & (pp == 1),
         lambda vpp, pp: f"vpp({vpp}) > 1 needs pp > 1 (pp = {pp})", vpp=vpp, pp=pp)
    schedule_rules(rule, sched, pp, vpp, pipeline_stages)
    # Megatron-Core can count the embedding and the loss as one pipeline "layer" each
    # (account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split), so
    # pp * vpp model chunks need at least num_layers + 2 such units (e.g. Llama 3.1 405B:
    # 126 layers on pp16 x vpp8 = 128 chunks in Megatron-Bridge's recipe).
    units = model.num_layers + PIPELINE_EXTRA_UNITS
    rule("parallelism.pp", pp * vpp > units,
         lambda pp, vpp: f"pp({pp}) * vpp({vpp}) = {pp * vpp} exceeds num_layers({units - PIPELINE_EXTRA_UNITS}) + "
                         f"embedding + loss = {units} pipeline units", pp=pp, vpp=vpp)
    if pipeline_stages:
        rule("parallelism.pp", pp * vpp != pipeline_stages,
             lambda pp, vpp: f"pipeline_layout has {pipeline_stages} virtual stages; pp({pp}) * vpp({vpp}) = "
                             f"{pp * vpp}", pp=pp, vpp=vpp)
    if activation_offload_layers:
        n_off = activation_offload_layers
        rule("parallelism.pp", pp > 1,
             lambda pp: f"activation_offload_layers({n_off}) needs pp = 1 (Megatron-Core offloads activations "
                        f"only without pipeline parallelism); pp = {pp}", pp=pp)
    if model.moe is None:
        rule("parallelism.ep", (ep > 1) | (etp > 1),
             lambda ep, etp: f"ep({ep}) and etp({etp}) need an MoE model", ep=ep, etp=etp)
    else:
        experts = model.moe.num_experts
        rule("parallelism.ep", _indivisible(ep, experts),
             lambda ep: f"ep({ep}) does not divide moe.num_experts({experts})", ep=ep)
        # Megatron-Core ModelParallelConfig.__post_init__ (megatron/core/model_parallel_config.py):
        # "When using expert parallelism and tensor parallelism, sequence parallelism must be used"
        rule("parallelism.sequence_parallel", (ep > 1) & (tp > 1) & negated(sp),
             lambda ep, tp: f"ep({ep}) with tp({tp}) needs sequence parallelism (Megatron-Core)", ep=ep, tp=tp)
        rule("parallelism.ep", _indivisible(ep * etp, dp * cp * tp),
             lambda ep, etp, dp, cp, tp: (f"ep({ep}) * etp({etp}) = {ep * etp} does not divide "
                                          f"dp({dp}) * cp({cp}) * tp({tp}) = {dp * cp * tp}"),
             ep=ep, etp=etp, dp=dp, cp=cp, tp=tp)
    per_step = mbs * dp
    rule("global_batch_size", _indivisible(per_step, gbs),
         lambda mbs, dp, gbs: (f"micro_batch_size({mbs}) * dp({dp}) = {mbs * dp} does not divide "
                               f"global_batch_size({gbs})"),
         mbs=mbs, dp=dp, gbs=gbs)
    num_mb = micro_batches(gbs, mbs, dp)
    schedule_batch_rules(rule, sched, pp, num_mb)
    if not hw.gpu.supports(precision):
        name = hw.gpu.name
        rule("precision", np.ones(shape, dtype=bool),
             lambda: f"{name} has no dense {precision} tensor-core peak")
    return Violations(code, tuple(fields), tuple(reasons))


def layout_violation_fields(model: ModelSpec, hw: HardwareSpec, seq_length: int, global_batch_size,
                            num_gpus, precision: str, **layout) -> tuple[np.ndarray, np.ndarray]:
    """``layout_violations`` as ``(field, reason)`` object arrays: ``''`` where the layout can
    run, else the first rule it breaks, with the arithmetic."""
    return layout_violations(model, hw, seq_length, global_batch_size, num_gpus, precision, **layout).as_arrays()


def layout_violation(model: ModelSpec, hw: HardwareSpec, seq_length: int, global_batch_size, num_gpus,
                     precision: str, *, tp, pp, vpp, cp, ep, etp, sp, micro_batch_size, schedule=None,
                     activation_offload_layers: int = 0, pipeline_stages: int = 0) -> np.ndarray:
    """Reason each layout cannot run (``''`` = valid); see ``layout_violation_fields``."""
    return layout_violation_fields(model, hw, seq_length, global_batch_size, num_gpus, precision, tp=tp,
                                   pp=pp, vpp=vpp, cp=cp, ep=ep, etp=etp, sp=sp,
                                   micro_batch_size=micro_batch_size, schedule=schedule,
                                   activation_offload_layers=activation_offload_layers,
                                   pipeline_stages=pipeline_stages)[1]


def layout_rule_fields(s: Scenario) -> dict:
    """The scenario fields beyond the layout itself that the layout rules read: the keyword
    arguments every caller of ``layout_violation(_fields)`` passes for this scenario."""
    return {"activation_offload_layers": s.software.activation_offload_layers,
            "pipeline_stages": len(pipeline_stages(s) or ())}


def check_layout(s: Scenario, m: ModelSpec, hw: HardwareSpec) -> tuple[int, int]:
    """Check that the layout divides; return (dp, micro-batches). Raises InputError.

    ZeRO over a single data-parallel rank is legal and simply shards nothing.
    """
    p = s.parallelism
    v = layout_violations(
        m, hw, s.seq_length, s.global_batch_size, s.num_gpus, s.precision, tp=p.tp, pp=p.pp, vpp=p.vpp,
        cp=p.cp, ep=p.ep, etp=p.etp, sp=p.sp, micro_batch_size=s.micro_batch_size,
        schedule=pipeline.schedule_code(p.schedule), **layout_rule_fields(s))
    if (c := int(v.code[0])) >= 0:  # the first rule it breaks, read without ``as_arrays``' object arrays
        raise InputError(v.fields[c], v.reasons[c])
    dp = int(data_parallel_size(s.num_gpus, p.tp, p.pp, p.cp))
    return dp, int(micro_batches(s.global_batch_size, s.micro_batch_size, dp))


def check_job(s: Scenario, m: ModelSpec) -> None:
    """The rules on a job that hold whatever its layout and recompute mode: the pipeline layout
    against the model, and the recompute and offload fields against the model (Megatron-Core's
    own rules, in ``TransformerConfig.__post_init__``). ``resolve`` (predict) and the layout
    search both call this, so a layout the search returns is one predict accepts. Raises
    InputError."""
    stages = pipeline_stages(s)
    if stages is not None:
        pipeline_layout.validate(stages, m.num_layers, m.mtp_layers)
        if m.moe is not None and m.moe.interleave_step > 1:
            raise InputError("software.pipeline_layout", f"is not supported with moe.interleave_step "
                             f"({m.moe.interleave_step}); drop it for an even split")
    # Checked whatever ``recompute`` says: the layout search tries selective recompute too.
    policy = s.software.selective_recompute
    owner = {"op_sac": "torchtitan's policy for its dense Llama block",
             "save_qkv_proj": "MaxText's policy for dense decoder layers with Q, K and V projections"}
    if policy in owner and (m.moe is not None or m.mla is not None):
        raise InputError("software.selective_recompute", f"{policy} is {owner[policy]}; "
                                                f"{m.name} has {'MoE' if m.moe is not None else 'MLA'} layers")
    if not isinstance(policy, str):
        if not policy:
            raise InputError("software.selective_recompute", "an empty module list recomputes nothing; "
                                                    "use recompute: none")
        needs = {"mla_up_proj": (m.mla is not None, "multi-latent attention"),
                 "moe_act": (m.moe is not None, "MoE layers"), "moe": (m.moe is not None, "MoE layers"),
                 "shared_experts": (m.moe is not None and m.moe.num_shared_experts > 0, "shared experts"),
                 "mlp": (m.num_dense_mlp_layers > 0, "dense-MLP layers")}
        for name in selective_modules(policy):
            has, what = needs.get(name, (True, ""))
            if not has:
                raise InputError("software.selective_recompute", f"module {name} recomputes {what}; {m.name} has none")
    n = s.software.activation_offload_layers
    if n and n >= m.num_layers:
        raise InputError("software.activation_offload_layers", f"{n} must be less than num_layers({m.num_layers}) "
                                                      f"(Megatron-Core)")


def recompute_violation(s: Scenario, recompute: str) -> tuple[str, str] | None:
    """(field, reason) where the scenario's recompute-scoped fields cannot go with ``recompute``
    (the scenario's own, or one the layout search tries), else None."""
    if s.software.recompute_num_layers is not None and recompute != "full":
        return "software.recompute_num_layers", f"applies to recompute: full (block method); recompute is {recompute}"
    if s.software.activation_offload_layers and recompute != "none":
        return "software.activation_offload_layers", (f"Megatron-Core offloads activations only without recompute; "
                                             f"recompute is {recompute}")
    return None


def check_recompute(s: Scenario, m: ModelSpec) -> None:
    """``check_job`` and the scenario's own recompute mode against its recompute-scoped fields."""
    check_job(s, m)
    bad = recompute_violation(s, s.recompute)
    if bad:
        raise InputError(*bad)


def with_recompute(scenario: Scenario, recompute: str) -> Scenario:
    """The scenario with another recompute mode; ``software.recompute_num_layers`` (the block
    method of full recompute) goes with ``full`` and is dropped for the other modes, which have
    no blocks."""
    if recompute == "full" or scenario.software.recompute_num_layers is None:
        return scenario.model_copy(update={"recompute": recompute})
    software = scenario.software.model_copy(update={"recompute_num_layers": None})
    return scenario.model_copy(update={"recompute": recompute, "software": software})


@dataclass(frozen=True)
class Resolved:
    """A scenario that passed every rule: its job and its own layout (a batch of one)."""

    scenario: Scenario
    job: Job
    layouts: Layouts

    @property
    def model(self):
        return self.job.model

    @property
    def hardware(self):
        """The job's view of the hardware (its placement in scale-up domains)."""
        return self.job.hardware

    @property
    def dp(self) -> int:
        return int(self.layouts.dp[0])

    @property
    def num_microbatches(self) -> int:
        """Micro-batches per pipeline per step = global_batch / (micro_batch * dp)."""
        return int(self.layouts.num_mb[0])


def resolve(s: Scenario, efficiency: Efficiencies | None = None) -> Resolved:
    """Bind the scenario to its hardware, model and efficiencies (None: the hardware spec's) and
    check every rule. Raises InputError with the first rule the scenario breaks."""
    hw, m = hardware_of(s), model_of(s)
    check_recompute(s, m)
    check_layout(s, m, hw)
    return Resolved(scenario=s, job=bind(s, m, hw, efficiency or hw.efficiency), layouts=scenario_layouts(s))
