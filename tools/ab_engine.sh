#!/usr/bin/env bash
# Interleaved A/B of two hayate binaries on the GPU machine, for the figures
# of the one-engine-path work: the article's same-prompt trial, the
# 122-in/128-out request, max-load-128 and the llmib presets, and perplexity,
# each run A, B, A, B (ROUNDS rounds), plus each binary's start-up time. JSON
# results and logs go under $OUT; a summary table is printed last.
#
# Usage, from the repository root on the GPU machine:
#   tools/ab_engine.sh A_BINARY B_BINARY
# Environment: OUT (default out/ab), ROUNDS (default 2), MODEL (default
#   dummy:llama-3.1-8b), STEPS (default latency,p122,maxload,llmib,ppl),
#   POWER_LOG=1 to log power and SM clock every second (nvidia-smi dmon) to
#   $OUT/power.log beside the runs' start times in $OUT/summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
A=$1
B=$2
OUT=${OUT:-out/ab}
ROUNDS=${ROUNDS:-2}
MODEL=${MODEL:-dummy:llama-3.1-8b}
STEPS=${STEPS:-latency,p122,maxload,llmib,ppl}
mkdir -p "$OUT/json" "$OUT/logs"
has() { [[ ",$STEPS," == *",$1,"* ]]; }
summary="$OUT/summary.txt"
: >"$summary"
if [ -n "${POWER_LOG:-}" ]; then
  nvidia-smi dmon -s pc -d 1 -o T >"$OUT/power.log" 2>&1 &
  dmon=$!
  trap 'kill $dmon 2>/dev/null' EXIT
fi

# name BIN LABEL ARGS...: one run, its JSON and log kept; prints the headline.
run() {
  local label=$1 bin=$2 name=$3
  shift 3
  local t0=$SECONDS
  local start
  start=$(date +%H:%M:%S)
  timeout -k 10 240 "$bin" "$@" --json "$OUT/json/$name-$label.json" \
    >"$OUT/logs/$name-$label.log" 2>&1
  echo "$name $label rc=$? $((SECONDS - t0))s from $start" >>"$summary"
}

for r in $(seq 1 "$ROUNDS"); do
  for label in A B; do
    bin=$A
    [ "$label" = B ] && bin=$B
    has latency && run "$label" "$bin" "same-r$r" bench --model "$MODEL" --prompts same \
      --runs 10 --warmup 1
    has p122 && run "$label" "$bin" "p122-r$r" bench --model "$MODEL" \
      --prompts bench/prompts/p122.txt --runs 6 --max-new-tokens 128 --warmup 1
    has maxload && run "$label" "$bin" "maxload-r$r" bench --model "$MODEL" --mode throughput \
      --preset max-load-128
    if has llmib; then
      run "$label" "$bin" "llmib128-r$r" bench --model "$MODEL" --mode throughput \
        --preset llmib-128-b64
      run "$label" "$bin" "llmib1024-r$r" bench --model "$MODEL" --mode throughput \
        --preset llmib-1024-b64
    fi
  done
done
if has ppl; then
  for label in A B; do
    bin=$A
    [ "$label" = B ] && bin=$B
    for backend in cuda cpu; do
      m=$MODEL
      [ "$backend" = cpu ] && m=dummy:tiny
      "$bin" perplexity --model "$m" --backend "$backend" --max-context 256 \
        --file tests/golden/data/text_ja_en.txt --json >"$OUT/json/ppl-$backend-$label.json" \
        2>"$OUT/logs/ppl-$backend-$label.log"
      echo "ppl $backend $label: $(cat "$OUT/json/ppl-$backend-$label.json")" >>"$summary"
    done
  done
fi

# The headline of every JSON: mean request s (runs 3..N) or output tok/s.
python3 - "$OUT/json" >>"$summary" <<'PY'
import json, os, sys
d = sys.argv[1]
for f in sorted(os.listdir(d)):
    if not f.endswith(".json") or f.startswith("ppl"):
        continue
    j = json.load(open(os.path.join(d, f)))
    s = j.get("summary", {})
    if s.get("mean_s") is not None:
        st = j.get("startup", {})
        print(f"{f}: mean request {s['mean_s']:.4f} s, decode {s.get('decode_ms_per_token') or 0:.3f}"
              f" ms/token, load {st.get('load_s') or 0:.2f} s, first token at"
              f" {st.get('first_token_s') or 0:.2f} s since process start")
    else:
        print(f"{f}: output {s.get('output_tokens_per_s', 0):.0f} tok/s, total"
              f" {s.get('total_tokens_per_s', 0):.0f} tok/s, {s.get('total_s', 0):.3f} s")
PY
cat "$summary"
