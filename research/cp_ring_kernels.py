"""Context-parallel ring steps priced at the measured rates of the kernels they actually run.

Both ring implementations the model knows (PyTorch's experimental ``context_parallel`` of the
torchtitan 2412 report and Transformer Engine's ``AttnFuncWithCPAndKVP2P`` of Megatron-Core) keep
2 x cp chunks per sequence, two per rank, and issue one attention call per ring step:

* step 0: the rank's own queries and keys, s/cp each, under the causal mask;
* a step whose keys come from an earlier rank (i <= rank): all s/cp queries against the first of
  the sender's two chunks, s/(2 cp) keys, no mask ("k-half");
* a step whose keys come from a later rank (i > rank): the second of the rank's query chunks,
  s/(2 cp) queries, against all s/cp keys, no mask ("q-half").

The step model prices every step at the causal curve at s/cp keys
(``perfmodel.formulas.compute.op_time``). This script asks how far that is from the rates the
lent H100s measured for the kernels above: the flash (``sdpa-flash``) records of
calibration/results/nvidia-h100-80gb-hbm3-*, causal and non-causal, square shapes, batch x 32
heads x L x 128. A non-causal kernel of L keys stands in for both rectangular shapes (its loop
over keys is L long; the k-half step has twice its queries, the q-half step the same queries and
twice the keys, so its stand-in is the square kernel of s/cp keys). It prints, for each
(s/cp, cp) of the published context-parallel rows, the ring's time at the measured rates over its
time at the causal s/cp rate, forward and backward, for the slowest rank (rank cp - 1: every
later step is k-half) and the mean over ranks.

    python research/cp_ring_kernels.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from statistics import median

import yaml

ROOT = Path(__file__).resolve().parents[1]
RESULTS = sorted((ROOT / "calibration" / "results").glob("nvidia-h100-80gb-hbm3-*/*.yaml"))
IMPL = "sdpa-flash"
LAYOUTS = ((16384, 2), (32768, 2), (32768, 4), (32768, 8), (32768, 16), (32768, 32))
"""(s/cp, cp) of the published context-parallel rows: torchtitan 2412 8B and 405B (s/cp 32K,
cp 2-8), NeMo long-sequence H100 Llama 2 7B (32K at cp 2: 16K; 64K-1M at cp 2-32: 32K)."""


def measured_rates() -> dict:
    """(op, causal, L) -> median FLOP/s over the stored records of ``IMPL``."""
    seen: dict = {}
    for path in RESULTS:
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError:
            continue
        if not isinstance(data, dict):
            continue
        for r in data.get("records") or ():
            if r.get("kind") == "attention" and r.get("impl") == IMPL:
                key = (r["op"], bool(r["causal"]), int(r["shape"][2]))
                seen.setdefault(key, []).append(r["derived"]["flop_per_s"])
    return {k: median(v) for k, v in seen.items()}


def ring_ratio(rates: dict, op: str, s_local: int, cp: int, rank: int) -> float:
    """Time of ``rank``'s ring at the measured sub-kernel rates over its time with every step at
    the causal rate of s/cp keys. FLOPs: step 0 and every later step do the same work (half a
    block of s/cp x s/cp)."""
    causal = rates[(op, True, s_local)]
    k_half = rates[(op, False, s_local // 2)]
    q_half = rates[(op, False, s_local)]
    steps = [1.0 / causal] + [1.0 / (k_half if i <= rank else q_half) for i in range(1, cp)]
    return sum(steps) / (cp / causal)


def main() -> int:
    rates = measured_rates()
    print(f"{len(RESULTS)} result files, {IMPL} records; ratio = ring at the measured sub-kernel rates / "
          "ring at the causal s/cp rate")
    print(f"{'s/cp':>6} {'cp':>3}  {'fwd slowest':>11} {'fwd mean':>9}  {'bwd slowest':>11} {'bwd mean':>9}")
    for s_local, cp in LAYOUTS:
        cells = []
        for op in ("sdpa_fwd", "sdpa_bwd"):
            per_rank = [ring_ratio(rates, op, s_local, cp, r) for r in range(cp)]
            cells += [max(per_rank), sum(per_rank) / cp]
        print(f"{s_local:>6} {cp:>3}  {cells[0]:>11.3f} {cells[1]:>9.3f}  {cells[2]:>11.3f} {cells[3]:>9.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
