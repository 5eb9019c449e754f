#!/usr/bin/env bash
# Session 6 call 6: does the KV block order matter? (1) decode attention in the lab, blocks at
# random vs in the order the engine's FIFO free list hands them out (LAB_LAYOUT=engine);
# (2) the engine with the free list in a fixed pseudo-random order (hayate) against HEAD's
# 0, 1, 2, ... (hayate-base), max-load-128 interleaved x3; (3) gpu_batch_tests on the new order.
set -uo pipefail
root=$(pwd); B=out/o6/bin; R=$OUT/r; mkdir -p $R/logs
T0=$SECONDS; left() { echo $((560 - (SECONDS - T0))); }
(cd out/o6 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
echo "== lab"
for lay in random engine; do
  for c in "128 256" "192 192"; do
    LAB_LAYOUT=$lay timeout 60 $B/overlap_lab 1024 $c attn >$R/logs/lab-$lay-${c// /-}.log 2>&1
    grep -E "^overlap|^attention" $R/logs/lab-$lay-${c// /-}.log
  done
done
pack
echo "== max load, interleaved"
M="--backend cuda --model dummy:llama-3.1-8b --mode throughput --preset max-load-128"
for r in 1 2 3; do
  for b in hayate hayate-base; do
    timeout 100 $B/$b bench $M >$R/logs/ml-$b-r$r.log 2>&1; echo "$b r$r rc $? ($(left) s left)"
    grep -hE "^requests|tokens/s" $R/logs/ml-$b-r$r.log
  done
  pack
  [ $(left) -lt 150 ] && break
done
echo "== gpu_batch_tests"
timeout 150 $B/gpu_batch_tests --gtest_brief=1 >$R/logs/gpu_batch_tests.log 2>&1
echo "rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' $R/logs/gpu_batch_tests.log | tr '\n' ' ')"
pack
echo "done at $((SECONDS - T0)) s"
