#!/usr/bin/env bash
# Run from the repository root on the GPU machine with out/s3/bins.tar.xz present: the stripped
# build/release binaries (hayate, gpu_*_tests) in bin/ and their Debian .so files in bin/lib/
# (see ldd), packed here and carried by the device call (out/s3/p.txt = batch1/p.txt).
# Session 3 device call: gpu tests, batch 1 vs single stream (interleaved), max-load preset.
set -uo pipefail
root=$(pwd); B=out/s3/bin; L=$OUT/logs; J=$OUT/json; mkdir -p $L $J
(cd out/s3 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >$L/gpu.txt
M="--backend cuda --model dummy:llama-3.1-8b"
for t in gpu_kernel_tests gpu_forward_tests gpu_batch_tests gpu_paged_attention_tests; do
  timeout 200 $B/$t --gtest_brief=1 >$L/$t.log 2>&1
  echo "$t rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' $L/$t.log | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure" $L/$t.log | head -5
done
run() { name=$1; shift; timeout 90 $B/hayate bench "$@" --json $J/$name.json >$L/$name.log 2>&1; echo "$name rc $?"; }
for r in 1 2; do
  run ss-11-117-r$r $M --prompts same --runs 6 --max-length 128
  run b1-11-117-r$r --mode throughput $M --num-prompts 6 --input-len 11 --output-len 117 --concurrency 1
done
run ss-122-128 $M --prompts out/s3/p.txt --runs 6 --max-new-tokens 128 --warmup 1
run b1-122-128 --mode throughput $M --num-prompts 6 --input-len 122 --output-len 128 --concurrency 1
grep -hE "decode|tpot|^mean|summary" $L/ss-*.log $L/b1-*.log | head -30
run max-load-128 --mode throughput $M --preset max-load-128
grep -hE "captured|requests |tokens/s|tpot|ttft" $L/max-load-128.log | cut -c1-400
cd $OUT && tar czf logs.tgz logs && rm -rf logs
