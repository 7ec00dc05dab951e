"""Synthetic nccl-tests logs for parser, fit and upload tests: NOT measurements.

``synthetic_log`` writes the table nccl-tests prints, with times from one alpha-beta line,
t = latency + factor(op, n) * S / busbw (nccl-tests PERFORMANCE.md), the same in place and out
of place, and one '# Rank' line per GPU on the hosts given.
"""

from __future__ import annotations

OPS = {"all_reduce": ("all_reduce_perf", lambda n: 2 * (n - 1) / n),
       "all_gather": ("all_gather_perf", lambda n: (n - 1) / n),
       "reduce_scatter": ("reduce_scatter_perf", lambda n: (n - 1) / n)}


def synthetic_log(op: str, num_gpus: int, num_hosts: int, latency_s: float, busbw_bytes_per_s: float,
                  sizes=tuple(2**k for k in range(20, 34))) -> str:
    """The log of ``num_gpus`` ranks, ``num_gpus / num_hosts`` per host (1 MiB to 8 GiB by default)."""
    binary, factor = OPS[op]
    per_host = num_gpus // num_hosts
    lines = ["# SYNTHETIC nccl-tests log for perfmodel's tests -- NOT A MEASUREMENT.",
             "# nccl-tests version 2.13.9 nccl-headers=21903 nccl-library=21903",
             f"# Collective test starting: {binary}",
             "# Using devices"]
    for r in range(num_gpus):
        host, device = r // per_host, r % per_host
        lines.append(f"#  Rank {r:2d} Group  0 Pid {40000 + r:6d} on  node{host:03d} device {device:2d} "
                     f"[0x{16 + device:02x}] SYNTHETIC GPU 80GB")
    lines += ["#",
              "#" + " " * 62 + "out-of-place" + " " * 23 + "in-place",
              "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   "
              "busbw #wrong",
              "#        (B)    (elements)" + " " * 31 + "(us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)"]
    for S in sizes:
        t = latency_s + factor(num_gpus) * S / busbw_bytes_per_s
        algbw = S / t / 1e9
        cols = f"{t * 1e6:.2f}  {algbw:.2f}  {algbw * factor(num_gpus):.2f}      0"
        lines.append(f"  {S:12d}  {S // 4:12d}     float     sum      -1  {cols}  {cols}")
    lines.append("# Avg bus bandwidth    : 0")
    return "\n".join(lines) + "\n"
