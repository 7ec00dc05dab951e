"""A small trace in the PyTorch profiler's (Kineto's) JSON format, with known per-class times.

Made here, not copied: DeepSeek's published training trace (deepseek-ai/profile-data, train.json,
3.1 MB) carries no licence, so it is not used as a fixture. The kernel names follow the libraries'
naming (cuBLAS, FlashAttention, PyTorch, NCCL); the event fields are those torch.profiler writes.

Two steps of 10 ms (us below), each: a cuBLAS GEMM 0-3000, a FlashAttention forward 3000-4500,
an elementwise kernel 4500-5000, a cuBLASLt GEMM 5000-8000, and on another stream an NCCL
all-reduce 7000-9000 (1000 of it under the GEMM); the first step also has a 100 us memset under its
first GEMM. Per step: gemm 6000, attention 1500, elementwise 550, exposed communication 1000 (2000
in all), idle 500 (the window is 0-19000: 9500 per step).

    PYTHONPATH=tests python -m support.profiler_trace > tests/data/traces/pytorch_profiler_small.json
"""

import json

GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1_execute_segment_k_off_kernel__5x_cublas"
FLASH = "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>>(Flash_fwd_params)"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul> >(int, at::native::FillFunctor<c10::BFloat16>, std::array<char*, 1ul>)"
NVJET = "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
T0 = 1_740_000_000_000_000
EXPECTED_PER_STEP_US = {"gemm": 6000, "attention": 1500, "elementwise": 550, "communication": 1000, "idle": 500,
                        "step": 9500}
EXPECTED_COMMUNICATION_TOTAL_US = 2000


def kernel(name, ts, dur, stream, cat="kernel", correlation=0):
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream, "ts": T0 + ts, "dur": dur,
            "args": {"External id": correlation, "device": 0, "context": 1, "stream": stream,
                     "correlation": correlation, "grid": [132, 1, 1], "block": [128, 1, 1]}}


def trace() -> dict:
    events = []
    for step in range(2):
        o = step * 10_000
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step + 1}", "pid": 1234,
                       "tid": 1234, "ts": T0 + o - 200, "dur": 9000, "args": {}})
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1234, "tid": 1234, "ts": T0 + o - 150,
                       "dur": 20, "args": {"External id": 1}})
        events += [kernel(GEMM, o, 3000, 7, correlation=10 * step + 1),
                   kernel(FLASH, o + 3000, 1500, 7, correlation=10 * step + 2),
                   kernel(ELEMENTWISE, o + 4500, 500, 7, correlation=10 * step + 3),
                   kernel(NVJET, o + 5000, 3000, 7, correlation=10 * step + 4),
                   kernel(NCCL, o + 7000, 2000, 20, correlation=10 * step + 5)]
    events.append(kernel("Memset (Device)", 1000, 100, 8, cat="gpu_memset"))
    events.append({"ph": "s", "id": 1, "pid": 1234, "tid": 1234, "ts": T0, "cat": "ac2g", "name": "ac2g"})
    return {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "numSms": 132}],
            "traceEvents": events, "traceName": "synthetic"}


if __name__ == "__main__":
    print(json.dumps(trace(), indent=1))
