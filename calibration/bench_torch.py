"""PyTorch backend of the suite: CUDA when present (CUDA-event timing), else the CPU.

Only imported when torch is installed (the ``bench`` extra); nothing else needs it.

=================  ========================================================================
GEMM               ``torch.mm`` (bf16; fp32 on the CPU); fp8 e4m3 through
                   ``torch._scaled_mm`` with unit per-tensor scales where the GPU has fp8
                   tensor cores (compute capability >= 8.9) and m, n, k are multiples of 16,
                   each shape twice: precise accumulation and ``use_fast_accum=True``
grouped            bf16 expert GEMMs: ``torch._grouped_mm`` (one kernel) where torch has
                   it, and one ``torch.mm`` per expert
attention          ``scaled_dot_product_attention`` pinned to each CUDA backend in turn:
                   flash (FlashAttention-2) and cuDNN, one record per backend (``impl``);
                   backward timed alone (``autograd.grad`` on a retained graph)
memory             ``copy_`` (copy), ``torch.add(b, c, alpha=s)`` (triad, one kernel),
                   ``add``, ``gelu``
launch             ``x.add_(1)`` on one element, back to back
h2d                pinned host <-> device ``copy_(non_blocking=True)``
collectives        torch.distributed: NCCL over all local GPUs (spawned), or the ranks of a
                   ``torchrun`` job; gloo over CPU processes with ``--gloo-ranks N`` (tests
                   the code path, not a fabric). Sizes follow nccl-tests: S is the all-reduce
                   buffer, the gathered output, the scattered input, the all-to-all buffer
                   (``bench_collectives``).
=================  ========================================================================

Per repeat the time of a collective is the maximum over ranks (it completes when the
slowest rank does); the number of back-to-back calls is agreed across ranks.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from dataclasses import dataclass

from .bench_collectives import FP32_BYTES, collective_sizes, run_in_process, spawn_sweep
from .results import FAST_ACCUM_IMPL, Metadata, Record
from .timing import Plan, cpu_name, host_time_calls, today

FP8_MIN_CAPABILITY = (8, 9)
"""Ada (8.9) and Hopper (9.0) introduced fp8 tensor cores (CUDA C Programming Guide)."""
FP8_ALIGN = 16
"""cuBLASLt fp8 GEMMs need m, n, k divisible by 16 (torch._scaled_mm checks this)."""


def torch_available(cuda: bool = False) -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available()) if cuda else True


@dataclass(frozen=True)
class TorchBackend:
    quick: bool
    device: str
    """'cuda' or 'cpu'."""
    fp8: bool
    gloo_ranks: int = 0
    elementwise_ops: tuple[str, ...] = ("add", "gelu")

    @classmethod
    def create(cls, quick: bool, gloo_ranks: int = 0) -> "TorchBackend":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
        if device == "cuda":     # under torchrun each rank measures its own GPU
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        return cls(quick=quick, device=device, fp8=device == "cuda" and _fp8_works(), gloo_ranks=gloo_ranks)

    @property
    def name(self) -> str:
        return f"torch-{self.device}"

    @property
    def device_kind(self) -> str:
        return self.device

    # ------------------------------------------------------------------------ timing
    def sync(self) -> None:
        import torch

        if self.device == "cuda":
            torch.cuda.synchronize()

    def time_calls(self, fn, inner: int, repeats: int, graph: bool = True) -> tuple[list[float], str]:
        """Seconds per call per repeat: CUDA-graph replays when ``graph`` and the calls can be
        captured, else CUDA events around eager calls (host clock on the CPU)."""
        import torch

        if self.device != "cuda":
            return host_time_calls(fn, inner, repeats), "host"
        replay = _captured(fn, inner) if graph else None
        run = replay.replay if replay is not None else (lambda: [fn() for _ in range(inner)])
        pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                 for _ in range(repeats)]
        for start, end in pairs:
            start.record()
            run()
            end.record()
        torch.cuda.synchronize()
        times = [start.elapsed_time(end) * 1e-3 / inner for start, end in pairs]
        return times, "cuda-graph" if replay is not None else "cuda-events"

    # ------------------------------------------------------------------------ kernels
    def gemm_precisions(self) -> tuple[str, ...]:
        if self.device == "cuda":
            return ("bf16", "fp8") if self.fp8 else ("bf16",)
        return ("fp32",) if self.quick else ("fp32", "bf16")

    @property
    def times_fast_accum(self) -> bool:
        """fp8 GEMMs are timed with and without fast accumulation where there are fp8 cores."""
        return self.device == "cuda" and self.fp8

    def make_gemm(self, m, n, k, precision, fast_accum: bool = False):
        import torch

        if precision == "fp8":
            if m % FP8_ALIGN or n % FP8_ALIGN or k % FP8_ALIGN:
                return None
            a = torch.randn(m, k, device=self.device).to(torch.float8_e4m3fn)
            b = torch.randn(n, k, device=self.device).to(torch.float8_e4m3fn).t()   # column-major
            one = torch.ones((), device=self.device, dtype=torch.float32)
            return (lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                             use_fast_accum=fast_accum),
                    FAST_ACCUM_IMPL if fast_accum else "torch._scaled_mm")
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[precision]
        a = torch.randn(m, k, device=self.device, dtype=dtype)
        b = torch.randn(k, n, device=self.device, dtype=dtype)
        c = torch.empty(m, n, device=self.device, dtype=dtype)
        return (lambda: torch.mm(a, b, out=c)), "torch.mm"

    def make_grouped_gemm(self, groups, m, n, k):
        """bf16 expert GEMMs on CUDA as (call, impl, capturable): ``torch._grouped_mm`` (one
        kernel, timed eagerly) where this torch has it, and one ``torch.mm`` per expert (one
        cuBLAS GEMM each, the form of the published H100 point in
        calibration/data/grouped_gemm.yaml; captured, since the host issues them slower than
        small experts run)."""
        import torch

        if self.device != "cuda":
            return []
        a = torch.randn(groups * m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(groups, n, k, device="cuda", dtype=torch.bfloat16).transpose(-2, -1)  # (g, k, n)
        made = []
        if hasattr(torch, "_grouped_mm"):
            offs = torch.arange(m, groups * m + 1, m, device="cuda", dtype=torch.int32)
            try:
                torch._grouped_mm(a, b, offs=offs)
                made.append(((lambda: torch._grouped_mm(a, b, offs=offs)), "torch._grouped_mm", False))
            except (RuntimeError, TypeError):
                pass
        a3, out = a.view(groups, m, k), torch.empty(groups, m, n, device="cuda", dtype=torch.bfloat16)

        def per_expert():
            for i in range(groups):
                torch.mm(a3[i], b[i], out=out[i])

        made.append((per_expert, "torch.mm per expert", True))
        return made

    def attention_causal(self) -> tuple[bool, ...]:
        return (True,) if self.quick else (True, False)

    def make_attention(self, batch, heads, seq, head_dim, causal, backward):
        """One (call, impl, precision) per SDPA backend that runs this shape."""
        import torch
        import torch.nn.functional as F

        dtype = torch.bfloat16 if self.device == "cuda" else torch.float32
        precision = "bf16" if dtype is torch.bfloat16 else "fp32"
        made = []
        for impl, ctx in _sdpa_contexts(self.device):
            q, k, v = (torch.randn(batch, heads, seq, head_dim, device=self.device, dtype=dtype,
                                   requires_grad=backward) for _ in range(3))
            try:
                with ctx():
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            except RuntimeError:
                continue
            if not backward:
                def fwd(ctx=ctx, q=q, k=k, v=v):
                    with ctx():
                        F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                made.append((fwd, impl, precision))
            else:
                grad = torch.randn_like(out)
                made.append(((lambda out=out, q=q, k=k, v=v, grad=grad:
                              torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)), impl, precision))
        return made

    def make_stream(self, op, array_bytes):
        import torch
        import torch.nn.functional as F

        n = max(1, array_bytes // FP32_BYTES)
        a, b, c = (torch.full((n,), x, device=self.device, dtype=torch.float32) for x in (1.0, 2.0, 0.5))
        ops = {
            "copy": ((lambda: a.copy_(b)), 2),
            "triad": ((lambda: torch.add(b, c, alpha=3.0, out=a)), 3),
            "add": ((lambda: torch.add(b, c, out=a)), 3),
            "gelu": ((lambda: F.gelu(b)), 2),
        }
        fn, arrays = ops[op]
        return fn, arrays * n * FP32_BYTES

    def make_launch(self):
        import torch

        x = torch.zeros(1, device=self.device)
        return (lambda: x.add_(1.0)), "torch add_ (1 element)"

    def make_h2d(self, direction, nbytes):
        import torch

        if self.device != "cuda":
            src, dst = torch.ones(nbytes, dtype=torch.uint8), torch.empty(nbytes, dtype=torch.uint8)
            return (lambda: dst.copy_(src)), "host memcpy (no device)"
        host = torch.ones(nbytes, dtype=torch.uint8).pin_memory()
        dev = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        if direction == "h2d":
            return (lambda: dev.copy_(host, non_blocking=True)), "pinned copy_"
        return (lambda: host.copy_(dev, non_blocking=True)), "pinned copy_"

    # ------------------------------------------------------------------------ collectives
    def collectives(self, plan: Plan) -> list[Record]:
        import torch

        sizes = collective_sizes(plan.collective_max_bytes)
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ:      # under torchrun
            return run_in_process(sizes, plan)
        if self.device == "cuda" and torch.cuda.device_count() >= 2:
            return spawn_sweep(torch.cuda.device_count(), "nccl", sizes, plan)
        if self.gloo_ranks >= 2:
            return spawn_sweep(self.gloo_ranks, "gloo", sizes, plan)
        return []

    def metadata(self) -> Metadata:
        import numpy as np
        import torch

        cuda = self.device == "cuda"
        nccl = _nccl_version(torch.cuda.nccl.version()) if cuda else None
        return Metadata(
            device=torch.cuda.get_device_name() if cuda else cpu_name(), backend=self.name, date=today(),
            num_devices=torch.cuda.device_count() if cuda else 1, driver_version=_driver_version() if cuda else None,
            cuda_version=torch.version.cuda, torch_version=torch.__version__, nccl_version=nccl,
            numpy_version=np.__version__, notes=_library_notes(cuda))


def _library_notes(cuda: bool) -> str:
    """cuDNN version, compute capability and SM count: what picks and runs the kernels measured."""
    import torch

    if not cuda:
        return ""
    major, minor = torch.cuda.get_device_capability()
    return (f"cudnn {torch.backends.cudnn.version()}, compute capability {major}.{minor}, "
            f"{torch.cuda.get_device_properties(0).multi_processor_count} SMs")


def _captured(fn, inner: int):
    """A CUDA graph of ``inner`` back-to-back calls, or None when the calls cannot be captured."""
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):        # PyTorch's recipe: run once on a side stream first
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for _ in range(inner):
                fn()
    except RuntimeError as exc:
        torch.cuda.synchronize()
        print(f"    (not captured, timed eagerly: {str(exc).splitlines()[0][:100]})")
        return None
    return graph


def _nccl_version(v) -> str:
    """torch.cuda.nccl.version(): a (major, minor, patch) tuple, or NCCL_VERSION_CODE in old torch."""
    if isinstance(v, int):
        return f"{v // 10000}.{v // 100 % 100}.{v % 100}" if v >= 10000 else f"{v // 1000}.{v // 100 % 10}.{v % 100}"
    return ".".join(str(x) for x in v)


def _fp8_works() -> bool:
    import torch

    if not hasattr(torch, "float8_e4m3fn") or torch.cuda.get_device_capability() < FP8_MIN_CAPABILITY:
        return False
    try:
        a = torch.zeros(FP8_ALIGN, FP8_ALIGN, device="cuda").to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda")
        torch._scaled_mm(a, a.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        return True
    except (RuntimeError, TypeError):
        return False


def _sdpa_contexts(device: str):
    """(impl name, context factory) of each SDPA backend to measure: on CUDA the flash
    (FlashAttention-2) and cuDNN kernels, each pinned; elsewhere the default."""
    if device == "cuda":
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
        except ImportError:
            yield "sdpa-default", contextlib.nullcontext
            return
        yield "sdpa-flash", lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)
        if hasattr(SDPBackend, "CUDNN_ATTENTION"):
            yield "sdpa-cudnn", lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION)
        return
    yield "sdpa-default", contextlib.nullcontext


def _driver_version() -> str | None:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20, check=True)
        return out.stdout.splitlines()[0].strip() or None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
