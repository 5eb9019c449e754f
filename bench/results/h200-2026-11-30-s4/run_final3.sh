#!/usr/bin/env bash
# Session 4, final call 3: the batched backend's bucket 1 on the persistent kernel (6c14fe0).
# gpu_batch_tests with it and with HAYATE_BATCH_PERSISTENT=0 (the fused GEMVs), the forward
# tests, batch 1 vs single stream (interleaved pairs, as run_final2.sh), decode_bench --quick.
set -uo pipefail
root=$(pwd); B=out/fin3/bin; R=$OUT/r; mkdir -p $R/logs $R/json
(cd out/fin3 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
echo "== gpu tests"
timeout 100 $B/gpu_batch_tests --gtest_brief=1 >$R/logs/gpu_batch_tests.log 2>&1
echo "gpu_batch_tests rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' $R/logs/gpu_batch_tests.log | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $R/logs/gpu_batch_tests.log | head -5
HAYATE_BATCH_PERSISTENT=0 timeout 100 $B/gpu_batch_tests --gtest_brief=1 >$R/logs/gpu_batch_tests_fused.log 2>&1
echo "gpu_batch_tests (fused bucket 1) rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' $R/logs/gpu_batch_tests_fused.log | tr '\n' ' ')"
timeout 100 $B/gpu_forward_tests --gtest_brief=1 >$R/logs/gpu_forward_tests.log 2>&1
echo "gpu_forward_tests rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' $R/logs/gpu_forward_tests.log | tr '\n' ' ')"
pack
M="--backend cuda --model dummy:llama-3.1-8b"
run() { name=$1; shift; timeout 60 $B/hayate bench "$@" --json $R/json/$name.json >$R/logs/$name.log 2>&1; echo "$name rc $?"; }
for r in 1 2; do
  run ss-11-117-r$r $M --prompts same --runs 6 --max-length 128
  run b1-11-117-r$r --mode throughput $M --num-prompts 6 --input-len 11 --output-len 117 --concurrency 1
done
run ss-122-128 $M --prompts bench/results/h200-2026-11-30-s3/p.txt --runs 6 --max-new-tokens 128 --warmup 1
run b1-122-128 --mode throughput $M --num-prompts 6 --input-len 122 --output-len 128 --concurrency 1
pack
echo "== decode_bench --quick"
timeout 90 $B/decode_bench --quick >$R/logs/decode_bench.log 2>&1; echo "rc $?"; grep -E "^decode|persistent phases" $R/logs/decode_bench.log
pack
