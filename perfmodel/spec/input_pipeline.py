"""The input pipeline: how fast data-loader workers and storage hand tokens to each GPU, with
sourced defaults. The step waits for it only when it is the slowest stage
(``perfmodel.formulas.overheads.data_wait_s``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from perfmodel.spec.limits import MAX_GB_PER_S, MIN_RATE, real_field
from perfmodel.spec.units import GIGA

BYTES_PER_TOKEN_DEFAULT = 4.0
"""Pre-tokenised int32 token ids read from a memory-mapped file (Megatron-Core indexed dataset:
``DType.optimal_dtype`` stores int32 for vocabularies of 65,500 and more, uint16 below)."""
STORAGE_READ_BYTES_PER_S_PER_GPU_DEFAULT = 2.0e9 / 8
"""A conservative 2 GB/s of local NVMe read per 8-GPU node (DGX H100 datasheet: 8 x 3.84 TB NVMe
U.2 data cache; one drive alone sustains several GB/s)."""
MAX_BYTES_PER_TOKEN = 1.0e9
"""A 'token' of a multimodal sample (an image patch, a video frame) can be kilobytes; a GB bounds it."""
MAX_TOKENS_PER_S = 1.0e15
"""Tokens per second per GPU of a loader: 10^10 times what a GPU trains on."""


class InputPipeline(BaseModel):
    """What feeds each GPU its tokens. Unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bytes_per_token: real_field(MAX_BYTES_PER_TOKEN) = BYTES_PER_TOKEN_DEFAULT
    """Bytes read from storage per training token."""
    storage_read_bytes_per_s_per_gpu: real_field(MAX_GB_PER_S * GIGA, MIN_RATE * GIGA) = (
        STORAGE_READ_BYTES_PER_S_PER_GPU_DEFAULT)
    """Storage read bandwidth each GPU's loader gets."""
    loader_tokens_per_s_per_gpu: real_field(MAX_TOKENS_PER_S) | None = None
    """Tokens per second the data-loader workers of one GPU prepare (decoding, tokenising,
    packing, augmenting); None = not a limit (pre-tokenised data is a memory-mapped read)."""
