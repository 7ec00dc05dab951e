"""Scenario: one training job to predict (format: shared/contracts/scenario.md).

``load_scenario`` turns YAML into a frozen ``Scenario``; ``resolve`` binds it to a
``HardwareSpec`` and a ``ModelSpec`` and checks that the layout can run, raising
``InputError("<field>", "<arithmetic>")`` otherwise. Nothing is silently adjusted.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StringConstraints, field_validator

from perfmodel.spec import pipeline_layout
from perfmodel.spec.errors import InputError, read_data_file, validated
from perfmodel.spec.hardware import HardwareSpec, list_hardware_ids, load_hardware, load_hardware_file, parse_hardware
from perfmodel.spec.limits import (MAX_FSDP_COLLECTIVES_PER_LAYER, MAX_GLOBAL_BATCH_SIZE, MAX_NUM_GPUS,
                     MAX_NUM_LAYERS, MAX_PIPELINE_LAYOUT_CHARS, MAX_SEQ_LENGTH, MAX_TRAINING_TOKENS,
                     MAX_VIRTUAL_STAGES, Name, int_choice, int_field, real_field)
from perfmodel.spec.model import ModelSpec
from perfmodel.formulas.overlap import Overlap

Recompute = Literal["none", "selective", "full"]
Precision = Literal["bf16", "fp16", "fp8", "fp4"]
PIPELINE_EXTRA_UNITS = 2
"""Embedding and loss, each placeable as a pipeline unit of its own (Megatron-Core)."""
AttentionBackend = Literal["flash", "unfused"]
MoeDispatcher = Literal["alltoall", "flex"]
ElementwiseKernels = Literal["fused", "eager"]
SelectiveRecompute = Literal["core_attn", "op_sac", "save_qkv_proj"]
RecomputeModule = Literal["core_attn", "layernorm", "mla_up_proj", "moe_act", "mlp", "moe", "shared_experts"]
CrossEntropy = Literal["fused", "eager_fp32"]
RECOMPUTE_CHOICES: tuple[str, ...] = get_args(Recompute)
PRECISION_CHOICES: tuple[str, ...] = get_args(Precision)
ATTENTION_BACKEND_CHOICES: tuple[str, ...] = get_args(AttentionBackend)
MOE_DISPATCHER_CHOICES: tuple[str, ...] = get_args(MoeDispatcher)
ELEMENTWISE_KERNELS_CHOICES: tuple[str, ...] = get_args(ElementwiseKernels)
SELECTIVE_RECOMPUTE_CHOICES: tuple[str, ...] = get_args(SelectiveRecompute)
RECOMPUTE_MODULE_CHOICES: tuple[str, ...] = get_args(RecomputeModule)
CROSS_ENTROPY_CHOICES: tuple[str, ...] = get_args(CrossEntropy)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Parallelism(_Frozen):
    tp: int_field(MAX_NUM_GPUS) = 1
    """Tensor parallel degree."""
    pp: int_field(MAX_NUM_GPUS) = 1
    """Pipeline parallel degree."""
    vpp: int_field(MAX_VIRTUAL_STAGES) = 1
    """Virtual stages per pipeline rank (interleaved 1F1B)."""
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
    attention_backend: AttentionBackend = "flash"
    """Attention kernel (perfmodel extension of the contract; Megatron-Core's
    --attention-backend names): flash = fused FlashAttention/cuDNN kernel, the s x s scores
    never reach HBM; unfused = scores and probabilities materialised in HBM (Megatron-LM
    before FlashAttention, 2022)."""
    overlap: Overlap = Field(default_factory=Overlap)
    """Communication/computation overlap per traffic kind (perfmodel extension of the
    contract): a mapping of any of tp, cp, ep, pp, dp, fsdp to a fraction in [0, 1]; kinds
    left out keep the defaults of ``perfmodel.formulas.overlap.Overlap`` (how Megatron-Core, NeMo and
    FSDP overlap)."""
    fsdp_collectives_per_layer: int_field(MAX_FSDP_COLLECTIVES_PER_LAYER) = 1
    """ZeRO-3 collectives per layer and direction (perfmodel extension of the contract): the
    layer's parameters are all-gathered (forward and backward) and its gradients
    reduce-scattered in this many separate collectives, each paying its own ring latency.
    1 = one flat unit per transformer block (PyTorch FSDP/FSDP2 auto-wrap, Megatron-FSDP).
    DeepSpeed ZeRO-3 up to v0.3.x issued one all_gather and one reduce_scatter per
    parameter tensor (deepspeed/runtime/zero/partition_parameters.py, _allgather_param and
    _reduce_scatter_gradient, v0.3.14 commit 112ebff): 12 for a GPT-2/3 layer with biases
    and LayerNorms. Ignored below ZeRO stage 3."""
    fsdp_list_api: StrictBool = False
    """ZeRO-3 collectives through torch.distributed's list API (perfmodel extension of the
    contract): each all-gather and reduce-scatter also copies every rank's chunk with its
    own kernel, n kernels per collective (PyTorch ProcessGroupNCCL). DeepSpeed ZeRO-3 used
    it from v0.3.13 (March 2021) until it moved to the flat _all_gather_base in October 2021
    (DeepSpeed #834, #1188). Ignored below ZeRO stage 3."""
    moe_dispatcher: MoeDispatcher = "alltoall"
    """MoE token dispatcher (perfmodel extension of the contract; Megatron-Core's
    --moe-token-dispatcher-type): alltoall sends every routed copy of a token as its own
    message; flex is the hierarchical dispatch of DeepEP and HybridEP
    (--moe-flex-dispatcher-backend), which crosses the network once per destination domain
    and fans out over NVLink. Across scale-up domains they differ in network bytes; inside
    one they send the same all-to-all, and only alltoall sorts tokens by local expert after
    it. Ignored for dense models."""
    grad_reduce_in_fp32: StrictBool = True
    """Data-parallel gradients kept and reduced in fp32 (perfmodel extension of the contract;
    Megatron-Core's DistributedDataParallelConfig flag of that name). true: a 4-byte gradient
    buffer and 4-byte reduce-scatter or all-reduce (Megatron-LM forces it on for bf16;
    PyTorch FSDP2 reduces in fp32 in torchtitan). false: both in the 16-bit training dtype,
    half the bytes, as NVIDIA's performance recipes set (NeMo 2 performance_mode recipes and
    scripts/performance, Megatron-Bridge scripts/performance: grad_reduce_in_fp32 = False;
    NeMo 1 configs: optim.grad_sync_dtype bf16). Applies to bf16, fp8 and fp4 training; fp16
    gradients are 2 bytes in memory either way."""
    elementwise_kernels: ElementwiseKernels = "fused"
    """How norms, rotary embeddings and the MLP activation run (perfmodel extension of the
    contract): fused = one kernel each (Transformer Engine and Megatron-Core fused kernels, or
    torch.compile); eager = PyTorch eager, one kernel and one HBM round trip per elementwise
    op, with the fp32 upcasts of torchtitan's Llama block (RMSNorm 36 bytes per element in 8
    kernels instead of 4 in 1; see ``perfmodel.formulas.workload._eager_elementwise_ops``)."""
    selective_recompute: SelectiveRecompute | Annotated[tuple[RecomputeModule, ...], Field(
        max_length=len(RECOMPUTE_MODULE_CHOICES))] = "core_attn"
    """What ``recompute: selective`` recomputes (perfmodel extension of the contract; unused
    for none and full, but always checked against the model, since the layout search tries
    selective too): core_attn = Megatron-Core's default, the attention core; op_sac =
    torchtitan's operator-level policy (selective_ac_option 'op'), which keeps matmul and SDPA
    outputs except every second matmul and recomputes the rest (dense Llama-style layers
    only); save_qkv_proj = MaxText's remat policy, which keeps the Q, K and V projections and
    recomputes the rest of the layer (dense layers without MLA); or a list of Megatron-Core
    ``recompute_modules`` (core_attn, layernorm, mla_up_proj, moe_act, mlp, moe,
    shared_experts), each recomputed as Megatron-Core does it (see ``perfmodel.formulas.recompute``).
    ``core_attn`` and ``[core_attn]`` are the same policy."""
    recompute_num_layers: int_field(MAX_NUM_LAYERS) | None = None
    """With ``recompute: full``, how many layers of each model chunk (pipeline stage, or
    virtual stage with interleaving) are recomputed (perfmodel extension of the contract;
    Megatron-Core ``recompute_method: block`` with ``recompute_num_layers``): the first N
    layers of every chunk store only their input and are recomputed, the others store
    everything. null = every layer (``full`` as the contract defines it). A chunk with fewer
    layers recomputes all of them, as in Megatron-Core."""
    activation_offload_layers: int_field(MAX_NUM_LAYERS, minimum=0) = 0
    """Transformer layers whose activations are copied to host memory during the forward and
    back before their backward (perfmodel extension of the contract; Megatron-Core
    ``cpu_offloading`` with ``cpu_offloading_num_layers``, through Transformer Engine's
    ``get_cpu_offload_context``). The first N layers are offloaded; Megatron-Core allows it
    only with pp = 1, no recompute and N < num_layers. 0 = off. See ``perfmodel.formulas.offload``."""
    pipeline_layout: Annotated[str, StringConstraints(max_length=MAX_PIPELINE_LAYOUT_CHARS)] | None = None
    """Which layers each virtual pipeline stage runs (perfmodel extension of the contract;
    Megatron-Core ``pipeline_model_parallel_layout`` in its string form, e.g.
    ``Et*4|(t*4|)*14tmL``): ``|`` separates the pp * vpp virtual stages, E is the embedding,
    t a decoder layer, m an MTP module, L the output layer and loss, ``x*n`` and ``(...)*n``
    repeat. null = the even split, l / pp layers per rank with the embedding on the first and
    the output layer on the last. See ``perfmodel.spec.pipeline_layout``."""
    cross_entropy: CrossEntropy = "fused"
    """How the loss runs (perfmodel extension of the contract): fused = Megatron-Core's
    vocab-parallel cross-entropy (or a compiled loss), fp32 logits kept, 4 bytes per logit
    (Korthikanti et al. 2022, sec. 4.3); eager_fp32 = ``F.cross_entropy(logits.float(),
    labels)`` in eager PyTorch (torchtitan before it compiled the loss), 12 bytes per logit at
    the start of the backward and 14 bytes of forward traffic (``perfmodel.formulas.memory``,
    ``perfmodel.formulas.workload``)."""
    training_tokens: real_field(MAX_TRAINING_TOKENS) | None = None
    """Optional: enables time to train, GPU-hours, cost and energy."""

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


@dataclass(frozen=True)
class Job:
    """A scenario bound to its hardware and model, with the derived data-parallel degree."""

    scenario: Scenario
    hardware: HardwareSpec
    model: ModelSpec
    dp: int
    num_microbatches: int
    """Micro-batches per pipeline per step = global_batch / (micro_batch * dp)."""


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


def scenario_to_dict(s: Scenario) -> dict:
    """Plain mapping in the contract's field names (for YAML export and round trips).

    ``overlap.tp: null`` (ideal chunked TP overlap) is kept: dropping it would reload as 0."""
    d = s.model_dump(mode="json", exclude_none=True)
    d["overlap"] = s.overlap.model_dump(mode="json")
    return d


def _divides(a, b):
    """True where ``a`` divides ``b`` (element-wise; a > 0)."""
    return np.asarray(b) % np.asarray(a) == 0


def layout_violation_fields(model: ModelSpec, hw: HardwareSpec, seq_length: int, global_batch_size,
                            num_gpus, precision: str, *, tp, pp, vpp, cp, ep, etp, sp,
                            micro_batch_size, activation_offload_layers: int = 0,
                            pipeline_stages: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The layout rules of the scenario contract, over arrays of layouts.

    Every argument after ``precision`` is an integer (``sp``: boolean) array; ``num_gpus`` and
    ``global_batch_size`` may be scalars or arrays. Returns ``(field, reason)`` object arrays:
    ``''`` where the layout can run, else the first rule it breaks, with the arithmetic. This is
    the only home of the rules: ``check_layout`` calls it on a batch of one.
    """
    a = {k: np.atleast_1d(np.asarray(v, dtype=np.int64)) for k, v in dict(
        tp=tp, pp=pp, vpp=vpp, cp=cp, ep=ep, etp=etp, mbs=micro_batch_size,
        n=num_gpus, gbs=global_batch_size).items()}
    shape = np.broadcast_shapes(*(v.shape for v in a.values()), np.shape(np.atleast_1d(sp)))
    a = {k: np.broadcast_to(v, shape) for k, v in a.items()}
    tp, pp, vpp, cp, ep, etp, mbs, n, gbs = (a[k] for k in ("tp", "pp", "vpp", "cp", "ep", "etp", "mbs", "n", "gbs"))
    sp = np.broadcast_to(np.atleast_1d(np.asarray(sp, dtype=bool)), shape)
    field = np.full(shape, "", dtype=object)
    reason = np.full(shape, "", dtype=object)
    ok = np.ones(shape, dtype=bool)

    def rule(name, broken, message, **cols):
        """Record ``message(**cols)`` where ``broken`` and no earlier rule fired."""
        nonlocal ok
        bad = ok & broken
        if not bad.any():
            return
        idx = np.flatnonzero(bad)
        keys = np.stack([np.broadcast_to(v, shape).ravel()[idx] for v in cols.values()]
                        or [np.zeros(idx.size, dtype=np.int64)], axis=1)
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        # format each distinct combination once, then scatter (no per-layout Python)
        texts = np.array([message(**dict(zip(cols, map(int, row)))) for row in uniq], dtype=object)
        reason.ravel()[idx] = texts[np.ravel(inverse)]
        field.ravel()[idx] = name
        ok = ok & ~bad

    model_par = tp * pp * cp
    rule("num_gpus", ~_divides(model_par, n),
         lambda tp, pp, cp, n: f"tp({tp}) * pp({pp}) * cp({cp}) = {tp * pp * cp} does not divide num_gpus({n})",
         tp=tp, pp=pp, cp=cp, n=n)
    dp = np.maximum(n // model_par, 1)
    m_heads, m_kv = model.num_attention_heads, model.kv_heads
    rule("parallelism.tp", ~_divides(tp, m_heads),
         lambda tp: f"tp({tp}) does not divide num_attention_heads({m_heads})", tp=tp)
    if model.mla is None:
        rule("parallelism.tp", ~_divides(tp, m_kv) & ~_divides(m_kv, tp),
             lambda tp: f"tp({tp}) and num_query_groups({m_kv}) do not divide one another", tp=tp)
    s = seq_length
    rule("parallelism.cp", ~_divides(cp, s), lambda cp: f"cp({cp}) does not divide seq_length({s})", cp=cp)
    rule("parallelism.sequence_parallel", sp & ~_divides(tp, s // cp),
         lambda cp, tp: f"seq_length({s}) / cp({cp}) = {s / cp:g} is not divisible by tp({tp})", cp=cp, tp=tp)
    rule("parallelism.vpp", (vpp > 1) & (pp == 1),
         lambda vpp, pp: f"vpp({vpp}) > 1 needs pp > 1 (pp = {pp})", vpp=vpp, pp=pp)
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
        rule("parallelism.ep", ~_divides(ep, experts),
             lambda ep: f"ep({ep}) does not divide moe.num_experts({experts})", ep=ep)
        rule("parallelism.ep", ~_divides(ep * etp, dp * cp * tp),
             lambda ep, etp, dp, cp, tp: (f"ep({ep}) * etp({etp}) = {ep * etp} does not divide "
                                          f"dp({dp}) * cp({cp}) * tp({tp}) = {dp * cp * tp}"),
             ep=ep, etp=etp, dp=dp, cp=cp, tp=tp)
    per_step = mbs * dp
    rule("global_batch_size", ~_divides(per_step, gbs),
         lambda mbs, dp, gbs: (f"micro_batch_size({mbs}) * dp({dp}) = {mbs * dp} does not divide "
                               f"global_batch_size({gbs})"),
         mbs=mbs, dp=dp, gbs=gbs)
    num_mb = gbs // per_step
    rule("global_batch_size", (vpp > 1) & ~_divides(pp, num_mb),
         lambda num_mb, pp: f"interleaved schedule needs micro-batches({num_mb}) to be a multiple of pp({pp})",
         num_mb=num_mb, pp=pp)
    if not hw.gpu.supports(precision):
        name = hw.gpu.name
        rule("precision", np.ones(shape, dtype=bool),
             lambda: f"{name} has no dense {precision} tensor-core peak")
    return field, reason


def layout_violation(model: ModelSpec, hw: HardwareSpec, seq_length: int, global_batch_size, num_gpus,
                     precision: str, *, tp, pp, vpp, cp, ep, etp, sp, micro_batch_size,
                     activation_offload_layers: int = 0, pipeline_stages: int = 0) -> np.ndarray:
    """Reason each layout cannot run (``''`` = valid); see ``layout_violation_fields``."""
    return layout_violation_fields(model, hw, seq_length, global_batch_size, num_gpus, precision, tp=tp,
                                   pp=pp, vpp=vpp, cp=cp, ep=ep, etp=etp, sp=sp,
                                   micro_batch_size=micro_batch_size,
                                   activation_offload_layers=activation_offload_layers,
                                   pipeline_stages=pipeline_stages)[1]


def pipeline_stages(s: Scenario) -> tuple[str, ...] | None:
    """The scenario's pipeline layout as virtual stages (``perfmodel.spec.pipeline_layout.parse``)."""
    return None if s.pipeline_layout is None else pipeline_layout.parse(s.pipeline_layout)


def layout_rule_fields(s: Scenario) -> dict:
    """The scenario fields beyond the layout itself that the layout rules read: the keyword
    arguments every caller of ``layout_violation(_fields)`` passes for this scenario."""
    return {"activation_offload_layers": s.activation_offload_layers,
            "pipeline_stages": len(pipeline_stages(s) or ())}


def check_layout(s: Scenario, m: ModelSpec, hw: HardwareSpec) -> tuple[int, int]:
    """Check that the layout divides; return (dp, micro-batches). Raises InputError.

    ZeRO over a single data-parallel rank is legal and simply shards nothing.
    """
    p = s.parallelism
    field, reason = layout_violation_fields(
        m, hw, s.seq_length, s.global_batch_size, s.num_gpus, s.precision, tp=p.tp, pp=p.pp, vpp=p.vpp,
        cp=p.cp, ep=p.ep, etp=p.etp, sp=p.sp, micro_batch_size=s.micro_batch_size, **layout_rule_fields(s))
    if reason[0]:
        raise InputError(field[0], reason[0])
    dp = s.num_gpus // (p.tp * p.pp * p.cp)
    return dp, s.global_batch_size // (s.micro_batch_size * dp)


def check_job(s: Scenario, m: ModelSpec) -> None:
    """The rules on a job that hold whatever its layout and recompute mode: the pipeline layout
    against the model, and the recompute and offload fields against the model (Megatron-Core's
    own rules, in ``TransformerConfig.__post_init__``). ``resolve`` (predict) and the layout
    search both call this, so a layout the search returns is one predict accepts. Raises
    InputError."""
    from perfmodel.spec.software import selective_modules

    stages = pipeline_stages(s)
    if stages is not None:
        pipeline_layout.validate(stages, m.num_layers, m.mtp_layers)
        if m.moe is not None and m.moe.interleave_step > 1:
            raise InputError("pipeline_layout", f"is not supported with moe.interleave_step "
                             f"({m.moe.interleave_step}); drop it for an even split")
    # Checked whatever ``recompute`` says: the layout search tries selective recompute too.
    policy = s.selective_recompute
    owner = {"op_sac": "torchtitan's policy for its dense Llama block",
             "save_qkv_proj": "MaxText's policy for dense decoder layers with Q, K and V projections"}
    if policy in owner and (m.moe is not None or m.mla is not None):
        raise InputError("selective_recompute", f"{policy} is {owner[policy]}; "
                                                f"{m.name} has {'MoE' if m.moe is not None else 'MLA'} layers")
    if not isinstance(policy, str):
        if not policy:
            raise InputError("selective_recompute", "an empty module list recomputes nothing; "
                                                    "use recompute: none")
        needs = {"mla_up_proj": (m.mla is not None, "multi-latent attention"),
                 "moe_act": (m.moe is not None, "MoE layers"), "moe": (m.moe is not None, "MoE layers"),
                 "shared_experts": (m.moe is not None and m.moe.num_shared_experts > 0, "shared experts"),
                 "mlp": (m.num_dense_mlp_layers > 0, "dense-MLP layers")}
        for name in selective_modules(policy):
            has, what = needs.get(name, (True, ""))
            if not has:
                raise InputError("selective_recompute", f"module {name} recomputes {what}; {m.name} has none")
    n = s.activation_offload_layers
    if n and n >= m.num_layers:
        raise InputError("activation_offload_layers", f"{n} must be less than num_layers({m.num_layers}) "
                                                      f"(Megatron-Core)")


def recompute_violation(s: Scenario, recompute: str) -> tuple[str, str] | None:
    """(field, reason) where the scenario's recompute-scoped fields cannot go with ``recompute``
    (the scenario's own, or one the layout search tries), else None."""
    if s.recompute_num_layers is not None and recompute != "full":
        return "recompute_num_layers", f"applies to recompute: full (block method); recompute is {recompute}"
    if s.activation_offload_layers and recompute != "none":
        return "activation_offload_layers", (f"Megatron-Core offloads activations only without recompute; "
                                             f"recompute is {recompute}")
    return None


def check_recompute(s: Scenario, m: ModelSpec) -> None:
    """``check_job`` and the scenario's own recompute mode against its recompute-scoped fields."""
    check_job(s, m)
    bad = recompute_violation(s, s.recompute)
    if bad:
        raise InputError(*bad)


def resolve(s: Scenario) -> Job:
    """Bind the scenario to hardware and model specs and validate the layout."""
    hw = hardware_of(s)
    m = model_of(s)
    check_recompute(s, m)
    dp, num_mb = check_layout(s, m, hw)
    return Job(scenario=s, hardware=hw, model=m, dp=dp, num_microbatches=num_mb)
