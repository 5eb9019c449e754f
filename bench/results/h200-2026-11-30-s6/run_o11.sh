#!/usr/bin/env bash
# Session 6 call 11: after the review: gpu_batch_tests with the graph-replay test hook
# (ManyRowsWholeRowAndSplitGraphs now asserts which graph each all-decode step replayed, and
# runs an eager step whose split attention is bounded by its longest row).
set -uo pipefail
root=$(pwd); B=out/o11/bin; R=$OUT/r; mkdir -p $R/logs
(cd out/o11 && tar xJf bins.tar.xz) || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
timeout 200 $B/gpu_batch_tests --gtest_brief=1 >$R/logs/gpu_batch_tests.log 2>&1
echo "gpu_batch_tests rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]|FAILED  \]' $R/logs/gpu_batch_tests.log | tr '\n' ' ')"
grep -B2 -A6 "Failure" $R/logs/gpu_batch_tests.log | head -40
(cd $OUT && tar czf results.tgz r)
