#!/usr/bin/env bash
# Session 4, call 9 (run 12i: first attention tile prefetched before QKV): the persistent decode kernel on the H200. Run from the
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
timeout 240 $B/gpu_forward_tests --gtest_brief=1 --gtest_filter="*persistent*:*Golden*" >$R/gpu_forward_tests.log 2>&1
echo "rc $?"; grep -E "^\[  (PASSED|FAILED)|SKIPPED \]|Failure|rel_err|Which is|decode at|seed" $R/gpu_forward_tests.log | head -30
pack
pack
echo "== decode_bench"
timeout 200 $B/decode_bench --quick >$R/decode_bench.log 2>&1; echo "rc $?"
cat $R/decode_bench.log
pack
