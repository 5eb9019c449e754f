#!/usr/bin/env bash
# Interleaved A/B of two or more hayate binaries on the GPU machine, for the
# figures of the one-engine-path work: the article's same-prompt trial, the
# 122-in/128-out request, max-load-128 and the llmib presets, and perplexity,
# each run A, B, A, B (or A, B, C, A, B, C; ROUNDS rounds), plus each
# binary's start-up time. JSON results and logs go under $OUT; a summary
# table (every run, then each workload's median per binary) is printed last.
#
# Usage, from the repository root on the GPU machine:
#   tools/ab_engine.sh A_BINARY B_BINARY [C_BINARY ...]
# A "binary" may be a script that sets a switch and execs hayate.
# Environment: OUT (default out/ab), ROUNDS (default 2), MODEL (default
#   dummy:llama-3.1-8b), STEPS (default latency,p122,maxload,llmib,ppl;
#   llmib128 runs llmib-128-b64 alone, llmib1024 llmib-1024-b64 alone),
#   POWER_LOG=1 to log power and SM clock every second (nvidia-smi dmon) to
#   $OUT/power.log beside the runs' start times in $OUT/summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
BINS=("$@")
[ ${#BINS[@]} -ge 2 ] || { echo "usage: $0 A_BINARY B_BINARY [C_BINARY ...]" >&2; exit 2; }
LABELS=(A B C D E F)
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
  for i in "${!BINS[@]}"; do
    label=${LABELS[$i]}
    bin=${BINS[$i]}
    has latency && run "$label" "$bin" "same-r$r" bench --model "$MODEL" --prompts same \
      --runs 10 --warmup 1
    has p122 && run "$label" "$bin" "p122-r$r" bench --model "$MODEL" \
      --prompts bench/prompts/p122.txt --runs 6 --max-new-tokens 128 --warmup 1
    has maxload && run "$label" "$bin" "maxload-r$r" bench --model "$MODEL" --mode throughput \
      --preset max-load-128
    if has llmib || has llmib128; then
      run "$label" "$bin" "llmib128-r$r" bench --model "$MODEL" --mode throughput \
        --preset llmib-128-b64
    fi
    if has llmib || has llmib1024; then
      run "$label" "$bin" "llmib1024-r$r" bench --model "$MODEL" --mode throughput \
        --preset llmib-1024-b64
    fi
  done
done
if has ppl; then
  for i in "${!BINS[@]}"; do
    label=${LABELS[$i]}
    bin=${BINS[$i]}
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

# The headline of every JSON: mean request s (runs 3..N) or output tok/s;
# then per workload and binary the median over rounds.
python3 - "$OUT/json" >>"$summary" <<'PY'
import json, os, re, statistics, sys
d = sys.argv[1]
med = {}
for f in sorted(os.listdir(d)):
    if not f.endswith(".json") or f.startswith("ppl"):
        continue
    j = json.load(open(os.path.join(d, f)))
    s = j.get("summary", {})
    m = re.match(r"(.+)-r\d+-(\w+)\.json$", f)
    if m:
        v = s.get("mean_s") if s.get("mean_s") is not None else s.get("output_tokens_per_s")
        if v is not None:
            med.setdefault((m.group(1), m.group(2)), []).append(v)
    if s.get("mean_s") is not None:
        st = j.get("startup", {})
        print(f"{f}: mean request {s['mean_s']:.4f} s, decode {s.get('decode_ms_per_token') or 0:.3f}"
              f" ms/token, load {st.get('load_s') or 0:.2f} s, first token at"
              f" {st.get('first_token_s') or 0:.2f} s since process start")
    else:
        print(f"{f}: output {s.get('output_tokens_per_s', 0):.0f} tok/s, total"
              f" {s.get('total_tokens_per_s', 0):.0f} tok/s, {s.get('total_s', 0):.3f} s")
print("medians over rounds (mean request s, or output tok/s), and against A:")
for (w, label), vs in sorted(med.items()):
    mv = statistics.median(vs)
    a = med.get((w, "A"))
    rel = f" ({100 * (mv / statistics.median(a) - 1):+.2f} % vs A)" if a and label != "A" else ""
    print(f"  {w} {label}: {mv:.4f} over {len(vs)}{rel}")
PY
cat "$summary"
