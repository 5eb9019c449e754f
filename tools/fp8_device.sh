#!/usr/bin/env bash
# FP8 on the GPU machine, in one call: the fp8 gpu suite and the suites the
# change touches, the 8B check against transformers with the same fake
# quantization (tools/hf_8b_check.py), and dummy:llama-3.1-8b in fp16 and fp8
# through the article's trial and the throughput presets, the two runs of
# each benchmark back to back (ROUNDS rounds). Logs and JSON under $OUT,
# a summary last.
#
# Usage, from the repository root on the GPU machine:
#   tools/fp8_device.sh BINDIR [STEPS]
# BINDIR: tools/pack_device.sh's folder (hayate, tests/gpu/*, bench/kernels/hf_check_dump, lib/).
# STEPS: any of tests,hf,bench (default all). Environment: OUT (default out/fp8),
#   ROUNDS (default 1), PRESETS (default max-load-128 llmib-128-b64 llmib-1024-b64),
#   KV (extra flags of the fp8 runs, e.g. "--kv-cache-dtype fp8").
set -uo pipefail
BIN=${1:?BINDIR}
STEPS=${2:-tests,hf,bench}
OUT=${OUT:-out/fp8}
ROUNDS=${ROUNDS:-1}
PRESETS=${PRESETS:-max-load-128 llmib-128-b64 llmib-1024-b64}
MODEL=dummy:llama-3.1-8b
mkdir -p "$OUT/json" "$OUT/logs"
root=$(pwd)
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib "$root/$BIN/lib"; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}
done
# Binaries find test data and assets under the tree they were built in.
for w in /work/wt-16 /work/main; do
  if [ ! -e "$w/tests" ] && [ "$root" != "$w" ]; then mkdir -p /work && ln -sfn "$root" "$w"; fi
done
has() { [[ ",$STEPS," == *",$1,"* ]]; }
summary="$OUT/summary.txt"
: >"$summary"
nvidia-smi >"$OUT/logs/nvidia_smi.txt" 2>&1

if has tests; then
  for t in gpu_fp8_tests gpu_forward_tests gpu_kernel_tests; do
    timeout 300 "$BIN/tests/gpu/$t" --gtest_brief=1 >"$OUT/logs/$t.log" 2>&1
    echo "$t rc $?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/logs/$t.log" | tr '\n' ' ')" >>"$summary"
    grep -E "^\[  FAILED  \]|^fp8 " "$OUT/logs/$t.log" >>"$summary"
  done
fi

if has hf; then
  dir=$(mktemp -d)
  { timeout 200 "$BIN/bench/kernels/hf_check_dump" "$dir" "$MODEL" 128 float16 decode fp8 &&
      PYTHONUNBUFFERED=1 timeout 300 python3 tools/hf_8b_check.py "$dir"; } \
    >"$OUT/logs/hf_8b_check_fp8.log" 2>&1
  echo "hf 8b fp8 rc $?: $(grep -E 'top-1|rel L2|hf_8b_check' "$OUT/logs/hf_8b_check_fp8.log" | tr '\n' ' ')" >>"$summary"
  rm -rf "$dir"
fi

# name QUANT ARGS...: one bench run, JSON and log kept, its headline in the summary.
run() {
  local name=$1 q=$2
  shift 2
  local extra=()
  [ "$q" = fp8 ] && extra=(--quantization fp8 ${KV:-})
  local t0=$SECONDS
  timeout -k 10 240 "$BIN/hayate" bench --model "$MODEL" "$@" "${extra[@]}" \
    --json "$OUT/json/$name-$q.json" >"$OUT/logs/$name-$q.log" 2>&1
  local rc=$?
  echo "$name $q rc=$rc $((SECONDS - t0))s: $(grep -E 'tok/s|mean|ms/token|decode' "$OUT/logs/$name-$q.log" | head -3 | tr '\n' ' ')" >>"$summary"
}

if has bench; then
  for r in $(seq 1 "$ROUNDS"); do
    for q in none fp8; do
      run "same-r$r" "$q" --prompts same --runs 10 --warmup 1 --explain
    done
    for p in $PRESETS; do
      for q in none fp8; do run "$p-r$r" "$q" --mode throughput --preset "$p"; done
    done
  done
  "$BIN/hayate" report "$OUT"/json/*.json >"$OUT/report.txt" 2>&1
fi
cat "$summary"
