#!/usr/bin/env bash
# Session 4, call 1 (run 12): the persistent decode kernel on the H200. Run from the
# repository root with out/p12/bins.tar.xz (stripped gpu_forward_tests, gemv_lab,
# decode_bench + their .so files) carried.
set -uo pipefail
root=$(pwd); B=out/p12/bin; R=$OUT/r; mkdir -p $R
(cd out/p12 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== probe: one persistent test (a hang here stops the call)"
timeout 60 $B/gpu_forward_tests --gtest_filter='*PrefillThenGreedy*float16_persistent' >$R/probe.log 2>&1
rc=$?; echo "probe rc $rc"; tail -15 $R/probe.log; pack
[ $rc = 124 ] && exit 0
echo "== gpu_forward_tests"
timeout 240 $B/gpu_forward_tests --gtest_brief=1 >$R/gpu_forward_tests.log 2>&1
echo "rc $?"; grep -E "^\[  (PASSED|FAILED)|SKIPPED \]|Failure|rel_err|Which is|decode at|seed" $R/gpu_forward_tests.log | head -30
pack
echo "== gemv_lab --persistent"
timeout 120 $B/gemv_lab --persistent >$R/gemv_lab_persistent.log 2>&1; echo "rc $?"
cat $R/gemv_lab_persistent.log
pack
echo "== decode_bench"
timeout 240 $B/decode_bench >$R/decode_bench.log 2>&1; echo "rc $?"
cat $R/decode_bench.log
pack
