"""Serving scenario: a model served on a replica layout, the traffic it sees, and its latency
objectives (issue 53). ``load_serving_scenario`` reads a YAML file whose ``serving:`` section is a
``ServingSpec``; the rest (hardware, model, num_gpus, cost) reads as in a training scenario.

Fields are SI with unit suffixes; precisions are keys of ``perfmodel.spec.precision.FORMAT_BYTES``.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator, model_validator

from perfmodel.spec.cost import CostModel
from perfmodel.spec.errors import InputError, read_data_file, validated
from perfmodel.spec.hardware import HardwareSpec, list_hardware_ids, load_hardware, parse_hardware
from perfmodel.spec.limits import MAX_NUM_GPUS, MAX_RATIO, MAX_SECONDS, MAX_SEQ_LENGTH, Name, int_field, real_field
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.precision import Precision
from perfmodel.spec.serving_names import Batching, KvFormat, KvLink, Pool, Statistic, WeightFormat

DEFAULT_CHUNK_TOKENS = 2048
"""Prefill tokens per chunk under chunked prefill: vLLM's ``max_num_batched_tokens`` default for
the OpenAI-compatible server with chunked prefill (vLLM docs, engine arguments, V1 engine)."""
DEFAULT_MAX_CONCURRENCY = 2048
"""Most sequences an engine batches at once: TensorRT-LLM's ``max_batch_size`` default of
``trtllm-build`` and the LLM API BuildConfig (TensorRT-LLM docs, build configuration)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ServingPrecision(_Frozen):
    weights: WeightFormat = "bf16"
    """Format of the stored weights: the bytes a decode step reads."""
    activations: WeightFormat = "bf16"
    """Format the GEMMs compute in (their dense peak); fp4 weights with fp8 activations run at fp8."""
    kv_cache: KvFormat = "bf16"
    """Format of the cached keys and values (or MLA latents)."""

    def record(self) -> Precision:
        """The ``Precision`` record of this serving mode (compute = activations, param = weights)."""
        return Precision(f"serve-w{self.weights}-a{self.activations}", "serving scenario",
                         compute=self.activations, param=self.weights, master=None)


class ServingParallelism(_Frozen):
    tp: int_field(MAX_NUM_GPUS) = 1
    """Tensor-parallel degree of the attention and dense layers."""
    pp: int_field(MAX_NUM_GPUS) = 1
    """Pipeline stages; a request's token passes every stage in turn."""
    ep: int_field(MAX_NUM_GPUS) = 1
    """Expert-parallel degree of the MoE layers, across the replica's GPUs."""
    attention_dp: int_field(MAX_NUM_GPUS) = 1
    """Data-parallel attention groups inside a replica (each of tp GPUs), holding different
    requests' caches (SGLang ``--enable-dp-attention``, DeepSeek's decode DP144)."""

    @property
    def replica_gpus(self) -> int:
        return self.tp * self.pp * self.attention_dp

    @property
    def stage_gpus(self) -> int:
        """GPUs of one pipeline stage: tp * attention_dp."""
        return self.tp * self.attention_dp

    @property
    def expert_tp(self) -> int:
        """Ways each expert is split inside a stage: the stage's GPUs over ep."""
        return self.stage_gpus // self.ep

    @model_validator(mode="after")
    def _ep_fits(self) -> ServingParallelism:
        stage = self.tp * self.attention_dp
        if stage % self.ep:
            raise ValueError(f"ep({self.ep}) does not divide a stage's tp({self.tp}) * "
                             f"attention_dp({self.attention_dp}) = {stage}")
        return self


class SpeculativeDecoding(_Frozen):
    draft_tokens: int_field(64)
    """Tokens the draft proposes per step (gamma)."""
    acceptance_rate: real_field(1.0, exclusive_minimum=False)
    """Probability that the target accepts a drafted token (alpha; Leviathan et al. 2023)."""
    draft_cost_frac: real_field(MAX_RATIO, exclusive_minimum=False) = 0.05
    """Time of one draft step over one target step (c in Leviathan et al. 2023, sec. 3.3; their
    T5 drafts ran at c of 0.01-0.05). An MTP head is one extra layer: about 1/layers."""

    @field_validator("acceptance_rate")
    @classmethod
    def _below_one(cls, v):
        if v >= 1.0:
            raise ValueError(f"acceptance_rate({v}) must be below 1")
        return v


class ServingSpec(_Frozen):
    prompt_tokens: int_field(MAX_SEQ_LENGTH)
    """Input tokens per request (mean)."""
    output_tokens: int_field(MAX_SEQ_LENGTH)
    """Generated tokens per request (mean)."""
    prompt_tokens_cv: real_field(MAX_RATIO, exclusive_minimum=False) = 0.0
    """Spread of the prompt lengths: standard deviation over the mean (0: every prompt ``prompt_tokens``
    long). A prefill takes time in proportion to its prompt, so the prefill queue is M/G/1 with the
    service's second moment D^2 (1 + cv^2) (``formulas.latency``): the TTFT percentiles widen; the
    means (cache held, throughput) stay those of the mean lengths."""
    concurrency: int_field(MAX_NUM_GPUS * 1024) | None = None
    """Requests in flight per replica (closed loop). Give this or ``requests_per_s``."""
    requests_per_s: real_field(1e9) | None = None
    """Arrival rate over the whole deployment (open loop)."""
    ttft_s: real_field(MAX_SECONDS) | None = None
    """Objective on the time to first token (None: none)."""
    tpot_s: real_field(MAX_SECONDS) | None = None
    """Objective on the time per output token after the first (None: none)."""
    objectives_at: Statistic = "mean"
    """Which TTFT and TPOT the objectives bound: the mean (``ttft_s``, ``tpot_s``) or a percentile
    (``ttft_p99_s``, ...; ``perfmodel.formulas.latency``). MLPerf Inference's server scenario bounds p99."""
    batching: Batching = "continuous"
    """static: a batch is prefilled, then decoded to its end; continuous: requests join and leave
    every step (Yu et al. 2022, Orca), a prefill stalls the step it joins; chunked_prefill:
    prefills are split into ``chunk_tokens`` pieces mixed into decode steps (Agrawal et al. 2024,
    Sarathi-Serve)."""
    chunk_tokens: int_field(MAX_SEQ_LENGTH) = DEFAULT_CHUNK_TOKENS
    prefill_tokens_per_pass: int_field(MAX_SEQ_LENGTH) | None = None
    """Prompt tokens one prefill pass packs when prompts wait together (every request queued at
    once, a max-throughput run): the scheduler's token budget per pass (TensorRT-LLM
    ``max_num_tokens``, vLLM ``max_num_batched_tokens``, SGLang ``max_prefill_tokens``). None: one
    prompt per attention group per pass (requests arriving one at a time)."""
    pool: Pool = "both"
    """What the replicas do: ``both`` prefill and decode (one pool); ``prefill`` or ``decode`` only, as
    one pool of a disaggregated deployment (Zhong et al. 2024, DistServe; Patel et al. 2024, Splitwise):
    a prefill pool prefills ``concurrency`` prompts per pass and hands their caches on; a decode pool
    decodes ``concurrency`` requests per step with no prefill stalls."""
    kv_link: KvLink = "scale_out"
    """The link that carries a prompt's KV cache from the prefill pool to the decode pool (``pool:
    prefill`` adds the hand-off to its TTFT): ``scale_out``, the GPUs' NICs (pools on different
    nodes, RDMA: DistServe, Mooncake, DeepSeek and SGLang deployments), or ``scale_up``, NVLink
    (both pools inside one NVLink domain, e.g. one NVL72 rack)."""
    max_concurrency: int_field(MAX_NUM_GPUS * 1024) = DEFAULT_MAX_CONCURRENCY
    """Most requests one scheduler batches (a replica, or each attention data-parallel group of one),
    beside what the KV cache holds."""
    precision: ServingPrecision = Field(default_factory=ServingPrecision)
    parallelism: ServingParallelism = Field(default_factory=ServingParallelism)
    speculative: SpeculativeDecoding | None = None
    cuda_graphs: StrictBool = True
    """Decode steps replayed as CUDA graphs: one host launch per step (vLLM, SGLang and
    TensorRT-LLM capture decode graphs by default)."""

    @model_validator(mode="after")
    def _one_load(self) -> ServingSpec:
        if (self.concurrency is None) == (self.requests_per_s is None):
            raise ValueError("give exactly one of concurrency and requests_per_s")
        return self


class ServingScenario(_Frozen):
    name: Name = "serving"
    hardware: Name | HardwareSpec
    """Id of hardware/<id>.yaml, or an inline spec."""
    model: Name | ModelSpec
    """A preset id, or an inline mapping."""
    num_gpus: int_field(MAX_NUM_GPUS) | None = None
    """GPUs of the deployment (a whole number of replicas); None = one replica."""
    cost: CostModel = Field(default_factory=CostModel)
    serving: ServingSpec

    @field_validator("hardware", mode="before")
    @classmethod
    def _hardware_by_id_or_inline(cls, v):
        if isinstance(v, str) and v not in list_hardware_ids():
            raise ValueError(f"unknown hardware {v!r}; one of {', '.join(list_hardware_ids())}")
        if isinstance(v, dict):
            try:
                return parse_hardware(v, "hardware")
            except InputError as exc:
                raise ValueError(exc.reason) from None
        return v

    @field_validator("model", mode="before")
    @classmethod
    def _model_by_preset(cls, v):
        from perfmodel.spec.presets import list_presets
        if isinstance(v, str) and v not in list_presets():
            raise ValueError(f"unknown model preset {v!r}")
        return v

    @model_validator(mode="after")
    def _whole_replicas(self) -> ServingScenario:
        r = self.serving.parallelism.replica_gpus
        if self.num_gpus is not None and self.num_gpus % r:
            raise ValueError(f"num_gpus({self.num_gpus}) is not a multiple of the replica's tp * pp * "
                             f"attention_dp = {r}")
        return self

    @property
    def replicas(self) -> int:
        r = self.serving.parallelism.replica_gpus
        return 1 if self.num_gpus is None else self.num_gpus // r

    @property
    def total_gpus(self) -> int:
        return self.replicas * self.serving.parallelism.replica_gpus


def serving_hardware(s: ServingScenario) -> HardwareSpec:
    return s.hardware if isinstance(s.hardware, HardwareSpec) else load_hardware(s.hardware)


def serving_model(s: ServingScenario) -> ModelSpec:
    from perfmodel.spec.presets import load_model
    return s.model if isinstance(s.model, ModelSpec) else load_model(s.model)


def parse_serving_scenario(data) -> ServingScenario:
    return validated(ServingScenario, data, "serving scenario")


def load_serving_scenario(path: str | Path) -> ServingScenario:
    return parse_serving_scenario(read_data_file(path, "scenario"))
