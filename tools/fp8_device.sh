#!/usr/bin/env bash
# FP8 on the GPU machine, in one call: the fp8 gpu suite and the suites the
# change touches, the 8B check against transformers with the same fake
# quantization (tools/hf_8b_check.py), and dummy:llama-3.1-8b in fp16, fp8
# and fp8 with the e4m3 KV cache through the article's trial and the
# throughput presets, the variants of each benchmark back to back (ROUNDS
# rounds). Logs and JSON under $OUT, a summary last.
#
# Usage, from the repository root on the GPU machine:
#   tools/fp8_device.sh BINDIR [STEPS]
# BINDIR: tools/pack_device.sh's folder (hayate, tests/gpu/*, bench/kernels/hf_check_dump, lib/).
# STEPS: any of tests,hf,bench (default all). Environment: OUT (default out/fp8),
#   ROUNDS (default 1), TESTS (the gpu suites), BENCHES (words PRESET:VARIANTS,
#   PRESET `same` the article's trial, VARIANTS of none (fp16), fp8
#   (--quantization fp8), fp8kv (and --kv-cache-dtype fp8).
set -uo pipefail
BIN=${1:?BINDIR}
STEPS=${2:-tests,hf,bench}
OUT=${OUT:-out/fp8}
ROUNDS=${ROUNDS:-1}
TESTS=${TESTS:-gpu_fp8_tests gpu_paged_attention_tests gpu_batch_tests gpu_forward_tests}
BENCHES=${BENCHES:-same:none,fp8 max-load-128:none,fp8,fp8kv llmib-128-b64:none,fp8 llmib-1024-b64:none,fp8,fp8kv}
MODEL=dummy:llama-3.1-8b
mkdir -p "$OUT/json" "$OUT/logs"
root=$(pwd)
for d in /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib64 /usr/local/cuda/lib "$root/$BIN/lib"; do
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
  for t in $TESTS; do
    timeout 300 "$BIN/tests/gpu/$t" --gtest_brief=1 >"$OUT/logs/$t.log" 2>&1
    echo "$t rc $?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/logs/$t.log" | tr '\n' ' ')" >>"$summary"
    grep -E "^\[  FAILED  \]|^fp8 " "$OUT/logs/$t.log" >>"$summary"
  done
fi

if has hf; then  # W8A8, then W8A8 with the e4m3 KV cache, each against torch's fake quantization
  for kv in auto kv8; do
    dir=$(mktemp -d)
    { timeout 200 "$BIN/bench/kernels/hf_check_dump" "$dir" "$MODEL" 128 float16 decode fp8 $kv &&
        PYTHONUNBUFFERED=1 timeout 300 python3 tools/hf_8b_check.py "$dir"; } \
      >"$OUT/logs/hf_8b_check_fp8_$kv.log" 2>&1
    echo "hf 8b fp8 ($kv) rc $?: $(grep -E 'top-1|rel L2|criterion|hf_8b_check' "$OUT/logs/hf_8b_check_fp8_$kv.log" | tr '\n' ' ')" >>"$summary"
    rm -rf "$dir"
  done
fi

# name QUANT ARGS...: one bench run, JSON and log kept, its headline in the summary.
run() {
  local name=$1 q=$2
  shift 2
  local extra=()
  [ "$q" = fp8 ] && extra=(--quantization fp8)
  [ "$q" = fp8kv ] && extra=(--quantization fp8 --kv-cache-dtype fp8)
  local t0=$SECONDS
  timeout -k 10 240 "$BIN/hayate" bench --model "$MODEL" "$@" "${extra[@]}" \
    --json "$OUT/json/$name-$q.json" >"$OUT/logs/$name-$q.log" 2>&1
  local rc=$?
  echo "$name $q rc=$rc $((SECONDS - t0))s: $(grep -E 'tok/s|mean|ms/token|decode|KV pool|load' "$OUT/logs/$name-$q.log" | head -5 | tr '\n' ' ')" >>"$summary"
}

if has bench; then
  for r in $(seq 1 "$ROUNDS"); do
    for b in $BENCHES; do
      p=${b%%:*}
      for q in $(echo "${b#*:}" | tr ',' ' '); do
        if [ "$p" = same ]; then
          run "same-r$r" "$q" --prompts same --runs 10 --warmup 1 --explain
        else
          run "$p-r$r" "$q" --mode throughput --preset "$p"
        fi
      done
    done
  done
  "$BIN/hayate" report "$OUT"/json/*.json >"$OUT/report.txt" 2>&1
fi
cat "$summary"
