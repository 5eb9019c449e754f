#!/usr/bin/env bash
# Session 6 call 7: whole-row decode graphs (large buckets' split attention with one slot per
# (row, kv head) while every row fits 2048 keys; the table-reach grid launched 3 empty blocks
# per real one). gpu_paged_attention_tests, gpu_batch_tests; max-load-128 interleaved with
# HEAD's binary (hayate-base) x2; llmib-128-b64 and llmib-1024-b64 each way.
set -uo pipefail
root=$(pwd); B=out/o7/bin; R=$OUT/r; mkdir -p $R/logs
T0=$SECONDS; left() { echo $((580 - (SECONDS - T0))); }
(cd out/o7 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
for t in gpu_paged_attention_tests gpu_batch_tests; do
  timeout 200 $B/$t --gtest_brief=1 >$R/logs/$t.log 2>&1
  echo "$t rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]|FAILED  \]' $R/logs/$t.log | tr '\n' ' ')"
done
pack
M="--backend cuda --model dummy:llama-3.1-8b --mode throughput"
run() { b=$1; p=$2; name=$3; timeout 120 $B/$b bench $M --preset $p >$R/logs/$name.log 2>&1; echo "$name rc $? ($(left) s left)"; grep -hE "^requests|tokens/s" $R/logs/$name.log; }
for r in 1 2; do
  run hayate max-load-128 ml-new-r$r
  run hayate-base max-load-128 ml-base-r$r
  pack
done
grep -h "captured" $R/logs/ml-new-r1.log | cut -c1-300
for p in llmib-128-b64 llmib-1024-b64; do
  [ $(left) -lt 70 ] && break
  run hayate $p $p-new
  run hayate-base $p $p-base
  pack
done
echo "done at $((SECONDS - T0)) s"
