"""Eager PyTorch element-wise operations of a Llama block, timed alone, against the model's
memory-bound pricing of them (GPU to measure; any machine to compare).

    python -m calibration.eager_ops_probe [--seq 8192] [--repeats 20] [--out FILE.yaml]   (needs a GPU)
    python -m calibration.eager_ops_probe --compare FILE.yaml [--hardware h100-sxm]        (anywhere)

The step checks (docs/calibration.md, 'One training step end to end') find the eager
element-wise work of a step slower than the model's pricing (bytes at the STREAM rate, the
backward twice the forward), but their kernel table does not split it by operation. This probe
times each operation of Llama 3 8B's block as calibration/step_check.py runs it (its own
functions), on one micro-batch of ``--seq`` tokens:

- ``norm``: one RMSNorm of (1, seq, 4096) with its weight (the model's ``norm`` counts two);
- ``rope``: the rotary embedding of Q (32 heads of 128) and of K (8 heads);
- ``repeat_kv``: K and V copied from 8 groups to 32 heads;
- ``activation``: SwiGLU of two (1, seq, 14336) projections.

Each repeat times the forward, then the backward alone (``torch.autograd.grad`` of the outputs
with respect to every input, a gradient of ones), with CUDA events; the medians are written.
``--compare`` sets them beside ``perfmodel.formulas.compute.op_time`` for the same operations
with the hardware's profile. A diagnostic: nothing here feeds a profile.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import yaml

from perfmodel.spec.errors import InputError, read_data_file
from perfmodel.spec.limits import MAX_BENCH_REPEATS

PRESET = "llama3-8b"
HIDDEN, HEADS, GROUPS, HEAD_DIM, FFN = 4096, 32, 8, 128, 14336
"""Llama 3 8B (Dubey et al. 2024, Table 3), as the step checks build it."""
MIN_SEQ, MAX_SEQ = 128, 65536
"""Tokens per micro-batch: the step checks' 4k-16k inside; at 64k SwiGLU's inputs are 1.9 GB each."""
OPS = ("norm", "rope", "repeat_kv", "activation")
PER_LAYER = {"norm": 2, "rope": 1, "repeat_kv": 1, "activation": 1}
"""Times each probed operation runs per layer, as the model's op counts it (two RMSNorms)."""


def _cases(torch, F, seq: int) -> dict:
    """op -> (forward function, inputs needing gradients)."""
    from calibration.step_check import repeat_kv, rms_norm, rope_table, rotary, swiglu

    def t(*shape):
        return torch.randn(*shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)

    x, w = t(1, seq, HIDDEN), t(HIDDEN)
    q, k, v = t(1, seq, HEADS, HEAD_DIM), t(1, seq, GROUPS, HEAD_DIM), t(1, seq, GROUPS, HEAD_DIM)
    gate, up = t(1, seq, FFN), t(1, seq, FFN)
    rope = rope_table(torch, seq, HEAD_DIM)
    return {
        "norm": (lambda: (rms_norm(torch, x, w),), (x, w)),
        "rope": (lambda: (rotary(torch, q, rope), rotary(torch, k, rope)), (q, k)),
        "repeat_kv": (lambda: (repeat_kv(k, HEADS), repeat_kv(v, HEADS)), (k, v)),
        "activation": (lambda: (swiglu(F, gate, up),), (gate, up)),
    }


def measure(seq: int, repeats: int) -> dict:
    import torch
    import torch.nn.functional as F

    out = {}
    for op, (fwd, inputs) in _cases(torch, F, seq).items():
        fwd_ms, bwd_ms = [], []
        for i in range(3 + repeats):
            e = [torch.cuda.Event(enable_timing=True) for _ in range(3)]
            e[0].record()
            outs = fwd()
            e[1].record()
            torch.autograd.grad(outs, inputs, [torch.ones_like(o) for o in outs])
            e[2].record()
            torch.cuda.synchronize()
            if i >= 3:
                fwd_ms.append(e[0].elapsed_time(e[1]))
                bwd_ms.append(e[1].elapsed_time(e[2]))
        out[op] = {"fwd_ms": statistics.median(fwd_ms), "bwd_ms": statistics.median(bwd_ms)}
    return out


def _model_times(seq: int, hardware: str, full_rate: bool = False) -> dict:
    """op -> (op, forward s, backward s, the hardware's efficiencies) for the probed operations of
    one layer at ``seq`` tokens, with the hardware's profile; ``full_rate``: as if their kernels
    reached the STREAM rate (no ``stream_class``)."""
    import dataclasses

    from calibration.step_check import scenario_dict
    from perfmodel.engine.rules import resolve
    from perfmodel.formulas.compute import op_time
    from perfmodel.formulas.workload import LayerKind, layer_ops
    from perfmodel.spec.profile import efficiencies_for
    from perfmodel.spec.scenario import hardware_of, parse_scenario

    sc = parse_scenario(scenario_dict(PRESET, 1, seq, 1, 1, hardware))
    eff = efficiencies_for(hardware_of(sc))[0]
    r = resolve(sc, eff)
    j = r.job
    out = {}
    for op in layer_ops(j.model, LayerKind.DENSE, j.software):
        name = op.name.split("/")[-1]
        if name in PER_LAYER:
            priced = dataclasses.replace(op, stream_class=None) if full_rate else op
            t = op_time(priced, j.model, r.layouts, seq, j.precision, j.hardware, eff, j.software)
            out[name] = (op, float(t.fwd_s[0]), float(t.bwd_s[0]), eff)
    return out


def model_ms(seq: int, hardware: str) -> dict:
    """op -> (forward ms, backward ms) the model gives one of the probed operations."""
    return {name: (fwd * 1e3 / PER_LAYER[name], bwd * 1e3 / PER_LAYER[name])
            for name, (_, fwd, bwd, _) in _model_times(seq, hardware).items()}


def load_result(path) -> dict:
    """A probe result file, checked: its ``seq`` and the four ops' forward and backward ms."""
    data = read_data_file(path, "--compare")
    ops = data.get("ops") if isinstance(data, dict) else None
    seq = data.get("seq") if isinstance(data, dict) else None
    if not isinstance(ops, dict) or set(ops) != set(OPS) or not isinstance(seq, int) or not MIN_SEQ <= seq <= MAX_SEQ:
        raise InputError("--compare", f"{path} is not an eager_ops_probe result (seq {MIN_SEQ}-{MAX_SEQ} and ops "
                                      f"{', '.join(OPS)})")
    for op in OPS:
        m = ops[op]
        if not isinstance(m, dict) or not all(isinstance(m.get(k), (int, float)) and m[k] > 0 for k in ("fwd_ms", "bwd_ms")):
            raise InputError("--compare", f"{path}: {op}: fwd_ms and bwd_ms must be positive numbers")
    return data


def stream_fractions(paths, hardware: str = "h100-sxm") -> dict:
    """(op, 'fwd' | 'bwd') -> the median over the result files of the fraction of the STREAM rate
    the measured kernels reached on the bytes the model counts: the model's time at a fraction of
    1, less its per-kernel overhead, over the measured time less the same overhead
    (a hardware spec's ``efficiency.stream_fractions`` holds these)."""
    samples: dict = {}
    for path in paths:
        data = load_result(path)
        for name, (op, fwd, bwd, eff) in _model_times(data["seq"], hardware, full_rate=True).items():
            kernels = {"fwd": op.kernels,
                       "bwd": op.bwd_kernels or op.kernels if op.bwd_bytes_per_token is not None else 2 * op.kernels}
            for p, model in (("fwd", fwd), ("bwd", bwd)):
                overhead = kernels[p] * eff.kernel_overhead_s
                measured = data["ops"][name][f"{p}_ms"] * 1e-3 * PER_LAYER[name]
                samples.setdefault((name, p), []).append((model - overhead) / (measured - overhead))
    return {k: statistics.median(v) for k, v in samples.items()}


def compare(path: str, hardware: str) -> int:
    data = load_result(path)
    ops, seq = data["ops"], data["seq"]
    model = model_ms(seq, hardware)
    print(f"{data.get('device', '?')}, {seq} tokens: measured against the model ({hardware} profile), ms")
    total_m = total_p = 0.0
    for op in OPS:
        m, p = ops[op], model[op]
        mf, mb = float(m["fwd_ms"]), float(m["bwd_ms"])
        total_m, total_p = total_m + mf + mb, total_p + p[0] + p[1]
        print(f"  {op:11s} forward {mf:7.3f} / {p[0]:7.3f} ({mf / p[0]:.2f}x)   backward {mb:7.3f} / {p[1]:7.3f} "
              f"({mb / p[1]:.2f}x)")
    print(f"  all         {total_m:7.3f} / {total_p:7.3f} ({total_m / total_p:.2f}x)")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m calibration.eager_ops_probe", description=__doc__.splitlines()[0])
    p.add_argument("--seq", type=int, default=8192)
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--out", default=None)
    p.add_argument("--compare", default=None, metavar="FILE.yaml")
    p.add_argument("--hardware", default="h100-sxm")
    args = p.parse_args(argv)
    try:
        if args.compare:
            return compare(args.compare, args.hardware)
        if not MIN_SEQ <= args.seq <= MAX_SEQ:
            raise InputError("--seq", f"must be {MIN_SEQ:,} to {MAX_SEQ:,} tokens, got {args.seq:,}")
        if not 1 <= args.repeats <= MAX_BENCH_REPEATS:
            raise InputError("--repeats", f"must be 1 to {MAX_BENCH_REPEATS}, got {args.repeats}")
        try:
            import torch
        except ImportError:
            raise InputError("eager_ops_probe", "torch is not installed (pip install 'perfmodel[bench]')") from None
        if not torch.cuda.is_available():
            raise InputError("eager_ops_probe", "needs a CUDA GPU; torch sees none")
        result = {"device": torch.cuda.get_device_name(), "torch_version": str(torch.__version__), "seq": args.seq,
                  "repeats": args.repeats, "ops": measure(args.seq, args.repeats)}
        text = yaml.safe_dump(result, sort_keys=False)
        if args.out:
            Path(args.out).write_text(text)
        print(text, end="")
        return 0
    except InputError as exc:
        print(f"eager_ops_probe: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
