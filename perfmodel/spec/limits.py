"""Upper bounds on every input that sets the amount of work, and the strict number types.

Every count, length and size a user sends is checked against a stated maximum when it is
parsed, before any work starts, and a value past it is a one-line ``InputError`` naming the
field and the limit. Each bound is a generous multiple of the largest real value (a model, a
cluster, a data file of this project), so no real job is refused while a mistyped or hostile
input (``num_layers: 1000000``, a 112 MB log) cannot turn into minutes of work or gigabytes
of memory. The products the layout rules form in 64-bit integers (tp * pp * cp,
micro_batch * dp, ep * etp * ...) stay far below 2**63 at these bounds.

Numbers are strict: an integer field takes an integer, not ``true`` or ``'64'``; a real field
takes an integer or a float, finite (no ``.inf`` or ``.nan``).
"""

from __future__ import annotations

import reprlib
from typing import Annotated

from pydantic import AllowInfNan, BeforeValidator, Field, Strict, StringConstraints

# --- model architecture -------------------------------------------------------------------
MAX_NUM_LAYERS = 1024
"""8x the deepest published decoders (Megatron-LM 1T: 128 layers; Llama 3.1 405B: 126)."""
MAX_HIDDEN_SIZE = 262_144
"""10x the widest published model (Megatron-LM 1T: hidden 25,600). Also bounds the MLA ranks."""
MAX_FFN_HIDDEN_SIZE = 1_048_576
"""12x the widest published MLP (Megatron-LM 530B: 81,920)."""
MAX_ATTENTION_HEADS = 4096
"""25x the most query heads of a published model (Megatron-LM 1T: 160)."""
MAX_HEAD_DIM = 4096
"""16x the widest published head (Gemma: 256)."""
MAX_VOCAB_SIZE = 16_777_216
"""64x the largest published vocabulary (Gemma 3: 262,144)."""
MAX_NUM_EXPERTS = 65_536
"""170x the most routed experts of a released model (Kimi K2: 384); also bounds top-k and
the shared experts."""

# --- job -------------------------------------------------------------------------------------
MAX_NUM_GPUS = 1_048_576
"""5x the largest reported training clusters (about 200,000 GPUs in 2025). Every parallel
degree divides the GPU count, so this also bounds tp, pp, cp, ep and etp."""
MAX_SEQ_LENGTH = 16_777_216
"""16x the longest sequences of published training runs (1M tokens, in this project's
validation cases)."""
MAX_GLOBAL_BATCH_SIZE = 16_777_216
"""Sequences per step: 2,000x the largest batch of the validation cases (8,192 sequences);
it also bounds the micro-batch."""
MAX_VIRTUAL_STAGES = MAX_NUM_LAYERS + 2
"""vpp: a model chunk holds at least one layer, the embedding or the loss."""
MAX_FSDP_COLLECTIVES_PER_LAYER = 1024
"""85x DeepSpeed ZeRO-3's 12 collectives per GPT layer (one per parameter tensor)."""
MAX_TRAINING_TOKENS = 1.0e16
"""250x the largest published pre-training corpus (Qwen3: 36T tokens)."""
MAX_PIPELINE_LAYOUT_CHARS = 16_384
"""A pipeline_layout string as typed: Megatron-Bridge's DeepSeek-V3 layout is 17 characters,
and a layout of MAX_NUM_LAYERS layers written out one stage per layer is under 4,000."""
MAX_PIPELINE_LAYOUT_SYMBOLS = 4 * MAX_NUM_LAYERS
"""The layout once its repeats are expanded: at most num_layers t, mtp_layers m, E, L and
pp * vpp - 1 separators, each of them at most MAX_NUM_LAYERS + 2. Counted arithmetically
before any string is built (``perfmodel.spec.pipeline_layout``)."""

# --- search, sweeps and benchmarks -------------------------------------------------------
MAX_SWEEP_POINTS = 64
"""GPU counts in one ``search --gpus``, ``scale`` or ``size`` sweep: every power of two up
to MAX_NUM_GPUS is 21 of them, each a full layout search."""
MAX_TOP_K = 10_000
"""Candidates returned by a search, each built in Python (the default is 10)."""
MAX_SEARCH_MICRO_BATCH_SIZE = 1024
"""Micro-batch sizes a search tries (1..max): recipes at scale use 1-16."""
MAX_BENCH_REPEATS = 1000
"""Timed repeats of ``perfmodel bench`` and ``bench-hw`` (defaults 5 and a few dozen)."""

# --- text and files ----------------------------------------------------------------------
MAX_NAME_LENGTH = 256
"""Names and ids are labels in tables and file names; a Hugging Face repository id is under
100 characters, and ext4 file names end at 255 bytes."""
MAX_DATA_FILE_BYTES = 16 * 2**20
"""YAML or JSON input files (scenario, hardware, config.json, cases, results, profiles): 30x
the largest data file of this project (published_runs.yaml, 0.55 MB). Checked with stat and
a bounded read, before the file is read."""
MAX_LOG_FILE_BYTES = 16 * 2**20
"""nccl-tests and training logs: a sweep prints one line per size (a few kB); this leaves room
for long NCCL_DEBUG=INFO preambles of thousands of ranks, and for about 50,000 Megatron-LM
iteration lines (~300 bytes each) of a training log (give a longer log's tail)."""
MAX_LOG_LINE_CHARS = 10_000
"""A training log's line: a Megatron-LM iteration line is about 300 characters, a Hugging Face
Trainer metrics dict a few hundred. Longer lines are skipped, so no pattern runs over a
megabyte-long line."""
MAX_LOG_ROWS = 10_000
"""Data rows of one nccl-tests table: a full 8 B - 16 GB sweep is 32 rows."""
MAX_NESTING_DEPTH = 64
"""Nested mappings and lists in one YAML or JSON document: this project's deepest file
(published_runs.yaml) nests 6 levels."""

MAX_RECORDS = 1_000_000
"""Records of one calibration results file, and timed repeats of one record: a full suite run
writes about 400 records of a few dozen repeats."""
MAX_OBSERVED_RUNS = 64
"""Measured runs one diagnosis or anchor fits at once, and runs one log holds (one per job size of
a CSV or YAML series): each run is evaluated a few hundred times; a scaling sweep has a handful
(``MAX_SWEEP_POINTS``)."""
MAX_CASES = 5_000
"""Cases of one ``perfmodel validate`` file, each a prediction: the published runs are 230."""

# --- measurements (calibration records) --------------------------------------------------
MAX_KERNEL_DIM = 2**40
"""A GEMM or attention dimension in elements: far past any device memory."""
MAX_MESSAGE_BYTES = 2**60
"""A collective message or stream size in bytes (an exbibyte)."""
MAX_KERNEL_FLOP = 1.0e30
"""The work of one timed call: an EFLOP/s device busy for 30 years."""
MAX_MEASURED_RATE_PER_S = 1.0e21
"""A published rate in FLOP/s or bytes/s (a ZFLOP/s)."""

# --- hardware numbers --------------------------------------------------------------------
MAX_TFLOP_PER_S = 1.0e6
"""A dense peak of 1 EFLOP/s per device: 100x a B300's dense fp4 (15 PFLOP/s)."""
MIN_RATE = 1.0e-3
"""Smallest peak or bandwidth (TFLOP/s, GB/s, Gb/s): a GFLOP/s or a MB/s, below any
accelerator, CPU or link; smaller values only overflow the times they divide."""
MAX_GB_PER_S = 1.0e6
"""HBM, NVLink or host-link bandwidth of 1 PB/s per GPU: 100x a B300's 8 TB/s HBM."""
MAX_GBIT_PER_S = 1.0e7
"""NIC line rate of 10 Pb/s: 10,000x today's 800 Gb/s NICs."""
MAX_BUSBW_BYTES_PER_S = 1.0e15
"""A fitted bus bandwidth (bytes/s) of MAX_GB_PER_S."""
MIN_BUSBW_BYTES_PER_S = 1.0e6
"""A fitted bus bandwidth (bytes/s) of MIN_RATE GB/s."""
MAX_COLLECTIVE_FITS = 10_000
"""Measured collective fits in one efficiency block: a profile holds a few dozen (five ops,
two fabrics, a few group sizes, up to three regimes each)."""
MAX_NICS_PER_GPU = 64
"""GPUs have one or two NICs each; 64 leaves room for any rail-optimised design."""
MAX_GIB = 1.0e6
"""Memory capacity (GiB, MiB of L2) of one device: 3,500x a B300's 288 GB HBM."""
MAX_COUNT = 1_000_000
"""SMs, GPUs per host or per node: a B300 has 160 SMs, an NVL576 rack 576 GPUs."""
MAX_LATENCY_US = 1.0e6
"""One second of latency per message: 1,000x a slow Ethernet hop."""
MAX_POWER_W = 1.0e8
"""Node or rack power of 100 MW, a data centre's worth: an NVL72 rack draws about 130 kW."""
MAX_USD = 1.0e14
"""Any price or budget (per GPU, per GPU-hour, per kWh, a whole run): a hundred trillion
dollars, about world GDP. It was a trillion until the 100-trillion-parameter presets: their
cheapest runs cost $0.9-9 trillion (``perfmodel size``, docs/search_scale_size.md), so a budget
in that range must be a question perfmodel answers, not an input it refuses."""
MAX_SECONDS = 1.0e9
"""Any time a user states (a latency, a kernel overhead, a restart): 30 years."""
MAX_YEARS = 100.0
"""Amortisation life of hardware; servers are written off over 4-6 years."""
MIN_YEARS = 0.01
"""Four days: shorter lives only overflow the hourly capital cost."""
MAX_RATIO = 1.0e6
"""Dimensionless factors that may exceed one (PUE, overhead fractions, speed-ups, half
dimensions in elements)."""
MAX_FAILURES_PER_HOUR = 1.0e3
"""Failure rates per component-hour: real GPUs fail about 2e-5 times an hour."""


# --- strict, bounded field types ---------------------------------------------------------
def int_field(maximum: int, minimum: int = 1):
    """An integer in [minimum, maximum]: ``true`` and ``'64'`` are not integers."""
    low = {"gt": 0} if minimum == 1 else {"ge": minimum}     # "greater than 0" for a count
    return Annotated[int, Strict(), Field(le=maximum, **low)]


StrictReal = Annotated[float, Strict(), AllowInfNan(False)]
"""A finite real number: an integer or a float, never a bool or a string."""


def real_field(maximum: float, minimum: float = 0.0, *, exclusive_minimum: bool = True):
    """A finite real in (minimum, maximum] (or [minimum, maximum])."""
    low = {"gt": minimum} if exclusive_minimum else {"ge": minimum}
    return Annotated[float, Strict(), AllowInfNan(False), Field(le=maximum, **low)]


def _integer(value):
    """An integer literal's input must be an int itself (``Literal[1]`` takes ``True`` and ``1.0``)."""
    if type(value) is not int:
        raise ValueError(f"Input should be an integer, got {reprlib.repr(value)}")   # bounded, even for deep lists
    return value


def int_choice(*values: int):
    """One of ``values``, given as an integer (zero_stage: 0, 1, 2 or 3)."""
    from typing import Literal

    return Annotated[Literal[values], BeforeValidator(_integer)]


Name = Annotated[str, StringConstraints(max_length=MAX_NAME_LENGTH)]
"""A name or id (a label in tables), at most MAX_NAME_LENGTH characters."""
