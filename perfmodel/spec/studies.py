"""How the studies look at the job (perfmodel extension of the scenario, section ``studies:``):
how far the global batch may grow as GPUs are added, and the options the app's pages and the
CLI's ``search``, ``scale`` and ``size`` start from, so that a shared link or a downloaded
scenario carries them. Every key is optional; the defaults are the CLI's.

The batch limit: a run that adds GPUs grows its global batch (more data-parallel replicas each
take their share), up to the batch beyond which more tokens per step stop cutting the number of
steps (the critical batch size, McCandlish et al. 2018, "An Empirical Model of Large-Batch
Training", arXiv 1812.06162; Kaplan et al. 2020 eq. 5.3 fits it as growing with the falling
loss). Below it, the tokens to train are taken as unchanged.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, field_validator

from perfmodel.spec.limits import (MAX_NUM_GPUS, MAX_SECONDS, MAX_SEQ_LENGTH, MAX_SWEEP_POINTS, MAX_TRAINING_TOKENS,
                                   Name, int_field, real_field)
from perfmodel.spec.serving_names import Batching, KvFormat, Statistic, WeightFormat

LLAMA3_BATCH_TOKENS = 16 * 2**20
"""Llama 3 405B's final global batch: 16M tokens (2,048 sequences of 8,192), reached by doubling
from 4M after 252M and 2.87T tokens (Llama Team 2024, "The Llama 3 Herd of Models", section
3.4.1). The largest batch of a published dense run of this scale; DeepSeek-V3's MoE run went to
15,360 x 4,096 = 63M tokens (DeepSeek-AI 2024, section 4.2)."""
MAX_BATCH_TOKENS_DEFAULT = float(LLAMA3_BATCH_TOKENS)
"""The batch the studies may grow to by default: Llama 3's 16M tokens (``LLAMA3_BATCH_TOKENS``)."""
MAX_STUDY_HARDWARE = 64
"""Hardware types one sizing names (the catalogue holds 15)."""

Objective = Literal["time", "cost", "tokens_per_usd"]
ScaleMode = Literal["strong", "weak", "grow"]
GpuCounts = Annotated[tuple[int_field(MAX_NUM_GPUS), ...], Field(min_length=1, max_length=MAX_SWEEP_POINTS)]


class Studies(BaseModel):
    """The studies' options (``scale``, ``size``, ``search``). Unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    grow_batch: StrictBool = True
    """Sizing may grow the global batch (doubling it from the scenario's) up to
    ``max_batch_tokens`` where the scenario's batch cannot meet the deadline or the budget;
    false keeps the scenario's batch at every count. ``predict`` never changes the batch."""
    max_batch_tokens: real_field(MAX_TRAINING_TOKENS) = MAX_BATCH_TOKENS_DEFAULT
    """The largest global batch, in tokens, that sizing and ``scale --mode grow`` may use."""
    objective: Objective = "time"
    """How ``search`` and ``scale`` rank layouts."""
    scale_gpu_counts: GpuCounts | None = None
    """The GPU counts of ``scale`` (None: the command's or the page's default)."""
    scale_mode: ScaleMode = "strong"
    """strong: the scenario's batch at every count; weak: the batch grows in proportion to the
    GPUs; grow: it doubles with the GPUs up to ``max_batch_tokens``, never below the scenario's."""
    size_hardware: Annotated[tuple[Name, ...], Field(min_length=1, max_length=MAX_STUDY_HARDWARE)] | None = None
    """Catalogue ids ``size`` compares (None: every reference spec)."""
    compare_hardware: Annotated[tuple[Name, ...], Field(min_length=1, max_length=MAX_STUDY_HARDWARE)] | None = None
    """Catalogue ids the app's Compare page shows (None: those a buyer can get, ``recommendable``)."""
    size_gpu_counts: GpuCounts | None = None
    """The GPU counts ``size`` tries (None: the command's or the page's default)."""
    search_gpu_counts: GpuCounts | None = None
    """GPU counts ``search`` tries beside the scenario's own (None: its own only)."""
    serve_prompt_tokens: int_field(MAX_SEQ_LENGTH) | None = None
    """The Serve page's options (``perfmodel.spec.serving.ServingSpec``), so a link carries the
    serving scenario; None: the page's default. Input tokens per request."""
    serve_output_tokens: int_field(MAX_SEQ_LENGTH) | None = None
    serve_concurrency: int_field(MAX_NUM_GPUS * 1024) | None = None
    serve_batching: Batching | None = None
    serve_ttft_s: real_field(MAX_SECONDS) | None = None
    serve_tpot_s: real_field(MAX_SECONDS) | None = None
    serve_objectives_at: Statistic | None = None
    serve_tp: int_field(MAX_NUM_GPUS) | None = None
    serve_weights: WeightFormat | None = None
    """Weights and activations."""
    serve_kv_cache: KvFormat | None = None
    serve_requests_per_s: real_field(1e9) | None = None
    """The request rate the page sizes a deployment for (None: it does not size)."""

    @field_validator("size_hardware", "compare_hardware")
    @classmethod
    def _catalogue_ids(cls, v):
        """Ids only, never a path: each must name a catalogue spec."""
        if v is None:
            return v
        from perfmodel.spec.hardware import list_hardware_ids
        known = set(list_hardware_ids())
        bad = [x for x in v if x not in known]
        if bad:
            shown = bad[0] if len(bad[0]) <= 64 else bad[0][:61] + "..."
            raise ValueError(f"unknown hardware {shown!r}; known ids: {', '.join(sorted(known))}")
        return tuple(dict.fromkeys(v))
