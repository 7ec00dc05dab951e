"""The collective sweep of the PyTorch backend (``bench_torch``): every op of ``SWEEP_OPS`` at
every size on the default process group, as nccl-tests sizes them, in spawned processes (NCCL over
the local GPUs, or gloo over CPU processes) or inside a ``torchrun`` job.

Per repeat the time of a collective is the maximum over ranks (it completes when the slowest
rank does); the number of back-to-back calls is agreed across ranks. Imports torch only inside
its functions.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from pathlib import Path

from .results import Record
from .timing import MAX_INNER, Plan, timed_record

SWEEP_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
FP32_BYTES = 4


def collective_sizes(max_bytes: int) -> tuple[int, ...]:
    """8 B, 16 B, ... doubling up to ``max_bytes`` (nccl-tests -b 8 -f 2)."""
    return tuple(8 * 2**i for i in range(int(math.log2(max(max_bytes, 8) / 8)) + 1))


# ----------------------------------------------------------------------- distributed runs
def spawn_sweep(world: int, pg_backend: str, sizes, plan: Plan) -> list[Record]:
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "records.json"
        mp.spawn(_worker, args=(world, pg_backend, str(Path(tmp) / "store"), sizes, plan, str(out)),
                 nprocs=world, join=True)
        return [Record.model_validate(r) for r in json.loads(out.read_text())]


def _worker(rank, world, pg_backend, store_path, sizes, plan, out_path):
    import torch
    import torch.distributed as dist

    if pg_backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(pg_backend, init_method=f"file://{store_path}", rank=rank, world_size=world)
    try:
        fabric = "scale_up" if pg_backend == "nccl" else "host"
        records = collective_sweep(sizes, plan, fabric)
        if rank == 0:
            Path(out_path).write_text(json.dumps([r.model_dump(mode="json") for r in records]))
    finally:
        dist.destroy_process_group()


def run_in_process(sizes, plan: Plan) -> list[Record]:
    """Inside a torchrun job: every rank sweeps, rank 0 keeps the records."""
    import torch
    import torch.distributed as dist

    local = int(os.environ.get("LOCAL_RANK", 0))
    torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group("nccl")
    world, local_world = dist.get_world_size(), int(os.environ.get("LOCAL_WORLD_SIZE", dist.get_world_size()))
    records = collective_sweep(sizes, plan, "scale_up" if world <= local_world else "scale_out")
    return records if dist.get_rank() == 0 else []


def collective_sweep(sizes, plan: Plan, fabric: str) -> list[Record]:
    """Every op of SWEEP_OPS at every size, on the initialised default process group."""
    import torch
    import torch.distributed as dist

    world = dist.get_world_size()
    cuda = dist.get_backend() == "nccl"
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    out = []
    for op in SWEEP_OPS:
        for size in sizes:
            fn, actual = _collective_call(op, size, world, device)
            try:
                times = _time_collective(fn, plan, cuda, device)
            except RuntimeError as exc:      # e.g. gloo has no reduce_scatter
                if dist.get_rank() == 0:
                    print(f"  {op}: skipped ({str(exc).splitlines()[0][:80]})")
                break
            out.append(timed_record((times, "cuda-events" if cuda else "host"), kind="collective", op=op,
                                    precision="fp32", size_bytes=actual, num_gpus=world, fabric=fabric,
                                    in_place=op == "all_reduce", impl=f"torch.distributed/{dist.get_backend()}"))
    return out


def _collective_call(op: str, size: int, world: int, device):
    import torch
    import torch.distributed as dist

    if op == "all_reduce":
        buf = torch.ones(max(1, size // FP32_BYTES), device=device)
        return (lambda: dist.all_reduce(buf)), buf.numel() * FP32_BYTES
    per_rank = max(1, size // (FP32_BYTES * world))
    small = torch.ones(per_rank, device=device)
    big, big_in = torch.ones(per_rank * world, device=device), torch.ones(per_rank * world, device=device)
    # torch >= 2.13 renames the tensor forms to *_single (same arguments)
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    calls = {
        "all_gather": lambda: gather(big, small),
        "reduce_scatter": lambda: scatter(small, big),
        "all_to_all": lambda: dist.all_to_all_single(big, big_in),
    }
    return calls[op], big.numel() * FP32_BYTES


def _time_collective(fn, plan: Plan, cuda: bool, device) -> tuple[float, ...]:
    import torch
    import torch.distributed as dist

    for _ in range(plan.warmup):
        fn()
    dist.barrier()
    first = torch.tensor([_timed(fn, 1, cuda)], device=device, dtype=torch.float64)
    dist.all_reduce(first, op=dist.ReduceOp.MAX)           # agree on the inner count
    inner = int(min(MAX_INNER, max(1, math.ceil(plan.target_sample_s / max(first.item(), 1e-9)))))
    times = []
    for _ in range(plan.repeats):
        dist.barrier()
        times.append(_timed(fn, inner, cuda) / inner)
    t = torch.tensor(times, device=device, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return tuple(float(x) for x in t.cpu())


def _timed(fn, inner: int, cuda: bool) -> float:
    import torch

    if not cuda:
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        return time.perf_counter() - t0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(inner):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e-3
