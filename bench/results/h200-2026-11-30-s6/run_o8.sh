#!/usr/bin/env bash
# Session 6 call 8: gpu_batch_tests with the whole-row graph test fixed (its tables were one
# block short); max-load-128 at --max-context 8192 (the server's default capacity, where
# large buckets' split attention had 3 empty slots per pair), whole-row graphs (hayate, call
# 7's binary) against HEAD's (hayate-base), interleaved x2.
set -uo pipefail
root=$(pwd); B=out/o8/bin; R=$OUT/r; mkdir -p $R/logs
T0=$SECONDS; left() { echo $((580 - (SECONDS - T0))); }
(cd out/o8 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
timeout 200 $B/gpu_batch_tests --gtest_brief=1 >$R/logs/gpu_batch_tests.log 2>&1
echo "gpu_batch_tests rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]|FAILED  \]' $R/logs/gpu_batch_tests.log | tr '\n' ' ')"
grep -A3 "Failure" $R/logs/gpu_batch_tests.log | head -20
pack
M="--backend cuda --model dummy:llama-3.1-8b --mode throughput --preset max-load-128 --max-context 8192"
run() { b=$1; name=$2; timeout 120 $B/$b bench $M >$R/logs/$name.log 2>&1; echo "$name rc $? ($(left) s left)"; grep -hE "^requests|tokens/s" $R/logs/$name.log; }
for r in 1 2; do
  run hayate ml8k-new-r$r
  run hayate-base ml8k-base-r$r
  pack
done
grep -h "captured" $R/logs/ml8k-new-r1.log | cut -c1-260
echo "done at $((SECONDS - T0)) s"
