#!/usr/bin/env bash
# The whole test suite, as CI runs it: unit, golden, tokenizer parity, CLI and
# server tests under ASan+UBSan (clang); the release build with CUDA (the binary,
# the gpu-labelled tests and the kernel lab are compiled; they run only on the
# GPU machine); bounded fuzzing of the libFuzzer targets the test tree builds
# beside the tests, two at a time. Each phase prints its time.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
fuzz_seconds=${HAYATE_FUZZ_SECONDS:-15}

[ -f assets/llama3_1/tokenizer.json ] || scripts/setup.sh

phase() { echo "== $1 (at ${SECONDS}s)"; }

phase "release build: binary, gpu tests, kernel lab (CUDA when nvcc is found)"
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs" --target gpu_build

phase "sanitizer build: tests and fuzz targets (clang)"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
phase "sanitizer tests"
# ctest starts the longest tests first when it knows their cost: seed a fresh
# tree with the costs measured here (ctest keeps them up to date after a run).
cost=build/asan/Testing/Temporary/CTestCostData.txt
[ -f "$cost" ] || { mkdir -p "$(dirname "$cost")" && cp tests/ctest_cost.txt "$cost"; }
# The preset sets OMP_WAIT_POLICY=passive: with two tests on two cores, the
# CPU backend's OpenMP threads spinning at their barriers would take the
# other test's core.
ctest --preset asan -j "$jobs"

phase "fuzzing (${fuzz_seconds}s per target, ${jobs} at a time)"
fuzz_one() {
  local f=$1 name corpus rc=0
  name=$(basename "$f")
  corpus=tests/fuzz/corpus/${name#fuzz_}
  mkdir -p "build/asan/corpus/$name"
  "$f" -max_total_time="$fuzz_seconds" -rss_limit_mb=2048 -print_final_stats=0 \
       "build/asan/corpus/$name" $( [ -d "$corpus" ] && echo "$corpus" ) >"build/asan/$name.log" 2>&1 || rc=$?
  echo "-- $name (exit $rc)"
  tail -3 "build/asan/$name.log"
  return $rc
}
pids=()
failed=0
for f in build/asan/tests/fuzz/fuzz_*; do
  [ -x "$f" ] || continue
  fuzz_one "$f" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
[ "$failed" = 0 ] || { echo "== a fuzz target found a failure (its log is above)"; exit 1; }
echo "== all tests passed in ${SECONDS}s"

