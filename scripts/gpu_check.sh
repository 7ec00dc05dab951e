#!/usr/bin/env bash
# The checks a lent GPU runs, as one prepared script (docs/calibration.md, "Measured on H100
# and H200"): the device's settings and library versions, the whole microbenchmark suite, the
# attention kernels past the suite's 16k tokens, four end-to-end step checks and the attention
# probe, with the SM clock logged beside them all. Everything lands in one archive,
# $OUT/gpu_check.tar.gz, to unpack under calibration/results/.
#
#     OUT=/tmp/gpu bash scripts/gpu_check.sh        (needs torch and a CUDA GPU)
#     PHASES="suite steps moe" OUT=/tmp/gpu bash scripts/gpu_check.sh      (only those phases)
#
# Phases (all by default): suite (the whole suite), clocked (its GEMM and attention groups again
# under their own clock marks), long (attention at 32k-128k tokens), steps (the dense step
# checks), longsteps (dense step checks at 32k and 64k tokens, where attention takes half the
# step or more), moe (MoE step checks: Qwen3-30B-A3B and Mixtral 8x7B layers), probe (the
# attention probe).
#
# Fitting is done afterwards on any machine:
#     python -m calibration calibrate calibration/results/<run>/results.yaml --hardware h100-sxm ...
set -u
OUT=${OUT:-artifacts/gpu_check}
PHASES=${PHASES:-suite clocked long steps longsteps moe probe}
want() { case " $PHASES " in *" $1 "*) return 0 ;; esac; return 1; }
export PYTHONUNBUFFERED=1
python=${PYTHON:-python3}
work=$(mktemp -d)
suite=$work/suite
long=$work/long_attention
mkdir -p "$suite" "$long"

nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,clocks.max.memory,memory.total \
    --format=csv > "$suite/nvidia-smi.csv"
# the SM clock, power and clock-event reasons every 100 ms beside everything below, with a mark at
# each phase's start and end (python -m calibration clocks LOG MARKS; Efficiencies.attention_clock_ratio)
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv -lms 100 > "$suite/clocks.csv" 2>&1 &
logger=$!
mark() { echo "$1 $(date '+%Y/%m/%d %H:%M:%S.%N')" >> "$suite/clocks_marks.txt"; }
"$python" -m pip list 2>/dev/null | grep -i -E '^(torch|triton|numpy|scipy|pydantic|nvidia-cudnn|nvidia-nccl|nvidia-cublas)' \
    > "$suite/versions.txt"

# the suite as it ships, then its GEMM and attention groups again under their own marks
if want suite; then
    mark suite_start
    "$python" -m calibration bench-hw --out "$suite" 2>&1 | tee "$suite/bench.log"
    mark suite_end
fi
if want clocked; then
    for group in gemm attention; do
        mark "${group}_start"
        "$python" -m calibration bench-hw --only "$group" --out "$work/clocked_$group" 2>&1 | tail -1
        mark "${group}_end"
    done
fi

# attention at 32k-128k tokens in one sequence, where the long-context runs' kernels run
# (the suite stops at 16k); few warm-ups and repeats, since one call lasts up to seconds
if want long; then
    "$python" -m calibration bench-hw --only attention --attention-seqs 32768,65536,131072 \
        --warmup 2 --repeats 5 --out "$long" 2>&1 | tee "$long/bench.log"
fi

# whole training steps of 4 Llama 3 8B layers: eager at three sequence lengths, and compiled
# (at 16k the eager step needs the caching allocator's expandable segments to fit in 80 GB; that
# changes how memory is reserved, not the kernels)
step_checks() {
    for args in "$@"; do
        name=$(echo "$args" | tr -d ' -')
        alloc=""
        case "$args" in *16384*|*32768*|*65536*|*qwen3*|*mixtral*) alloc="expandable_segments:True" ;; esac
        mark "step_${name}_start"
        # shellcheck disable=SC2086
        PYTORCH_CUDA_ALLOC_CONF=$alloc "$python" -m calibration step-check $args --out "$suite/steps" 2>&1 | tail -3
        mark "step_${name}_end"
    done
}
if want steps; then
    step_checks "--layers 4 --seq 8192 --mbs 1 --gbs 8" "--layers 4 --seq 4096 --mbs 2 --gbs 16" \
                "--layers 4 --seq 16384 --mbs 1 --gbs 4" "--layers 4 --seq 8192 --mbs 1 --gbs 8 --compile" \
                "--layers 4 --seq 16384 --mbs 1 --gbs 4 --compile"
fi
# attention-dominated steps: the clock the power limit leaves when attention, not GEMMs, fills
# the step (Efficiencies.attention_clock_ratio was measured on the 8k step)
if want longsteps; then
    step_checks "--layers 2 --seq 32768 --mbs 1 --gbs 2 --compile" "--layers 1 --seq 65536 --mbs 1 --gbs 2 --compile"
fi
# MoE layers as Megatron-Core's unfused all-to-all path runs them on one GPU, the experts as
# torch._grouped_mm (calibration/step_check.py): fine-grained (128 experts of 768) and coarse
# (8 of 14336)
if want moe; then
    step_checks "--preset qwen3-30b-a3b --layers 4 --seq 4096 --mbs 1 --gbs 8" \
                "--preset qwen3-30b-a3b --layers 3 --seq 8192 --mbs 1 --gbs 4" \
                "--preset mixtral-8x7b --layers 2 --seq 4096 --mbs 1 --gbs 8"
fi
if want probe; then
    "$python" -m calibration.attention_probe --seq 4096 8192 16384 --out "$suite/attention_probe.yaml" 2>&1 | tail -16
fi
kill "$logger" 2>/dev/null

mkdir -p "$OUT"
mkdir -p "$work/clocked_gemm" "$work/clocked_attention"
tar czf "$OUT/gpu_check.tar.gz" -C "$work" suite long_attention clocked_gemm clocked_attention
ls -l "$OUT"
