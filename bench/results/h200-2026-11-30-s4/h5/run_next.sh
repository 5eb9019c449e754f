#!/usr/bin/env bash
# NOT RUN YET (prepared by engineer h5 for the next device call). From the repository root on the
# GPU machine with out/h5/bins.tar.xz (stripped hayate, gpu_batch_tests, gpu_kernel_tests; the
# .so files of out/final4/lib in bin/lib/), built at 41d9e56 or later:
# - gpu_batch_tests (19 tests: the step test also on HAYATE_BATCH_GEMM=ex16) and gpu_kernel_tests
#   after the batch_gemm.h move;
# - max-load-128 on the three GEMM paths in one call, twice each, interleaved: lt (tuned cuBLASLt
#   + GemmEx, T outputs), ex16 (GemmEx, T outputs), ex (GemmEx, fp32 outputs). It answers whether
#   the cuBLASLt tuning pays beyond the T outputs (the 1024-row padding graph was 0.3-0.7 ms slower
#   on lt than on ex in calls 1 and 2, while whole runs were 5 % faster).
set -uo pipefail
root=$(pwd); B=out/h5/bin; R=$OUT/r; mkdir -p $R/logs $R/json
T0=$SECONDS
(cd out/h5 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
for t in gpu_batch_tests gpu_kernel_tests; do
  timeout 60 $B/$t --gtest_brief=1 >$R/logs/$t.log 2>&1
  echo "$t rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' $R/logs/$t.log | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure" -A4 $R/logs/$t.log | head -12
done
M="--mode throughput --backend cuda --model dummy:llama-3.1-8b --preset max-load-128"
for r in 1 2; do
  for g in lt ex16 ex; do
    timeout 60 env HAYATE_BATCH_GEMM=$g $B/hayate bench $M --json $R/json/ml-$g-$r.json \
      >$R/logs/ml-$g-$r.log 2>&1
    echo "$g run $r rc $? ($((SECONDS - T0)) s): $(grep -hE '^tokens/s' $R/logs/ml-$g-$r.log)"
  done
done
cd $OUT && tar czf results.tgz r
