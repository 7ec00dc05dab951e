"""The global batch as GPUs are added: the rungs a study may try, from the scenario's batch
doubling up to a limit in tokens (``perfmodel.spec.studies``: by default Llama 3's 16M tokens).

======  ===========================================================================
B_0     the scenario's global batch (sequences per optimizer step)
s       sequence length (tokens)
B_max   the batch limit in tokens (``max_batch_tokens``)
B_k     B_0 x 2^k for k = 0, 1, ... while B_k x s <= B_max (B_0 always, even above B_max)
======  ===========================================================================

Real runs grow the batch by doubling it (Llama 3 405B: 4M, 8M, then 16M tokens; Llama Team
2024, section 3.4.1), so the rungs are powers of two of the scenario's own batch, which keeps
every divisor of B_0 (a data-parallel size, a micro-batch size) a divisor of each rung. Within
the limit, the tokens to train are taken as unchanged (below the critical batch, McCandlish et
al. 2018, more tokens per step cut the number of steps in proportion).
"""

from __future__ import annotations

from perfmodel.spec.errors import InputError
from perfmodel.spec.scenario import Scenario

MAX_BATCH_DOUBLINGS = 12
"""At most 12 doublings (4,096 times the scenario's batch): each rung is a layout search per GPU
count and hardware type, so the rungs bound the work (Llama 3 405B's 16M tokens is two doublings
of its first 4M-token steps)."""


def batch_rungs(scenario: Scenario, max_batch_tokens: float | None) -> tuple[int, ...]:
    """The global batches (sequences) a study may use: B_0, 2 B_0, ... up to ``max_batch_tokens``
    (None: B_0 only). InputError when the limit allows more than ``MAX_BATCH_DOUBLINGS`` doublings."""
    b0, s = scenario.global_batch_size, scenario.seq_length
    if max_batch_tokens is None:
        return (b0,)
    if not max_batch_tokens > 0:
        raise InputError("max_batch_tokens", f"must be > 0, got {max_batch_tokens}")
    rungs = [b0]
    while (rungs[-1] * 2) * s <= max_batch_tokens:
        if len(rungs) > MAX_BATCH_DOUBLINGS:
            raise InputError("max_batch_tokens", f"{max_batch_tokens:.4g} tokens is more than {MAX_BATCH_DOUBLINGS} "
                                                 f"doublings of global_batch_size({b0}) x seq_length({s}) = {b0 * s} "
                                                 f"tokens; raise the batch or lower the limit")
        rungs.append(rungs[-1] * 2)
    return tuple(rungs)


def grown_batch(scenario: Scenario, num_gpus: int, max_batch_tokens: float) -> int:
    """``scale --mode grow``: the batch doubles each time the GPUs double past the scenario's
    count, B_0 x 2^floor(log2(N / N_0)), never below B_0 and never past the limit's last rung."""
    rungs = batch_rungs(scenario, max_batch_tokens)
    ratio, k = num_gpus / scenario.num_gpus, 0
    while k + 1 < len(rungs) and 2 ** (k + 1) <= ratio:
        k += 1
    return rungs[k]
