#!/usr/bin/env bash
# The article's comparison in one device call, within 9.5 minutes:
#   1. hayate bench, same and varied trials        (build/release/hayate, carried along)
#   2. HF transformers eager, same then varied     (tools/hf_baseline.py, one process)
#   3. HF transformers + torch.compile, same then varied (one process: compile once)
#   4. hayate report: text, markdown and PNG
# Every step has its own timeout, derived from the time left, so the whole
# script ends in time even when torch.compile is slow; steps write their JSON
# as they go, so a step cut short still reports the runs it made. What was
# cut or skipped is listed in $OUT/steps.txt and in the JSON notes.
#
# Usage, from the repository root on the GPU machine:
#   tools/final_bench.sh [HAYATE_BINARY]      (default build/release/hayate)
# Environment: OUT (default out/final_bench), BUDGET_S (default 570),
#   SEED (default 0), MODEL (default dummy:llama-3.1-8b), COMPILE_VIA (default
#   transformers: the article's own `model.forward = torch.compile(...)` line
#   crashes on transformers 5.17, see docs/benchmarks.md; `article` tries it).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
HAYATE=${1:-build/release/hayate}
OUT=${OUT:-out/final_bench}
BUDGET_S=${BUDGET_S:-570}
SEED=${SEED:-0}
MODEL=${MODEL:-dummy:llama-3.1-8b}
COMPILE_VIA=${COMPILE_VIA:-transformers}
mkdir -p "$OUT/logs"
steps="$OUT/steps.txt"
: >"$steps"
export PYTHONUNBUFFERED=1

# The binary was configured in /work/main: its compiled-in asset paths point
# there. Make them resolve on a machine whose checkout lives elsewhere.
if [ ! -e /work/main/assets ] && [ "$root" != /work/main ]; then
  mkdir -p /work 2>/dev/null && ln -sfn "$root" /work/main 2>/dev/null || true
fi
for d in /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib64 /usr/local/cuda/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}
done
if ! ldconfig -p 2>/dev/null | grep -q libcublas.so.13 && [ ! -e /usr/local/cuda/lib64/libcublas.so.13 ]; then
  lib=$(find / -name 'libcublas.so.13' -not -path '/proc/*' 2>/dev/null | head -1)
  [ -n "$lib" ] && export LD_LIBRARY_PATH=$(dirname "$lib"):${LD_LIBRARY_PATH:-}
fi

note() { echo "$*" | tee -a "$steps"; }
left() { echo $((BUDGET_S - SECONDS)); }
# step_timeout CAP RESERVE: at most CAP seconds, leaving RESERVE for later steps.
step_timeout() {
  local t=$(( $(left) - $2 ))
  [ "$t" -gt "$1" ] && t=$1
  echo "$t"
}
# run_step NAME TIMEOUT CMD...: runs under `timeout` (TERM, then KILL 15 s
# later), logs to $OUT/logs/NAME.log, records rc and duration.
run_step() {
  local name=$1 t=$2
  shift 2
  if [ "$t" -lt 20 ]; then
    note "$name: skipped, only ${t}s left in the budget"
    return 1
  fi
  local t0=$SECONDS
  note "$name: start at ${t0}s, timeout ${t}s: $*"
  timeout -k 15 "$t" "$@" >"$OUT/logs/$name.log" 2>&1
  local rc=$?
  tail -25 "$OUT/logs/$name.log"
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    note "$name: cut by its ${t}s timeout after $((SECONDS - t0))s (rc $rc); runs made so far are kept"
  else
    note "$name: rc $rc after $((SECONDS - t0))s"
  fi
  return $rc
}

{ nvidia-smi; } >"$OUT/nvidia_smi.txt" 2>&1
git rev-parse HEAD >"$OUT/commit.txt" 2>/dev/null || echo unknown >"$OUT/commit.txt"
if [ ! -x "$HAYATE" ]; then
  note "hayate binary '$HAYATE' not found or not executable: hayate steps skipped"
fi

# The dummy architecture's config.json, as hayate makes it, for transformers.
config="$OUT/${MODEL#dummy:}.config.json"
if ! "$HAYATE" bench --print-config "$MODEL" >"$config" 2>/dev/null; then
  cp "bench/configs/${MODEL#dummy:}.json" "$config" 2>/dev/null ||
    note "no config.json for $MODEL: HF steps will fail"
fi

# Reserves: what later steps need at least (eager 90 s, compile 240 s, report 25 s).
R_REPORT=25
R_COMPILE=$((240 + R_REPORT))
R_EAGER=$((90 + R_COMPILE))

hayate_bench() {  # TRIAL
  run_step "hayate-$1" "$(step_timeout 100 $R_EAGER)" \
    "$HAYATE" bench --model "$MODEL" --backend cuda --dtype float16 --seed "$SEED" \
    --tokenizer assets/llama3_1 --prompts "$1" --max-length 128 --json "$OUT/hayate-$1.json"
}
hayate_bench same
hayate_bench varied

hf() {  # ENGINE CAP RESERVE
  local t
  t=$(step_timeout "$2" "$3")
  # The script's own deadline ends runs cleanly 25 s before the timeout would.
  # perf_hints: inductor logs why it skips CUDA graphs (if it does), which
  # explains a compile figure far from the expected ~cudagraph speed.
  run_step "hf-$1" "$t" env TORCH_LOGS="${TORCH_LOGS:-perf_hints}" python3 tools/hf_baseline.py --dummy "${MODEL#dummy:}" --config "$config" \
    --seed "$SEED" --engine "$1" --compile-via "$COMPILE_VIA" --trials same,varied \
    --max-length 128 --out-dir "$OUT" \
    --commit "$(cat "$OUT/commit.txt")" --deadline-s $((t > 40 ? t - 25 : t))
}
hf eager 150 "$R_COMPILE"
hf compile 100000 "$R_REPORT"

# The comparison: files in the article's order, those that exist.
files=()
for trial in same varied; do
  for engine in hayate hf-eager hf-compile; do
    f="$OUT/$engine-$trial.json"
    [ -s "$f" ] && files+=("$f")
  done
done
if [ "${#files[@]}" -eq 0 ]; then
  note "report: no result files"
  exit 1
fi
"$HAYATE" report "${files[@]}" | tee "$OUT/report.txt"
"$HAYATE" report "${files[@]}" --markdown >"$OUT/report.md" 2>>"$OUT/logs/report.log"
"$HAYATE" report "${files[@]}" --png "$OUT/report.png" >/dev/null 2>>"$OUT/logs/report.log" ||
  note "report: no PNG ($(tail -1 "$OUT/logs/report.log"))"
note "done at ${SECONDS}s of ${BUDGET_S}s"
