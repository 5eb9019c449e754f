#!/usr/bin/env bash
# FP8 before/after on the GPU machine, in one call: B's FP8 and attention gpu
# suites, then A and B interleaved (tools/ab_engine.sh) on dummy:llama-3.1-8b
# with --quantization fp8 (the article's trial, whose decode figure is
# batch 1 on the persistent kernel, and max-load-128) and with the e4m3 KV
# cache too (max-load-128), ROUNDS rounds each. Summaries under $OUT.
#
# Usage, from the repository root on the GPU machine:
#   tools/fp8_ab_device.sh A_DIR B_DIR
# A_DIR, B_DIR: tools/pack_device.sh folders (unpacked), A the baseline.
# Environment: OUT (default out/fp8ab), ROUNDS (default 2), SRC_TREES (the
#   checkouts the binaries were built in, where they look for test data;
#   default /work/main /work/wt-16p).
set -uo pipefail
cd "$(dirname "$0")/.." || exit
A=${1:?A_DIR}
B=${2:?B_DIR}
OUT=${OUT:-out/fp8ab}
export ROUNDS=${ROUNDS:-2}
root=$(pwd)
mkdir -p "$OUT"
for w in ${SRC_TREES:-/work/main /work/wt-16p}; do
  if [ ! -e "$w/tests" ] && [ "$root" != "$w" ]; then mkdir -p "$(dirname "$w")" && ln -sfn "$root" "$w"; fi
done
export LD_LIBRARY_PATH=$root/$B/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}

OUT=$OUT/tests TESTS="gpu_fp8_tests gpu_paged_attention_tests gpu_forward_tests" \
  tools/fp8_device.sh "$B" tests

# wrapper NAME BINARY FLAGS...: a "binary" for ab_engine.sh that adds FLAGS.
wrapper() {
  local name=$1 bin=$2
  shift 2
  printf '#!/bin/sh\nexec %s "$@" %s\n' "$bin" "$*" >"$OUT/$name"
  chmod +x "$OUT/$name"
}
wrapper a8 "$root/$A/hayate" --quantization fp8
wrapper b8 "$root/$B/hayate" --quantization fp8
wrapper a8kv "$root/$A/hayate" --quantization fp8 --kv-cache-dtype fp8
wrapper b8kv "$root/$B/hayate" --quantization fp8 --kv-cache-dtype fp8
dir=$OUT
OUT=$dir/fp8 STEPS=latency,maxload tools/ab_engine.sh "$dir/a8" "$dir/b8" >/dev/null
OUT=$dir/fp8kv STEPS=maxload tools/ab_engine.sh "$dir/a8kv" "$dir/b8kv" >/dev/null
for f in tests/summary.txt fp8/summary.txt fp8kv/summary.txt; do
  echo "== $f"
  cat "$OUT/$f"
done
