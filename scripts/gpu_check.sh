#!/usr/bin/env bash
# The checks a lent GPU runs, as one prepared script (docs/calibration.md, "Measured on H100
# and H200"): the device's settings and library versions, the whole microbenchmark suite, the
# attention kernels past the suite's 16k tokens, and three end-to-end step checks. Everything
# lands in one archive, $OUT/gpu_check.tar.gz, to unpack under calibration/results/.
#
#     OUT=/tmp/gpu bash scripts/gpu_check.sh        (needs torch and a CUDA GPU)
#
# Fitting is done afterwards on any machine:
#     python -m calibration calibrate calibration/results/<run>/results.yaml --hardware h100-sxm ...
set -u
OUT=${OUT:-artifacts/gpu_check}
export PYTHONUNBUFFERED=1
python=${PYTHON:-python3}
work=$(mktemp -d)
suite=$work/suite
long=$work/long_attention
mkdir -p "$suite" "$long"

nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,clocks.max.memory,memory.total \
    --format=csv > "$suite/nvidia-smi.csv"
"$python" -m pip list 2>/dev/null | grep -i -E '^(torch|triton|numpy|scipy|pydantic|nvidia-cudnn|nvidia-nccl|nvidia-cublas)' \
    > "$suite/versions.txt"

# the suite as it ships
"$python" -m calibration bench-hw --out "$suite" 2>&1 | tee "$suite/bench.log"

# attention at 32k-128k tokens in one sequence, where the long-context runs' kernels run
# (the suite stops at 16k); few warm-ups and repeats, since one call lasts up to seconds
"$python" -m calibration bench-hw --only attention --attention-seqs 32768,65536,131072 \
    --warmup 2 --repeats 5 --out "$long" 2>&1 | tee "$long/bench.log"

# whole training steps of 4 Llama 3 8B layers: eager at three sequence lengths, and compiled
for args in "--seq 8192 --mbs 1 --gbs 8" "--seq 4096 --mbs 2 --gbs 16" "--seq 16384 --mbs 1 --gbs 4" \
            "--seq 8192 --mbs 1 --gbs 8 --compile"; do
    # shellcheck disable=SC2086
    "$python" -m calibration step-check --layers 4 $args --out "$suite/steps" 2>&1 | tail -3
done

mkdir -p "$OUT"
tar czf "$OUT/gpu_check.tar.gz" -C "$work" suite long_attention
ls -l "$OUT"
