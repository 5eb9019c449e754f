#!/usr/bin/env bash
# Device run 8 (issue 4: decode speed) in one call, from the repository root on
# the GPU machine: gpu tests, the kernel lab, decode_bench and the article's
# workload through `hayate bench`; every log under $OUT, tarred as well.
#   bench/kernels/run8.sh [BINDIR] [STEPS]   (default out/dec; tests,lab,decode,bench)
# BINDIR holds gpu_kernel_tests, gpu_forward_tests, gemv_lab, decode_bench,
# hayate and lib/ (the Debian .so files hayate links).
set -uo pipefail
BIN=${1:-out/dec}
STEPS=${2:-tests,lab,decode,bench}
OUT=${OUT:-out/logs}
mkdir -p "$OUT"
root=$(pwd)
if [ ! -e /work/main/tests ]; then mkdir -p /work && ln -sfn "$root" /work/main; fi
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$BIN/lib:${LD_LIBRARY_PATH:-}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
status=0
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv >"$OUT/nvidia_smi.txt" 2>&1

if has tests; then
  { timeout 150 "$BIN/gpu_kernel_tests" --gtest_brief=1; echo "rc $?"; } >"$OUT/gpu_tests.log" 2>&1 || status=1
  { timeout 150 "$BIN/gpu_forward_tests" --gtest_brief=1; echo "rc $?"; } >>"$OUT/gpu_tests.log" 2>&1 || status=1
  grep -E "^\[  (PASSED|FAILED|SKIPPED)|tests ran|^rc" "$OUT/gpu_tests.log"
fi
if has lab; then
  timeout 200 "$BIN/gemv_lab" >"$OUT/gemv_lab.log" 2>&1 || status=1
  grep -E "production|prod pdl|keys|read probe" "$OUT/gemv_lab.log"
fi
if has decode; then
  timeout 150 "$BIN/decode_bench" dummy:llama-3.1-8b float16 >"$OUT/decode_bench.log" 2>&1 || status=1
  cat "$OUT/decode_bench.log"
fi
if has bench; then
  timeout 120 "$BIN/hayate" bench --model dummy:llama-3.1-8b --backend cuda --dtype float16 \
    --tokenizer assets/llama3_1 --prompts same --max-length 128 --json "$OUT/hayate-same.json" \
    >"$OUT/hayate_bench.log" 2>&1 || status=1
  tail -25 "$OUT/hayate_bench.log"
fi
tar -C "$OUT" -czf "$OUT/run8_logs.tgz" $(cd "$OUT" && ls | grep -v tgz)
exit $status
