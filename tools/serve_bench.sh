#!/usr/bin/env bash
# Serving vs offline on one machine, in one call: `hayate serve` measured by
# `hayate bench --mode serve` over loopback, then the same workloads through
# the in-process engine (`hayate bench --mode throughput`), so the HTTP
# overhead can be read off directly:
#   (a) concurrency 1: 128-token prompts, 128 new tokens, 20 prompts
#       -> HTTP overhead (median request latency served vs offline), TTFT of a 128-token prompt
#   (b) concurrency 64: llmib-128-b64 (256 prompts of 128/128, 64 in flight)
#       -> served throughput as a share of offline
# Run from the repository root:
#   tools/serve_bench.sh PATH/TO/hayate [OUT_DIR]     (OUT_DIR defaults to $OUT, else out/serve_bench)
# Overridable (to test the script on a CPU): BACKEND (cuda), MODEL
# (dummy:llama-3.1-8b), MAX_CONTEXT (1024, for both server and offline so the
# KV pools match), C1_PROMPTS (20), B64_PROMPTS (256: the preset; any other
# value runs the same shape with that many prompts), LEN (128: input and output
# tokens; not 128 drops the preset too), STARTUP_S (300: wait for /health).
# Writes at most 8 files: serve_c1.json serve_b64.json offline_c1.json
# offline_b64.json summary.txt server.log bench.log.
set -euo pipefail

BIN=${1:?usage: tools/serve_bench.sh HAYATE_BIN [OUT_DIR]}
DEST=${2:-${OUT:-out/serve_bench}}
BACKEND=${BACKEND:-cuda}
MODEL=${MODEL:-dummy:llama-3.1-8b}
MAX_CONTEXT=${MAX_CONTEXT:-1024}
C1_PROMPTS=${C1_PROMPTS:-20}
B64_PROMPTS=${B64_PROMPTS:-256}
LEN=${LEN:-128}
STARTUP_S=${STARTUP_S:-300}
mkdir -p "$DEST"
LOG="$DEST/bench.log"
: >"$LOG"
note() { echo "[$(date -u +%H:%M:%S)] $*" | tee -a "$LOG" >&2; }

# llmib-128-b64 by name when its shape is unchanged, else the same shape spelled out.
if [[ $B64_PROMPTS == 256 && $LEN == 128 ]]; then
  B64_OFFLINE=(--preset llmib-128-b64)
else
  B64_OFFLINE=(--num-prompts "$B64_PROMPTS" --input-len "$LEN" --output-len "$LEN" --concurrency 64)
fi

# --- server ---------------------------------------------------------------
note "starting: $BIN serve --backend $BACKEND --model $MODEL --max-context $MAX_CONTEXT"
"$BIN" serve --backend "$BACKEND" --model "$MODEL" --max-context "$MAX_CONTEXT" \
  --host 127.0.0.1 --port 0 >"$DEST/server.log" 2>&1 &
SERVER=$!
stop_server() {
  if kill -0 "$SERVER" 2>/dev/null; then
    kill -TERM "$SERVER"
    local rc=0
    wait "$SERVER" || rc=$?
    note "server stopped with SIGTERM, exit status $rc"
    return "$rc"
  fi
}
trap 'kill -TERM $SERVER 2>/dev/null || true' EXIT

URL=""
T0=$SECONDS
while ((SECONDS - T0 < STARTUP_S)); do
  kill -0 "$SERVER" 2>/dev/null || { note "server exited during startup"; tail -20 "$DEST/server.log" >&2; exit 1; }
  if [[ -z $URL ]]; then
    URL=$(grep -oE 'listening on http://[0-9.]+:[0-9]+' "$DEST/server.log" | head -1 | cut -d' ' -f3 || true)
  fi
  if [[ -n $URL ]] && [[ $(curl -s -o /dev/null -w '%{http_code}' "$URL/health") == 200 ]]; then break; fi
  sleep 0.1
done
[[ -n $URL && $(curl -s -o /dev/null -w '%{http_code}' "$URL/health") == 200 ]] ||
  { note "no /health 200 within ${STARTUP_S}s"; exit 1; }
note "server healthy at $URL after $((SECONDS - T0)) s"

serve_bench() {  # name prompts concurrency
  note "serve bench $1: $2 prompts, concurrency $3, $LEN/$LEN tokens"
  timeout 600 "$BIN" bench --mode serve --endpoint "$URL/v1" --label hayate \
    --num-prompts "$2" --input-len "$LEN" --output-len "$LEN" --max-concurrency "$3" \
    --request-rate inf ${4:+--json "$4"} >>"$LOG" 2>&1
}
# Untimed warm-up: first-use costs (allocator, graph buckets, connections)
# must not land in the concurrency-1 TTFT.
serve_bench warmup 8 4
serve_bench c1 "$C1_PROMPTS" 1 "$DEST/serve_c1.json"
serve_bench b64 "$B64_PROMPTS" 64 "$DEST/serve_b64.json"
curl -s "$URL/metrics" | grep -E '^hayate:(generation_tokens_total|num_preemptions_total|request_success_total)' >>"$LOG" || true
stop_server
trap - EXIT

# --- offline, same workloads -------------------------------------------------
# `hayate bench --mode throughput` has no warm-up from the command line (its
# --warmup feeds latency mode only), so first-use costs land in its first
# requests: the summary therefore compares per-request medians at
# concurrency 1, and the concurrency-64 ratio leans in the server's favour.
offline() {  # name json args...
  local name=$1 json=$2
  shift 2
  note "offline $name: $*"
  timeout 600 "$BIN" bench --mode throughput --backend "$BACKEND" --model "$MODEL" \
    --max-context "$MAX_CONTEXT" --json "$json" "$@" >>"$LOG" 2>&1
}
offline c1 "$DEST/offline_c1.json" --num-prompts "$C1_PROMPTS" --input-len "$LEN" \
  --output-len "$LEN" --concurrency 1
offline b64 "$DEST/offline_b64.json" "${B64_OFFLINE[@]}"

# --- summary -------------------------------------------------------------------
python3 - "$DEST" >"$DEST/summary.txt" <<'EOF'
import json, sys, os
d = sys.argv[1]
load = lambda n: json.load(open(os.path.join(d, n)))
s1, s64, o1, o64 = (load(n) for n in ("serve_c1.json", "serve_b64.json", "offline_c1.json", "offline_b64.json"))
def serve(j):
    s = j["summary"]
    return s["output_throughput"], s["ttft_ms"]["mean"], s["ttft_ms"]["median"], s["tpot_ms"]["mean"], s["failed"]
def offl(j):
    s = j["summary"]
    return s["output_tokens_per_s"], s["ttft_s"]["mean"] * 1e3, s["tpot_ms"]["mean"], s["requests_failed"]
def median(v):
    v = sorted(v)
    n = len(v)
    return (v[n // 2] + v[(n - 1) // 2]) / 2
st1, ttft1, ttft1_med, tpot1, f1 = serve(s1)
e2e1 = s1["summary"]["e2el_ms"]["median"]
oe2e1 = median([q["latency_s"] * 1e3 for q in o1["requests"] if q["latency_s"] is not None])
ot1, ottft1, otpot1, g1 = offl(o1)
st64, _, _, tpot64, f64 = serve(s64)
ot64, _, otpot64, g64 = offl(o64)
print(f"model {o1['model']['spec']} backend {o1.get('backend')} commit {o1.get('commit')}")
print(f"failed requests: serve c1 {f1}, serve c64 {f64}, offline c1 {g1}, offline c64 {g64}")
print(f"(a) concurrency 1, {s1['summary']['completed']} prompts:")
print(f"    served  {st1:9.1f} out tok/s  TTFT mean {ttft1:7.2f} ms (median {ttft1_med:.2f})  TPOT {tpot1:.3f} ms")
print(f"    offline {ot1:9.1f} out tok/s  TTFT mean {ottft1:7.2f} ms  TPOT {otpot1:.3f} ms")
print(f"    request latency median: served {e2e1:.2f} ms, offline {oe2e1:.2f} ms")
print(f"    HTTP overhead (served/offline median latency - 1): {100 * (e2e1 / oe2e1 - 1):.2f} %   target <= 3 %")
print(f"    (by throughput, 1 - served/offline tok/s: {100 * (1 - st1 / ot1):.2f} %)")
print(f"    TTFT of a {s1['workload']['input_len']}-token prompt, served: {ttft1:.2f} ms   target <= 20 ms (for 128)")
print(f"(b) concurrency 64, {s64['summary']['completed']} prompts:")
print(f"    served  {st64:9.1f} out tok/s  TPOT {tpot64:.3f} ms")
print(f"    offline {ot64:9.1f} out tok/s  TPOT {otpot64:.3f} ms")
print(f"    served / offline: {100 * st64 / ot64:.1f} %   target >= 90 %")
EOF
cat "$DEST/summary.txt"
