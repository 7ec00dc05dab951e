"""The microbenchmark suite: the same pipeline on every backend.

=============  ===========================================================================
gemm           square sweep plus the shapes ``perfmodel.formulas.workload.layer_ops`` gives for a few
               model presets (forward m x n x k, input gradient m x k x n, weight gradient
               k x n x m), per precision
grouped        MoE expert GEMMs (forward up and down) of a few MoE presets: one grouped
               kernel, and one GEMM per expert, over tokens per expert
attention      softmax(Q K^T / sqrt(d)) V forward (and backward where autograd exists) at a
               fixed token count b * s, over sequence lengths
hbm            STREAM copy (2 arrays) and triad (3 arrays), bytes = arrays x array size
elementwise    framework ops on large arrays (add; gelu on torch, multiply on numpy)
launch         per-call time of a one-element op: dispatch + launch, no work
h2d            host-to-device and device-to-host copies (a host memcpy on the CPU backends)
collective     all_reduce, all_gather, reduce_scatter, all_to_all over 8 B .. 1 GiB
               (torch.distributed; see ``bench_torch``)
=============  ===========================================================================

Each point is warmed up, then timed ``repeats`` times; a repeat runs ``inner`` calls back
to back, with ``inner`` chosen so that one repeat lasts about ``target_sample_s`` (timer
resolution and launch jitter then average out). On a GPU the kernels are captured once in a
CUDA graph and each repeat replays it between CUDA events, so a small kernel is timed on
the GPU and not at the rate the host can issue it. Launch and h2d keep eager calls, whose
host cost is what they measure, and so do attention, the STREAM kernels and the one-kernel
grouped GEMM, whose kernels outlast the host's issue time; ``Record.timing`` says which. The
record keeps every repeat, the median and the 10th/90th percentiles.
"""

from __future__ import annotations

import math
import os
import platform
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from perfmodel.formulas.compute import ATTENTION_BWD_OVER_FWD_EXECUTED
from perfmodel.formulas.counts import attention_fwd_flop_per_token
from perfmodel.formulas.workload import LayerKind, Op, OpKind, TpSplit, layer_ops
from perfmodel.spec.errors import InputError
from perfmodel.spec.model import ModelSpec
from perfmodel.spec.software import SoftwareStack

from .results import Metadata, Record, Results, write_results
from .timing import MAX_INNER, Plan, cpu_name, host_time_calls, slug, timed_record, today  # noqa: F401  (re-exported)

FLOP_PER_MAC = 2
GROUPS = ("gemm", "grouped", "attention", "memory", "launch", "h2d", "collective")
"""The suite's groups, in the order they run (``bench-hw --only`` picks some)."""

INLINE_MODELS = {
    # Used when perfmodel/data/models.yaml lacks the preset.
    "llama3-8b": ModelSpec(
        name="Llama 3 8B", num_layers=32, hidden_size=4096, num_attention_heads=32,
        num_query_groups=8, ffn_hidden_size=14336, gated_mlp=True, vocab_size=128256),
    # Llama 3 paper (Dubey et al. 2024) Table 3; HF meta-llama/Meta-Llama-3-8B config.json.
    "tiny": ModelSpec(
        name="tiny (CPU smoke test)", num_layers=2, hidden_size=256, num_attention_heads=4,
        ffn_hidden_size=1024, vocab_size=1024),
    # Not a published model: small enough that every GEMM runs in milliseconds on a CPU.
}


def plan_for(device_kind: str, quick: bool) -> Plan:
    """Defaults: 'cuda' sizes are those of training kernels; 'cpu' sizes keep a run short."""
    MiB, GiB = 2**20, 2**30
    if device_kind == "cuda":
        return Plan(
            gemm_squares=(256, 512, 1024, 2048, 4096) if quick else (256, 512, 1024, 2048, 4096, 8192, 16384),
            gemm_models=("llama3-8b",) if quick else ("llama3-8b", "llama3-70b", "gpt3-175b"),
            gemm_tokens=(4096,) if quick else (2048, 8192), gemm_tps=(1, 8), gemm_max_flop=2e13,
            grouped_models=("qwen3-30b-a3b",) if quick else ("qwen3-30b-a3b", "mixtral-8x7b", "deepseek-v3"),
            grouped_tokens=(512,) if quick else (128, 512, 2048, 8192),
            attention_seqs=(1024, 4096) if quick else (512, 1024, 2048, 4096, 8192, 16384),
            attention_tokens=16384, attention_heads=32, attention_head_dim=128,
            stream_array_bytes=(256 * MiB,) if quick else (256 * MiB, 1 * GiB, 2 * GiB),
            h2d_bytes=(16 * MiB,) if quick else (1 * MiB, 16 * MiB, 256 * MiB, 1 * GiB),
            collective_max_bytes=(64 * MiB) if quick else (4 * GiB),
            repeats=5 if quick else 20, warmup=3 if quick else 10, target_sample_s=2e-3)
    return Plan(
        gemm_squares=(64, 128, 256) if quick else (64, 128, 256, 512, 1024, 2048),
        gemm_models=("tiny",) if quick else ("tiny", "llama3-8b"),
        gemm_tokens=(64,) if quick else (256,), gemm_tps=(1, 8),
        gemm_max_flop=2e8 if quick else 2e10, grouped_models=(), grouped_tokens=(),
        attention_seqs=(64, 128, 256) if quick else (128, 256, 512, 1024),
        attention_tokens=512 if quick else 2048, attention_heads=2, attention_head_dim=32,
        stream_array_bytes=(4 * MiB,) if quick else (64 * MiB, 256 * MiB),
        h2d_bytes=(4 * MiB,) if quick else (16 * MiB, 128 * MiB),
        collective_max_bytes=(1 * MiB) if quick else (64 * MiB),
        repeats=5 if quick else 10, warmup=1 if quick else 3,
        target_sample_s=5e-4 if quick else 2e-3)


# --------------------------------------------------------------------------------- timing
def measure(backend, fn, plan: Plan, graph: bool = True) -> tuple[tuple[float, ...], str]:
    """Seconds per call, one value per repeat, and how they were timed. ``graph`` asks for
    GPU time alone (kernels replayed from a CUDA graph) where the backend can give it."""
    for _ in range(plan.warmup):
        fn()
    backend.sync()
    first, _ = backend.time_calls(fn, 1, 2, graph)
    inner = int(min(MAX_INNER, max(1, math.ceil(plan.target_sample_s / max(min(first), 1e-9)))))
    times, timing = backend.time_calls(fn, inner, plan.repeats, graph)
    return tuple(times), timing


def model_spec(ref: str) -> ModelSpec:
    """A preset from perfmodel/data/models.yaml, else the inline fallback."""
    try:
        from perfmodel.spec.presets import load_model

        return load_model(ref)
    except (InputError, ImportError, OSError, KeyError):
        if ref in INLINE_MODELS:
            return INLINE_MODELS[ref]
        raise InputError("model", f"unknown model {ref!r} for the GEMM sweep") from None


def workload_gemm_shapes(models, tokens, tps) -> list[tuple[int, int, int]]:
    """(m, n, k) of every dense-layer GEMM, sharded by TP, with its two backward GEMMs."""
    shapes = []
    for ref in models:
        for op in layer_ops(model_spec(ref), LayerKind.DENSE, SoftwareStack()):
            if op.kind is not OpKind.GEMM:
                continue
            for tp in tps:
                n = op.n // tp if op.tp_split is TpSplit.COLUMN else op.n
                k = op.k // tp if op.tp_split is TpSplit.ROW else op.k
                for m in tokens:
                    shapes += [(m, n, k), (m, k, n), (k, n, m)]   # fwd, input grad, weight grad
    return list(dict.fromkeys(shapes))


EP_SCALE_UP = 8
"""Expert parallelism assumed for the grouped sweep of presets with many experts: one
8-GPU scale-up domain, so a GPU computes num_experts / 8 experts (a measurement shape, not
a model input)."""
MANY_EXPERTS = 64


def grouped_gemm_shapes(models, tokens_per_expert) -> list[tuple[int, int, int, int]]:
    """(groups, m, n, k) of the forward expert GEMMs of MoE presets: the experts one GPU holds
    (all of them below MANY_EXPERTS, else num_experts / EP_SCALE_UP), m tokens each."""
    shapes = []
    for ref in models:
        spec = model_spec(ref)
        if spec.moe is None:
            raise InputError("grouped_models", f"{ref!r} is not a mixture-of-experts preset")
        experts = spec.moe.num_experts
        groups = experts if experts < MANY_EXPERTS else experts // EP_SCALE_UP
        for op in layer_ops(spec, LayerKind.MOE, SoftwareStack()):
            if op.kind is OpKind.GEMM and op.expert:
                shapes += [(groups, m, op.n, op.k) for m in tokens_per_expert]
    return list(dict.fromkeys(shapes))


def attention_flop(batch: int, heads: int, seq: int, head_dim: int, causal: bool) -> tuple[float, float]:
    """(forward, backward) FLOPs in ``perfmodel.formulas.compute``'s convention."""
    op = Op("attention/core", OpKind.ATTENTION, attn_heads=heads, attn_qk_dim=head_dim, attn_v_dim=head_dim)
    fwd = attention_fwd_flop_per_token(op, seq, causal) * batch * seq
    return fwd, ATTENTION_BWD_OVER_FWD_EXECUTED * fwd


# ------------------------------------------------------------------------------- the suite
def require_groups(groups) -> tuple[str, ...]:
    """``groups`` if each is one of the suite's ``GROUPS`` (a one-line InputError naming --only if not)."""
    groups = tuple(groups)
    if not groups:
        raise InputError("--only", f"expected one or more of {', '.join(GROUPS)}, got nothing")
    for name in groups:
        if name not in GROUPS:
            raise InputError("--only", f"unknown group {name!r}; use {', '.join(GROUPS)}")
    return groups


def run_suite(backend, plan: Plan, log=print, groups: tuple[str, ...] = GROUPS) -> Results:
    """Every group of ``groups`` (default: the whole suite), in the suite's order."""
    groups = require_groups(groups)
    runners = {"gemm": _gemm, "grouped": _grouped, "attention": _attention, "memory": _memory,
               "launch": _launch, "h2d": _h2d, "collective": lambda b, p: b.collectives(p)}
    records: list[Record] = []
    for name in GROUPS:
        if name not in groups:
            continue
        t0 = time.perf_counter()
        new = runners[name](backend, plan)
        records += new
        log(f"  {name:<10} {len(new):4d} points  {time.perf_counter() - t0:6.1f} s")
    return Results(metadata=backend.metadata(), records=tuple(records))


def _gemm(backend, plan: Plan) -> list[Record]:
    squares = [(s, s, s) for s in plan.gemm_squares]
    shapes = squares + workload_gemm_shapes(plan.gemm_models, plan.gemm_tokens, plan.gemm_tps)
    out = []
    for precision in backend.gemm_precisions():
        # fp8 twice where the backend can: precise (split) accumulation, which the backward
        # GEMMs of training stacks use, and fast accumulation, which their forward GEMM uses
        modes = (False, True) if precision == "fp8" and backend.times_fast_accum else (False,)
        for m, n, k in dict.fromkeys(shapes):
            flop = FLOP_PER_MAC * m * n * k
            if flop > plan.gemm_max_flop:
                continue
            for fast in modes:
                made = backend.make_gemm(m, n, k, precision, fast_accum=fast)
                if made is None:
                    continue
                fn, impl = made
                out.append(timed_record(measure(backend, fn, plan), kind="gemm", op="matmul",
                                        precision=precision, shape=(m, n, k), flop=float(flop), impl=impl))
    return out


def _grouped(backend, plan: Plan) -> list[Record]:
    out = []
    for groups, m, n, k in grouped_gemm_shapes(plan.grouped_models, plan.grouped_tokens):
        flop = FLOP_PER_MAC * m * n * k * groups
        for fn, impl, capturable in backend.make_grouped_gemm(groups, m, n, k):
            out.append(timed_record(measure(backend, fn, plan, graph=capturable), kind="gemm", op="grouped_mm",
                                    precision="bf16", shape=(m, n, k), groups=groups, flop=float(flop),
                                    impl=impl))
    return out


def _attention(backend, plan: Plan) -> list[Record]:
    out = []
    h, d = plan.attention_heads, plan.attention_head_dim
    for seq in plan.attention_seqs:
        batch = max(1, plan.attention_tokens // seq)
        for causal in backend.attention_causal():
            flops = attention_flop(batch, h, seq, d, causal)
            for backward, flop in zip((False, True), flops):
                for fn, impl, precision in backend.make_attention(batch, h, seq, d, causal, backward):
                    # eager: each call runs >= 100 us here, and autograd is not captured
                    out.append(timed_record(measure(backend, fn, plan, graph=False), kind="attention",
                                            op="sdpa_bwd" if backward else "sdpa_fwd", precision=precision,
                                            shape=(batch, h, seq, d), causal=causal, flop=flop, impl=impl))
    return out


def _memory(backend, plan: Plan) -> list[Record]:
    out = []
    for nbytes in plan.stream_array_bytes:
        for kind, ops in (("hbm", ("copy", "triad")), ("elementwise", backend.elementwise_ops)):
            for op in ops:
                fn, moved = backend.make_stream(op, nbytes)
                # eager: a captured copy_ becomes a graph memcpy node, which ran at 2.4 of 3.0 TB/s
                # on an H100 for arrays of 1 GiB and more; each call here outlasts its issue
                out.append(timed_record(measure(backend, fn, plan, graph=False), kind=kind, op=op,
                                        precision="fp32", size_bytes=int(moved), impl=backend.name))
    return out


def _launch(backend, plan: Plan) -> list[Record]:
    fn, impl = backend.make_launch()
    return [timed_record(measure(backend, fn, plan, graph=False), kind="launch", op="tiny_op", impl=impl)]


def _h2d(backend, plan: Plan) -> list[Record]:
    out = []
    for direction in ("h2d", "d2h"):
        for nbytes in plan.h2d_bytes:
            made = backend.make_h2d(direction, nbytes)
            if made is not None:
                fn, impl = made
                out.append(timed_record(measure(backend, fn, plan, graph=False), kind="h2d", op=direction,
                                        size_bytes=int(nbytes), impl=impl))
    return out


# --------------------------------------------------------------------------- numpy backend
@dataclass(frozen=True)
class NumpyBackend:
    """CPU with numpy only: always available; exercises the whole pipeline."""

    quick: bool = True
    name: str = "numpy"
    device_kind: str = "cpu"
    elementwise_ops: tuple[str, ...] = ("add", "mul")
    times_fast_accum = False
    """numpy has no fp8 GEMM, so no fast-accumulation variant to time."""

    def sync(self) -> None:
        pass

    def time_calls(self, fn, inner: int, repeats: int, graph: bool = True) -> tuple[list[float], str]:
        return host_time_calls(fn, inner, repeats), "host"

    def gemm_precisions(self) -> tuple[str, ...]:
        return ("fp32",) if self.quick else ("fp32", "fp64")

    def make_gemm(self, m, n, k, precision, fast_accum: bool = False):
        dtype = {"fp32": np.float32, "fp64": np.float64}[precision]
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((m, k), dtype=dtype), rng.standard_normal((k, n), dtype=dtype)
        c = np.empty((m, n), dtype=dtype)
        return (lambda: np.matmul(a, b, out=c)), "numpy.matmul"

    def make_grouped_gemm(self, groups, m, n, k):
        return []         # the CPU plans measure no expert GEMMs

    def attention_causal(self) -> tuple[bool, ...]:
        return (False,)   # numpy computes the full s x s scores

    def make_attention(self, batch, heads, seq, head_dim, causal, backward):
        if backward or causal:
            return []
        rng = np.random.default_rng(0)
        q, k, v = (rng.standard_normal((batch * heads, seq, head_dim), dtype=np.float32) for _ in range(3))
        kt, o = np.ascontiguousarray(k.transpose(0, 2, 1)), np.empty_like(q)
        scale = np.float32(1.0 / math.sqrt(head_dim))

        def fn():
            s = np.matmul(q, kt)
            s *= scale
            s -= s.max(axis=-1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(axis=-1, keepdims=True)
            np.matmul(s, v, out=o)

        return [(fn, "numpy softmax(QK^T)V", "fp32")]

    def make_stream(self, op, array_bytes):
        n = max(1, array_bytes // 4)
        a, b, c = (np.full(n, x, dtype=np.float32) for x in (1.0, 2.0, 0.5))
        s = np.float32(3.0)
        ops = {
            "copy": ((lambda: np.copyto(a, b)), 2),
            # numpy needs two passes for b + s*c; the STREAM count (3 arrays) is kept
            "triad": ((lambda: (np.multiply(c, s, out=a), np.add(a, b, out=a))), 3),
            "add": ((lambda: np.add(b, c, out=a)), 3),
            "mul": ((lambda: np.multiply(b, s, out=a)), 2),
        }
        fn, arrays = ops[op]
        return fn, arrays * n * 4

    def make_launch(self):
        x, y, z = (np.ones(1, dtype=np.float32) for _ in range(3))
        return (lambda: np.add(x, y, out=z)), "numpy.add (1 element)"

    def make_h2d(self, direction, nbytes):
        src, dst = np.ones(nbytes, dtype=np.uint8), np.empty(nbytes, dtype=np.uint8)
        return (lambda: np.copyto(dst, src)), "host memcpy (no device)"

    def collectives(self, plan: Plan) -> list[Record]:
        return []

    def metadata(self) -> Metadata:
        return Metadata(device=cpu_name(), backend=self.name, date=today(),
                        numpy_version=np.__version__, notes=f"python {platform.python_version()}")


def select_backend(name: str, quick: bool, gloo_ranks: int = 0):
    """'numpy', 'torch' (CUDA if present, else CPU) or 'auto' (torch with CUDA, else numpy)."""
    if name == "numpy":
        return NumpyBackend(quick=quick)
    try:
        from .bench_torch import TorchBackend, torch_available
    except ImportError:
        torch_available = None
    if name == "torch":
        if torch_available is None or not torch_available():
            raise InputError("backend", "torch is not installed (pip install 'perfmodel[bench]')")
        return TorchBackend.create(quick=quick, gloo_ranks=gloo_ranks)
    if name == "auto":
        if torch_available is not None and torch_available(cuda=True):
            return TorchBackend.create(quick=quick, gloo_ranks=gloo_ranks)
        return NumpyBackend(quick=quick)
    raise InputError("backend", f"unknown backend {name!r}; use auto, numpy or torch")


def run_and_write(backend, plan: Plan, out_dir, log=print, groups: tuple[str, ...] = GROUPS) -> Path | None:
    """Run the suite (or ``groups`` of it) and write ``<out_dir>/<device>-<date>/results.yaml``."""
    results = run_suite(backend, plan, log=log, groups=groups)
    md = results.metadata
    if os.environ.get("RANK", "0") != "0":      # under torchrun only rank 0 writes
        return None
    return write_results(results, Path(out_dir) / f"{slug(md.device)}-{md.date}" / "results.yaml")


def with_repeats(plan: Plan, repeats: int | None) -> Plan:
    return plan if repeats is None else replace(plan, repeats=repeats)


def with_overrides(plan: Plan, repeats: int | None = None, warmup: int | None = None,
                   attention_seqs: tuple[int, ...] | None = None) -> Plan:
    """The plan with the values a command line set (None keeps the plan's own)."""
    plan = with_repeats(plan, repeats)
    if warmup is not None:
        plan = replace(plan, warmup=warmup)
    if attention_seqs is not None:
        plan = replace(plan, attention_seqs=tuple(attention_seqs))
    return plan
