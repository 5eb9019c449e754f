#!/usr/bin/env bash
# Structured outputs on the GPU machine: the gpu tests of the device masks
# (sample_masked) and of the samplers they sit beside, then batch-64
# throughput (llmib-128-b64: 256 requests of 128/128, 64 at a time) with
# every request constrained by a JSON Schema that cannot end within 128
# tokens (bench/structured/tool_call_array.json: 40+ tool-call-like
# objects) against the same run unconstrained, interleaved free, json, free,
# json (ROUNDS rounds). JSON results and logs under $OUT.
#   tools/structured_device.sh HAYATE_BIN GPU_BATCH_TESTS   ("": no gpu tests)
# Environment: OUT (default out/structured), ROUNDS (2), EXTRA (more bench
# flags, e.g. --num-prompts 128), MODEL
# (dummy:llama-3.1-8b), PRESET (llmib-128-b64), HAYATE_HOME (assets/ with
# the model's tokenizer: the schema is compiled over its vocabulary).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=$1
TESTS=$2
OUT=${OUT:-out/structured}
ROUNDS=${ROUNDS:-2}
MODEL=${MODEL:-dummy:llama-3.1-8b}
PRESET=${PRESET:-llmib-128-b64}
SCHEMA=${SCHEMA:-bench/structured/tool_call_array.json}
mkdir -p "$OUT"
summary="$OUT/summary.txt"
: >"$summary"
if [ -n "$TESTS" ]; then  # "" skips the gpu tests
  timeout -k 5 120 "$TESTS" --gtest_filter='*Masked*:*PicksMatchHostSampler*' >"$OUT/gpu_tests.log" 2>&1
  echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/gpu_tests.log" | tr '\n' ' ')" >>"$summary"
fi
for r in $(seq 1 "$ROUNDS"); do
  for label in free json; do
    # shellcheck disable=SC2206
    args=(bench --model "$MODEL" --mode throughput --preset "$PRESET" --warmup 64 ${EXTRA:-})
    [ "$label" = json ] && args+=(--json-schema "$SCHEMA")
    t0=$SECONDS
    timeout -k 5 200 "$BIN" "${args[@]}" --json "$OUT/$label-r$r.json" >"$OUT/$label-r$r.log" 2>&1
    echo "$label r$r rc=$? $((SECONDS - t0)) s: $(grep -E '^tokens/s' "$OUT/$label-r$r.log")" >>"$summary"
  done
done
cat "$summary"
