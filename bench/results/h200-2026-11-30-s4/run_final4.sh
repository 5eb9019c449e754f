#!/usr/bin/env bash
# Session 4, final call 4: gpu_forward_tests with the sampling test's exact check (device
# sampler vs the host sampler on the device's own logits), once in full, then the sampling
# test 10 more times (a fresh seed each).
set -uo pipefail
root=$(pwd); B=out/fin4/bin; R=$OUT/r; mkdir -p $R
(cd out/fin4 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
timeout 100 $B/gpu_forward_tests >$R/gpu_forward_tests.log 2>&1
echo "gpu_forward_tests rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' $R/gpu_forward_tests.log | tr '\n' ' ')"
grep -E "picks =|Failure|FAILED" $R/gpu_forward_tests.log | head
timeout 100 $B/gpu_forward_tests --gtest_filter='*SeededSampling*' --gtest_repeat=10 >$R/sampling_x10.log 2>&1
echo "sampling x10 rc $?"; grep -E "picks =" $R/sampling_x10.log | sort | uniq -c; grep -cE "^\[  FAILED" $R/sampling_x10.log
