#!/usr/bin/env bash
# The batching and serving figures in one device call, within ~9 minutes:
#   1. gpu tests: kernels, forward (CPU reference, HF fixtures), batch backend
#   2. hayate bench --mode throughput: the issue's presets
#   3. tools/serve_bench.sh: HTTP vs in-process (if present)
# Usage, from the repository root on the GPU machine:
#   tools/final_batch.sh BINDIR      (BINDIR holds hayate, gpu_*_tests, lib/)
# Environment: OUT (default out/final_batch), PRESETS (default below).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
BIN=${1:-out/final}
OUT=${OUT:-out/final_batch}
PRESETS=${PRESETS:-llmib-128-b1 llmib-128-b64 max-load-128 llmib-1024-b64}
mkdir -p "$OUT/logs"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:$root/$BIN/lib:${LD_LIBRARY_PATH:-}
if [ ! -e /work/main/assets ] && [ "$root" != /work/main ]; then
  mkdir -p /work && ln -sfn "$root" /work/main
fi
git rev-parse HEAD >"$OUT/commit.txt" 2>/dev/null || true
nvidia-smi >"$OUT/logs/nvidia_smi.txt" 2>&1

echo "== gpu tests"
for t in gpu_kernel_tests gpu_forward_tests gpu_batch_tests gpu_paged_attention_tests; do
  if [ -x "$BIN/$t" ]; then
    timeout 240 "$BIN/$t" --gtest_brief=1 >"$OUT/logs/$t.log" 2>&1
    echo "$t rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' "$OUT/logs/$t.log" | tr '\n' ' ')"
  fi
done

echo "== throughput presets"
for p in $PRESETS; do
  timeout 200 "$BIN/hayate" bench --mode throughput --backend cuda --model dummy:llama-3.1-8b \
    --preset "$p" --json "$OUT/$p.json" >"$OUT/logs/$p.log" 2>&1
  echo "$p rc $?"; tail -12 "$OUT/logs/$p.log"
done

if [ -x tools/serve_bench.sh ]; then
  echo "== serving"
  OUT=$OUT/serve timeout 300 tools/serve_bench.sh "$BIN/hayate" >"$OUT/logs/serve.log" 2>&1
  echo "serve rc $?"; tail -30 "$OUT/logs/serve.log"
fi
