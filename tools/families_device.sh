#!/usr/bin/env bash
# Model families on the GPU machine, in one call: the gpu tests of the
# families (HF golden fixtures through CUDA: Qwen2's biases, Qwen3's q/k
# norms, Mistral; the RoPE/KV-write kernel with biases and norms against its
# CPU twin), then per model, interleaved (llama-3.1-8b first as the
# reference): the article's trials (same: batch-1 decode against the read
# probe with --explain; varied), llmib-128-b64 and max-load-128, and
# `hayate profile` of one batch-1 step (the persistent kernel's phases). Every
# step has a timeout; logs and JSON under $OUT, a summary last.
#
# Usage, from the repository root on the GPU machine:
#   tools/families_device.sh BINDIR [STEPS]
# BINDIR: tools/pack_device.sh's folder (hayate, tests/gpu/*, lib/). STEPS:
# any of tests,same,varied,presets,profile (default all). Environment: OUT
# (default out/families), MODELS (default "llama-3.1-8b qwen3-8b qwen2.5-7b
# mistral-7b-v0.3"), RUNS
# (default 10), PRESETS (default "llmib-128-b64 max-load-128"), SRC (the tree
# the binaries were built in, default /work/wt-17: test data and assets are
# looked up there).
set -uo pipefail
BIN=${1:?BINDIR}
STEPS=${2:-tests,same,varied,presets,profile}
OUT=${OUT:-out/families}
MODELS=${MODELS:-llama-3.1-8b qwen3-8b qwen2.5-7b mistral-7b-v0.3}
RUNS=${RUNS:-10}
PRESETS=${PRESETS:-llmib-128-b64 max-load-128}
SRC=${SRC:-/work/wt-17}
mkdir -p "$OUT/json" "$OUT/logs"
root=$(pwd)
for d in /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib64 /usr/local/cuda/lib "$root/$BIN/lib"; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}
done
if [ ! -e "$SRC/tests" ] && [ "$root" != "$SRC" ]; then mkdir -p "$(dirname "$SRC")" && ln -sfn "$root" "$SRC"; fi
has() { [[ ",$STEPS," == *",$1,"* ]]; }
summary="$OUT/summary.txt"
: >"$summary"
nvidia-smi >"$OUT/logs/nvidia_smi.txt" 2>&1
git rev-parse HEAD >"$OUT/commit.txt" 2>/dev/null

if has tests; then
  # The families' fixtures and every persistent-kernel case (its attention
  # units and wide down rows: Qwen25ShapesDecodeMatchesCpu).
  timeout -k 5 240 "$BIN/tests/gpu/gpu_forward_tests" --gtest_brief=1 \
    --gtest_filter='*qwen*:*Qwen25*:*mistral*:*persistent*' >"$OUT/logs/gpu_forward_tests.log" 2>&1
  echo "gpu_forward_tests (families) rc $?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/logs/gpu_forward_tests.log" | tr '\n' ' ')" >>"$summary"
  grep -E "^\[  FAILED  \]|worst logits|perplexity NLL" "$OUT/logs/gpu_forward_tests.log" >>"$summary"
  if [ -x "$BIN/tests/gpu/gpu_batch_tests" ]; then  # packed or not (the 64 MiB carry limit)
    timeout -k 5 60 "$BIN/tests/gpu/gpu_batch_tests" --gtest_brief=1 \
      --gtest_filter='*PagedRopeKv*' >"$OUT/logs/gpu_batch_tests.log" 2>&1
    echo "gpu_batch_tests (rope) rc $?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/logs/gpu_batch_tests.log" | tr '\n' ' ')" >>"$summary"
    grep -E "^\[  FAILED  \]" "$OUT/logs/gpu_batch_tests.log" >>"$summary"
  fi
  if [ -x "$BIN/tests/gpu/gpu_fp8_tests" ]; then  # the persistent kernel's FP8 form
    timeout -k 5 90 "$BIN/tests/gpu/gpu_fp8_tests" --gtest_brief=1 \
      --gtest_filter='*persistent*' >"$OUT/logs/gpu_fp8_tests.log" 2>&1
    echo "gpu_fp8_tests (persistent) rc $?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/logs/gpu_fp8_tests.log" | tr '\n' ' ')" >>"$summary"
    grep -E "^\[  FAILED  \]" "$OUT/logs/gpu_fp8_tests.log" >>"$summary"
  fi
fi

# name MODEL ARGS...: one bench run, JSON and log kept, its headline in the summary.
run() {
  local name=$1 m=$2
  shift 2
  local t0=$SECONDS
  timeout -k 5 "${STEP_S:-90}" "$BIN/hayate" bench --model "dummy:$m" --backend cuda \
    --dtype float16 "$@" --json "$OUT/json/$name-$m.json" >"$OUT/logs/$name-$m.log" 2>&1
  local rc=$?
  echo "$name $m rc=$rc $((SECONDS - t0))s: $(grep -E 'tok/s|mean|% of the read probe' "$OUT/logs/$name-$m.log" | head -4 | tr '\n' ' ')" >>"$summary"
}

for m in $MODELS; do has same && run same "$m" --prompts same --runs "$RUNS" --warmup 1 --explain; done
if has presets; then
  for p in $PRESETS; do
    for m in $MODELS; do run "$p" "$m" --mode throughput --preset "$p"; done
  done
fi
for m in $MODELS; do has varied && run varied "$m" --prompts varied; done
if has profile; then  # one batch-1 step at context 128: the persistent kernel's phases
  for m in $MODELS; do
    timeout -k 5 "${STEP_S:-90}" "$BIN/hayate" profile --model "dummy:$m" --backend cuda \
      --dtype float16 --batch 1 --context 128 --runs 20 --json "$OUT/json/profile-$m.json" \
      >"$OUT/logs/profile-$m.log" 2>&1
    echo "profile $m rc=$?" >>"$summary"
  done
fi
cat "$summary"
