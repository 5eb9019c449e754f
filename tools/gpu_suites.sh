#!/usr/bin/env bash
# Every gpu test suite on the GPU machine, after building the release tree
# there when BUILD is set (the machine has 16 cores; nothing is kept between
# machines). Logs under $OUT; a line per suite last.
#
# Usage, from the repository root on the GPU machine:
#   tools/gpu_suites.sh [BUILD_DIR]        (default build/release)
# Environment: OUT (default out/gpu_suites), BUILD=1 to configure and build
#   first, TARGETS (what BUILD builds, default all), JOBS (default nproc),
#   FILTER (a gtest filter, default all), SUITE_TIMEOUT (seconds per suite, default 300).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
B=${1:-build/release}
OUT=${OUT:-out/gpu_suites}
FILTER=${FILTER:-*}
mkdir -p "$OUT"
for d in /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib64 /usr/local/cuda/lib "$root/$B/lib"; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}
done
# Binaries built in /work/main find their test data and assets there.
if [ ! -e /work/main/tests ] && [ "$root" != /work/main ]; then
  mkdir -p /work && ln -sfn "$root" /work/main
fi
if [ -n "${BUILD:-}" ]; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHAYATE_ASSETS_DIR="$root/assets" \
    >"$OUT/configure.log" 2>&1 || { tail -20 "$OUT/configure.log"; exit 1; }
  cmake --build "$B" -j "${JOBS:-$(nproc)}" ${TARGETS:+--target $TARGETS} >"$OUT/build.log" 2>&1 ||
    { grep -E "error|Error" "$OUT/build.log" | head -30; exit 1; }
fi
status=0
for t in $(cd "$B" && find tests/gpu -maxdepth 1 -type f -perm -u+x -name 'gpu_*_tests' | sort); do
  name=$(basename "$t")
  timeout "${SUITE_TIMEOUT:-300}" "$B/$t" --gtest_brief=1 --gtest_filter="$FILTER" >"$OUT/$name.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && status=1
  echo "$name rc $rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$OUT/$name.log" | tr '\n' ' ')"
  grep -E "^\[  FAILED  \]" "$OUT/$name.log" | head -20
done
exit $status
