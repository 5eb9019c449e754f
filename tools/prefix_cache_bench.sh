#!/usr/bin/env bash
# The prefix cache's figures (docs/benchmarks.md, "Prefix caching"), each pair
# with the cache on and off in one call, interleaved:
#   tools/prefix_cache_bench.sh BIN_DIR OUT_DIR
# BIN_DIR holds hayate (and tests/gpu/gpu_{kernel,batch}_tests, run first
# when present); OUT_DIR gets one JSON and log per run and summary.txt.
# MODEL (default dummy:llama-3.1-8b) and BACKEND (default cuda) override.
set -uo pipefail
B=$1
R=$2
MODEL=${MODEL:-dummy:llama-3.1-8b}
BACKEND=${BACKEND:-cuda}
mkdir -p "$R"
t0=$(date +%s)
if [ -x "$B/tests/gpu/gpu_kernel_tests" ]; then
  timeout 60 "$B/tests/gpu/gpu_kernel_tests" --gtest_brief=1 --gtest_filter='*CopyBlocks*' \
    >"$R/gpu_kernel_tests.log" 2>&1
  echo "gpu_kernel_tests CopyBlocks rc $?: $(grep -E '^\[  (PASSED|FAILED)' "$R/gpu_kernel_tests.log" | tr '\n' ' ')" >>"$R/summary.txt"
  timeout 150 "$B/tests/gpu/gpu_batch_tests" --gtest_brief=1 \
    --gtest_filter='*Prefix*:*Choices*:*Engine*:*BadInput*:*StepsMatch*' >"$R/gpu_batch_tests.log" 2>&1
  echo "gpu_batch_tests rc $?: $(grep -E '^\[  (PASSED|FAILED)' "$R/gpu_batch_tests.log" | tr '\n' ' ')" >>"$R/summary.txt"
fi
bench() {  # name, then hayate bench arguments
  local name=$1
  shift
  timeout 150 "$B/hayate" bench --mode throughput --backend "$BACKEND" --model "$MODEL" "$@" \
    --json "$R/$name.json" >"$R/$name.log" 2>&1
  echo "$name rc $? ($(($(date +%s) - t0)) s): $(grep -E '^(tokens/s|ttft |ttft turn|prefix cache)' "$R/$name.log" | tr '\n' ' ')" >>"$R/summary.txt"
}
bench shared_on --preset shared-prefix-2000 --warmup 32
bench shared_off --preset shared-prefix-2000 --warmup 32 --no-enable-prefix-caching
bench chat_on --preset chat-5-turn --warmup 32
bench chat_off --preset chat-5-turn --warmup 32 --no-enable-prefix-caching
for i in 1 2; do
  bench llmib_on$i --preset llmib-128-b64 --warmup 64
  bench llmib_off$i --preset llmib-128-b64 --warmup 64 --no-enable-prefix-caching
done
bench maxload_on --preset max-load-128 --warmup 64
bench maxload_off --preset max-load-128 --warmup 64 --no-enable-prefix-caching
cat "$R/summary.txt"
