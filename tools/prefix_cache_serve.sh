#!/usr/bin/env bash
# The prefix cache's workloads through `hayate serve` (docs/benchmarks.md,
# "Prefix caching"): `hayate bench --mode serve` sends the chat-5-turn and
# shared-prefix-2000 presets over loopback (random English words: a chat
# resends its answers as text), to a server with the cache on, then to one
# with it off, in one call:
#   tools/prefix_cache_serve.sh HAYATE_BIN OUT_DIR
# MODEL (dummy:llama-3.1-8b), BACKEND (cuda), MAX_CONTEXT (4096) and PRESETS
# ("chat-5-turn shared-prefix-2000") override; STARTUP_S (300) bounds the wait
# for /health. Writes one JSON and log per run, server logs and summary.txt.
set -uo pipefail
BIN=${1:?usage: tools/prefix_cache_serve.sh HAYATE_BIN OUT_DIR}
R=${2:?usage: tools/prefix_cache_serve.sh HAYATE_BIN OUT_DIR}
MODEL=${MODEL:-dummy:llama-3.1-8b}
BACKEND=${BACKEND:-cuda}
MAX_CONTEXT=${MAX_CONTEXT:-4096}
PRESETS=${PRESETS:-chat-5-turn shared-prefix-2000}
STARTUP_S=${STARTUP_S:-300}
mkdir -p "$R"
t0=$SECONDS

run_server() {  # label, then serve flags
  local label=$1
  shift
  "$BIN" serve --backend "$BACKEND" --model "$MODEL" --max-model-len "$MAX_CONTEXT" \
    --host 127.0.0.1 --port 0 "$@" >"$R/server_$label.log" 2>&1 &
  local pid=$! url=""
  local start=$SECONDS
  while ((SECONDS - start < STARTUP_S)); do
    kill -0 "$pid" 2>/dev/null || { echo "server $label exited at start" >>"$R/summary.txt"; return 1; }
    [[ -z $url ]] && url=$(grep -oE 'listening on http://[0-9.]+:[0-9]+' "$R/server_$label.log" | head -1 | cut -d' ' -f3)
    [[ -n $url && $(curl -s -o /dev/null -w '%{http_code}' "$url/health") == 200 ]] && break
    sleep 0.2
  done
  echo "server $label healthy after $((SECONDS - start)) s" >>"$R/summary.txt"
  # Untimed warm-up: graph buckets, connections.
  "$BIN" bench --mode serve --endpoint "$url/v1" --num-prompts 16 --input-len 64 --output-len 16 \
    --request-rate inf >/dev/null 2>&1
  for p in $PRESETS; do
    timeout 300 "$BIN" bench --mode serve --endpoint "$url/v1" --label hayate --preset "$p" \
      --request-rate inf --json "$R/${p}_$label.json" >"$R/${p}_$label.log" 2>&1
    echo "$p $label rc $? ($((SECONDS - t0)) s): $(grep -E '^(Output token throughput|Total Token throughput|Prefix cache hit rate|Median TTFT)' "$R/${p}_$label.log" | tr -s ' ' | tr '\n' ';')" >>"$R/summary.txt"
  done
  kill -TERM "$pid"
  wait "$pid"
  echo "server $label exit status $?" >>"$R/summary.txt"
}
run_server on
run_server off --no-enable-prefix-caching
cat "$R/summary.txt"
