#!/usr/bin/env bash
# Run from the repository root on the GPU machine with out/s3e/bins.tar.xz (stripped build/release
# binaries + their Debian .so files). Session 3 call 4: the 4-wide silu_mul: tests, then the presets.
set -uo pipefail
root=$(pwd); B=out/s3e/bin; R=$OUT/r; mkdir -p $R/logs $R/json
(cd out/s3e && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
for t in gpu_kernel_tests gpu_forward_tests gpu_batch_tests; do
  timeout 120 $B/$t --gtest_brief=1 >$R/logs/$t.log 2>&1
  echo "$t rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' $R/logs/$t.log | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure" $R/logs/$t.log | head -5
done
for p in max-load-128 llmib-1024-b64 llmib-128-b64; do
  timeout 90 $B/hayate bench --mode throughput --backend cuda --model dummy:llama-3.1-8b --preset $p --json $R/json/$p.json >$R/logs/$p.log 2>&1
  echo "$p rc $?"; grep -hE "^requests|tokens/s|tpot" $R/logs/$p.log
done
cd $OUT && tar czf results.tgz r
