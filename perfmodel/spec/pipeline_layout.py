"""Explicit pipeline layouts: which layers each pipeline rank runs.

Without a layout, perfmodel spreads the decoder layers evenly, l / pp per rank, with the
embedding on the first rank and the output layer (plus MTP modules) on the last
(``perfmodel.engine.evaluate``). Megatron-Core also takes the split as a string,
``pipeline_model_parallel_layout`` (``megatron/core/transformer/pipeline_parallel_layer_layout.py``,
``PipelineParallelLayerLayout``), and NVIDIA's recipes use it to even out uneven models: e.g.
Megatron-Bridge's DeepSeek-V3 on pp 8, vpp 2 runs ``Et*4|(t*4|)*14tmL``, 61 decoder layers of
which the last virtual stage holds one, beside the MTP module and the loss.

Syntax (Megatron-Core's ``parse_str_to_list``): ``|`` separates virtual stages (pp * vpp of
them, in layer order); ``E`` embedding, ``t`` one decoder layer, ``m`` one MTP module, ``L``
the output layer and loss; ``x*n`` repeats a symbol and ``(...)*n`` a group; commas are
cosmetic. Virtual stage k runs on pipeline rank k mod pp (Megatron-Core's interleaved
assignment), so a rank's work per micro-batch is the sum over its vpp stages.

The layout sets the time of each stage (the slowest one paces the pipeline) and the memory of
each rank (``perfmodel.formulas.memory`` takes the most loaded rank); data-parallel traffic keeps the
even split of the parameters (``perfmodel.formulas.sharding``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from perfmodel.spec.errors import InputError
from perfmodel.spec.limits import MAX_PIPELINE_LAYOUT_CHARS, MAX_PIPELINE_LAYOUT_SYMBOLS

FIELD = "pipeline_layout"
SYMBOLS = "EtmL"   # embedding, decoder layer, MTP module, output layer and loss


GROUP_REPEAT = re.compile(r"\(([^()]+)\)\*(\d+)")
SYMBOL_REPEAT = re.compile(r"(.)\*(\d+)")
MAX_REPEAT_DIGITS = 9
"""A repeat count of more than nine digits is past every limit; refused before int() reads it."""


def _expand(s: str, pattern: re.Pattern, unit_len, limit: int, what: str) -> str:
    """``pattern``'s repeats of ``s`` written out, after checking arithmetically that the result
    has at most ``limit`` characters (so ``t*10000000000`` is refused before any string is built)."""
    matches = list(pattern.finditer(s))
    for g in matches:
        if len(g.group(2)) > MAX_REPEAT_DIGITS:
            raise InputError(FIELD, f"repeat count {g.group(2)[:12]}... is too large")
    size = len(s) + sum(unit_len(g) * int(g.group(2)) - len(g.group(0)) for g in matches)
    if size > limit:
        raise InputError(FIELD, f"expands to {size:,} {what}; at most {limit:,} (perfmodel.spec.limits)")
    return pattern.sub(lambda g: g.group(1) * int(g.group(2)), s)


def parse(text: str) -> tuple[str, ...]:
    """The virtual stages of a layout string, each as its unrolled symbols (e.g. ``'Ett'``)."""
    if len(text) > MAX_PIPELINE_LAYOUT_CHARS:
        raise InputError(FIELD, f"{len(text):,} characters; at most {MAX_PIPELINE_LAYOUT_CHARS:,}")
    s = text.replace(",", "").replace(" ", "")
    s = _expand(s, GROUP_REPEAT, lambda g: len(g.group(1)), MAX_PIPELINE_LAYOUT_CHARS, "characters")
    s = _expand(s, SYMBOL_REPEAT, lambda g: 1, MAX_PIPELINE_LAYOUT_SYMBOLS, "symbols")
    bad = sorted(set(s) - set(SYMBOLS) - {"|"})
    if bad:
        raise InputError(FIELD, f"unknown symbol {bad[0]!r} in {text!r}; use E, t, m, L, | , x*n and (...)*n")
    return tuple(s.split("|"))


@dataclass(frozen=True)
class RankLoad:
    """What each pipeline rank runs per micro-batch (arrays of length pp)."""

    decoder: np.ndarray
    mtp: np.ndarray
    loss: np.ndarray
    leading: np.ndarray
    """Decoder layers among the model's first ``num_leading`` (``rank_load`` argument): the
    dense-MLP layers that lead a MoE model."""


def validate(stages: tuple[str, ...], num_layers: int, mtp_layers: int) -> None:
    """Megatron-Core's rules for a layout (``validate_layer_layout``). Raises InputError."""
    flat = "".join(stages)
    if not flat.startswith("E") or flat.count("E") != 1:
        raise InputError(FIELD, "the embedding E must appear exactly once, as the first layer")
    if not flat.endswith("L") or flat.count("L") != 1:
        raise InputError(FIELD, "the loss L must appear exactly once, as the last layer")
    if flat.count("t") != num_layers:
        raise InputError(FIELD, f"{flat.count('t')} decoder layers t; the model has num_layers({num_layers})")
    if flat.count("m") != mtp_layers:
        raise InputError(FIELD, f"{flat.count('m')} MTP modules m; the model has mtp_layers({mtp_layers})")
    if "m" in flat and "t" in flat[flat.index("m"):]:
        raise InputError(FIELD, "decoder layers t must come before the MTP modules m")


def mirrored(load: RankLoad) -> RankLoad:
    """A layout's load per rank under DualPipe, which runs stage r of one direction and stage
    pp - 1 - r of the other on rank r, each for half the micro-batches (deepseek-ai/DualPipe;
    DeepSeek-V3 report sec. 3.2.1): per micro-batch, the mean of the two stages. The rank holds
    both stages' parameters (``perfmodel.formulas.pipeline.parameter_copies``: twice the mean)."""
    def mean(x):
        return (x + x[::-1]) / 2.0
    return RankLoad(decoder=mean(load.decoder), mtp=mean(load.mtp), loss=mean(load.loss), leading=mean(load.leading))


def rank_load(stages: tuple[str, ...], pp: int, num_leading: int = 0) -> RankLoad:
    """Per-rank sums over the rank's virtual stages k, k + pp, k + 2 pp, ..."""
    rank = np.arange(len(stages)) % pp
    count = {c: np.bincount(rank, weights=[st.count(c) for st in stages], minlength=pp) for c in "tmL"}
    first_layer = np.cumsum([0] + [st.count("t") for st in stages[:-1]])   # global index of each stage's first t
    leading = [np.clip(num_leading - f, 0, st.count("t")) for f, st in zip(first_layer, stages)]
    return RankLoad(decoder=count["t"], mtp=count["m"], loss=count["L"],
                    leading=np.bincount(rank, weights=leading, minlength=pp))
