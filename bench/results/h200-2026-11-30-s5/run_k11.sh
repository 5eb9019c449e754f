#!/usr/bin/env bash
# Session 5 call 11: after the review's timing-helper refactor (start-up GEMM tuning, decode
# graph timing, bandwidth probe): gpu_batch_tests, gpu_forward_tests, decode_bench --quick,
# and the GEMM tuning line of max-load-128.
set -uo pipefail
root=$(pwd); B=out/k11/bin; R=$OUT/r; mkdir -p $R/logs
(cd out/k11 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
for t in gpu_batch_tests gpu_forward_tests; do
  timeout 150 $B/$t --gtest_brief=1 >$R/logs/$t.log 2>&1
  echo "$t rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' $R/logs/$t.log | tr '\n' ' ')"
done
timeout 120 $B/decode_bench --quick >$R/logs/decode_bench.log 2>&1; echo "decode_bench rc $?"; grep -E 'decode:|read bandwidth' $R/logs/decode_bench.log
timeout 100 $B/hayate bench --mode throughput --backend cuda --model dummy:llama-3.1-8b --preset max-load-128 >$R/logs/ml.log 2>&1; echo "ml rc $?"
grep -E 'GEMM algorithms|^requests|tokens/s' $R/logs/ml.log | cut -c1-400
(cd $OUT && tar czf results.tgz r)
