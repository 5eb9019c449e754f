#!/usr/bin/env bash
# One device call: issue 16/17 figures on the binary of branch exp-early with the switch off
# (main's code), an A/B of HAYATE_EXP_EARLY (norm weights and rope_kv's first run loaded
# before the barriers), then the gpu suites (off, then on). Lands in $OUT as it finishes.
set -uo pipefail
root=$(pwd)
T0=$SECONDS
mkdir -p /work && [ -e /work/main/tests ] || ln -sfn "$root" /work/main
mkdir -p /tmp/st && tar xJf .base/pq.tar.xz -C /tmp/st && tar xJf .base/assets.tar.xz -C "$root"
B=/tmp/st/pq
export HAYATE_HOME=$root
for d in /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib64 "$B/lib"; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}
done
S=$OUT/summary.txt
L=$OUT/logs
mkdir -p "$L" "$OUT/json"
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv >"$S" 2>&1
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
left() { echo $((${BUDGET:-560} - (SECONDS - T0))); }

# name MODEL Q ARGS...: one bench run; Q none|fp8|fp8kv
bench() {
  local name=$1 m=$2 q=$3
  shift 3
  local extra=()
  [ "$q" = fp8 ] && extra=(--quantization fp8)
  [ "$q" = fp8kv ] && extra=(--quantization fp8 --kv-cache-dtype fp8)
  [ "$(left)" -lt 40 ] && { echo "$name $m $q skipped (time)" >>"$S"; return; }
  local t0=$SECONDS
  timeout -k 5 120 env ${XENV:-} "$B/hayate" bench --model "dummy:$m" --backend cuda "$@" "${extra[@]}" \
    --json "$OUT/json/$name-$m-$q.json" >"$L/$name-$m-$q.log" 2>&1
  echo "$name $m $q rc=$? $((SECONDS - t0))s: $(grep -E 'tok/s|mean|ms/token|read probe|KV pool' "$L/$name-$m-$q.log" | head -6 | tr '\n' ' ')" >>"$S"
}
same() { bench same "$1" "$2" --prompts same --runs 10 --warmup 1 --explain; }
preset() { bench "$1" "$2" "$3" --mode throughput --preset "$1"; }
suite() {
  local t=$1 lim=$2
  [ "$(left)" -lt "$lim" ] && { echo "$t skipped (time)" >>"$S"; return; }
  local t0=$SECONDS
  timeout -k 5 "$lim" env ${XENV:-} "$B/tests/gpu/$t" --gtest_brief=1 >"$L/$t${XS:-}.log" 2>&1
  echo "$t${XS:-} rc $? $((SECONDS - t0))s: $(grep -E '^\[  (PASSED|FAILED) ' "$L/$t${XS:-}.log" | tr '\n' ' ')" >>"$S"
  grep -E "^\[  FAILED  \]" "$L/$t${XS:-}.log" >>"$S"
}
prof() {
  local name=$1
  shift
  [ "$(left)" -lt 30 ] && return
  timeout -k 5 60 env ${XENV:-} "$B/hayate" profile --model dummy:llama-3.1-8b --backend cuda "$@" \
    >"$L/prof-$name.txt" 2>&1
  echo "prof $name rc=$?: $(grep -E '^  (step|attention) ' "$L/prof-$name.txt" | tr '\n' ' ')" >>"$S"
  awk '$1 ~ /^(attn_norm|qkv|rope_kv|attention|o_proj|ffn_norm|gate_up|silu_mul|down)$/ {printf "%s %s;", $1, $7}' "$L/prof-$name.txt" >>"$S"
  echo >>"$S"
}
suites() {
  suite gpu_forward_tests 150
  suite gpu_paged_attention_tests 90
  suite gpu_kernel_tests 90
  suite gpu_batch_tests 120
  suite gpu_fp8_tests 90
}
figures() {
  same llama-3.1-8b none
  same llama-3.1-8b fp8
  preset max-load-128 llama-3.1-8b fp8kv
  preset max-load-128 llama-3.1-8b none
  for r in 1 2; do
    preset llmib-128-b64 llama-3.1-8b none
    preset llmib-128-b64 llama-3.1-8b fp8kv
  done
  preset llmib-1024-b64 llama-3.1-8b none
  preset llmib-1024-b64 llama-3.1-8b fp8kv
  same qwen3-8b none
  same qwen2.5-7b none
  for m in qwen3-8b qwen2.5-7b; do
    preset llmib-128-b64 "$m" none
    preset max-load-128 "$m" none
  done
  prof b1-fp8 --batch 1 --context 128 --quantization fp8
}
ab() {  # A/B of the switch, interleaved: ROUNDS rounds
  for r in $(seq 1 "$1"); do
    XENV= preset llmib-128-b64 llama-3.1-8b fp8kv
    XENV=HAYATE_EXP_EARLY=1 bench llmib-128-b64-E llama-3.1-8b fp8kv --mode throughput --preset llmib-128-b64
    XENV= preset llmib-128-b64 llama-3.1-8b none
    XENV=HAYATE_EXP_EARLY=1 bench llmib-128-b64-E llama-3.1-8b none --mode throughput --preset llmib-128-b64
  done
  prof b64-fp8kv --batch 64 --context 192 --quantization fp8 --kv-cache-dtype fp8
  XENV=HAYATE_EXP_EARLY=1 prof b64-fp8kv-E --batch 64 --context 192 --quantization fp8 --kv-cache-dtype fp8
}
esuites() {
  XENV=HAYATE_EXP_EARLY=1 XS=-E suite gpu_fp8_tests 90
  XENV=HAYATE_EXP_EARLY=1 XS=-E suite gpu_batch_tests 90
  XENV=HAYATE_EXP_EARLY=1 XS=-E suite gpu_kernel_tests 90
}
echo "gpu: $gpu" >>"$S"
if [[ "$gpu" == *H200* ]]; then
  figures
  ab 2
  esuites
  suites
else
  ab 3
  esuites
  suites
  same llama-3.1-8b fp8
fi
(cd "$OUT" && tar cJf logs.tar.xz logs json && rm -rf logs json)
echo "end at $((SECONDS - T0))s" >>"$S"
cat "$S"
