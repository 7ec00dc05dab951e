"""Why do FlashAttention-2 kernels run slower inside a training step than alone? (GPU only)

    python -m calibration.attention_probe [--seq 8192] [--repeats 20] [--out FILE.yaml]

The step checks of calibration/results/nvidia-h100-80gb-hbm3-2026-11-2*/ time the SDPA flash
kernels 11-20% slower inside a step than the suite times the same kernel alone. This probe
times one causal SDPA (forward, then backward through autograd) of Llama 3 8B's attention
(32 heads of 128) at one length under variants that each change one thing from the suite's
call, so the difference can be put on one of them:

- ``suite``: batch = 16384 // seq, Q, K, V contiguous in (batch, heads, seq, dim), as bench-hw;
- ``batch1``: the same with batch 1, as the step checks' micro-batch;
- ``step_layout``: batch 1, Q, K, V made as (batch, seq, heads, dim) and transposed, K and V
  repeated from 8 groups by expand and reshape, as calibration/step_check.py does;
- ``after_gemm``: ``step_layout`` with a large bf16 GEMM (the step's MLP shape) run just before
  each timed call, as in a step, where the GEMMs set the clocks and fill the caches.

Each repeat is timed with CUDA events around the forward and around the backward alone. A
diagnostic: it writes what it measured and feeds nothing into a profile.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import yaml

from calibration.cli import MAX_ATTENTION_POINTS, MAX_ATTENTION_SEQ
from perfmodel.spec.limits import MAX_BENCH_REPEATS

HEADS, GROUPS, HEAD_DIM, HIDDEN, FFN = 32, 8, 128, 4096, 14336
"""Llama 3 8B (Dubey et al. 2024, Table 3)."""


def _inputs(torch, variant: str, seq: int):
    dev, bf16 = "cuda", torch.bfloat16
    batch = max(1, 16384 // seq) if variant == "suite" else 1
    if variant in ("suite", "batch1"):
        q, k, v = (torch.randn(batch, HEADS, seq, HEAD_DIM, device=dev, dtype=bf16, requires_grad=True)
                   for _ in range(3))
        return batch, (q, k, v)
    q = torch.randn(batch, seq, HEADS, HEAD_DIM, device=dev, dtype=bf16, requires_grad=True)
    kv = [torch.randn(batch, seq, GROUPS, HEAD_DIM, device=dev, dtype=bf16, requires_grad=True) for _ in range(2)]

    def make():
        k, v = (x[:, :, :, None, :].expand(batch, seq, GROUPS, HEADS // GROUPS, HEAD_DIM)
                .reshape(batch, seq, HEADS, HEAD_DIM) for x in kv)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    return batch, make


def probe(variant: str, seq: int, repeats: int) -> dict:
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    batch, made = _inputs(torch, variant, seq)
    a = torch.randn(batch * seq, HIDDEN, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(FFN, HIDDEN, device="cuda", dtype=torch.bfloat16)
    fwd_ms, bwd_ms = [], []
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        for i in range(3 + repeats):
            q, k, v = made() if callable(made) else made
            if variant == "after_gemm":
                for _ in range(4):
                    torch.mm(a, w.t())
            grad = torch.ones(batch, HEADS, seq, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
            e = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            e[0].record()
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            e[1].record()
            torch.autograd.grad(out, (q, k, v), grad)     # the SDPA backward alone, not the layout's
            e[2].record()
            torch.cuda.synchronize()
            if i >= 3:
                fwd_ms.append(e[0].elapsed_time(e[1]))
                bwd_ms.append(e[1].elapsed_time(e[2]))
    flop_fwd = 4 * batch * HEADS * HEAD_DIM * seq * seq / 2          # causal: half the score matrix
    peak = 989.4e12                                                   # H100 SXM dense bf16 (datasheet)
    fwd, bwd = statistics.median(fwd_ms), statistics.median(bwd_ms)
    return {"variant": variant, "seq": seq, "batch": batch, "fwd_ms": fwd, "bwd_ms": bwd,
            "fwd_fraction_of_peak": flop_fwd / (fwd * 1e-3) / peak,
            "bwd_fraction_of_peak": 2.5 * flop_fwd / (bwd * 1e-3) / peak,
            "fwd_ms_all": fwd_ms, "bwd_ms_all": bwd_ms}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, nargs="+", default=[8192])
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if not 1 <= len(args.seq) <= MAX_ATTENTION_POINTS or not all(128 <= s <= MAX_ATTENTION_SEQ for s in args.seq):
        print(f"error: --seq: 1 to {MAX_ATTENTION_POINTS} lengths, each 128 to {MAX_ATTENTION_SEQ}", file=sys.stderr)
        return 2
    if not 1 <= args.repeats <= MAX_BENCH_REPEATS:
        print(f"error: --repeats: must be 1 to {MAX_BENCH_REPEATS}, got {args.repeats}", file=sys.stderr)
        return 2
    try:
        import torch
    except ImportError:
        print("error: attention_probe needs torch and a CUDA GPU (pip install 'perfmodel[bench]')", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("error: attention_probe needs a CUDA GPU; torch sees none", file=sys.stderr)
        return 2
    rows = []
    for seq in args.seq:
        for variant in ("suite", "batch1", "step_layout", "after_gemm", "suite"):
            r = probe(variant, seq, args.repeats)
            rows.append(r)
            print(f"seq {seq:6d} {variant:12s} batch {r['batch']:2d}  fwd {r['fwd_ms']:7.3f} ms "
                  f"({r['fwd_fraction_of_peak']:.3f})  bwd {r['bwd_ms']:7.3f} ms ({r['bwd_fraction_of_peak']:.3f})")
    if args.out:
        meta = {"device": torch.cuda.get_device_name(), "torch": str(torch.__version__)}
        Path(args.out).write_text(yaml.safe_dump({"metadata": meta, "rows": rows}, sort_keys=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
