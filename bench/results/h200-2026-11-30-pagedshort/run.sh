#!/usr/bin/env bash
# pagedshort device call: tests, batch-1 vs single stream (both shapes), lab.
set -uo pipefail
root=$(pwd); B=out/pagedshort; L=$OUT/logs; mkdir -p $L
(cd $B && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
M="--backend cuda --model dummy:llama-3.1-8b"
for t in gpu_paged_attention_tests gpu_batch_tests; do
  timeout 100 $B/$t --gtest_brief=1 >$L/$t.log 2>&1
  echo "$t rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]|tests ran' $L/$t.log | tr '\n' ' ')"
  grep -E "FAILED|Failure" $L/$t.log | head -5
done
grep -m3 "captured" $L/gpu_batch_tests.log
J=$OUT/json; mkdir -p $J
timeout 60 $B/hayate bench $M --prompts same --runs 6 --max-length 128 --json $J/ss-11-117.json >$L/ss-11.log 2>&1; echo "ss-11 rc $?"
timeout 60 $B/hayate bench --mode throughput $M --num-prompts 6 --input-len 11 --output-len 117 --concurrency 1 --json $J/b1-11-117.json >$L/b1-11.log 2>&1; echo "b1-11 rc $?"
timeout 60 $B/hayate bench $M --prompts $B/p.txt --runs 6 --max-new-tokens 128 --warmup 1 --json $J/ss-122-128.json >$L/ss-122.log 2>&1; echo "ss-122 rc $?"
timeout 60 $B/hayate bench --mode throughput $M --num-prompts 6 --input-len 122 --output-len 128 --concurrency 1 --json $J/b1-122-128.json >$L/b1-122.log 2>&1; echo "b1-122 rc $?"
grep -h "captured" $L/b1-11.log $L/b1-122.log
grep -hE "TPOT|tpot|decode|request|median" $L/ss-11.log $L/b1-11.log $L/ss-122.log $L/b1-122.log | head -30
# the article's shape again (noise)
timeout 60 $B/hayate bench $M --prompts same --runs 6 --max-length 128 --json $J/ss-11-117-r2.json >$L/ss-11-r2.log 2>&1; echo "ss-11 r2 rc $?"
timeout 60 $B/hayate bench --mode throughput $M --num-prompts 6 --input-len 11 --output-len 117 --concurrency 1 --json $J/b1-11-117-r2.json >$L/b1-11-r2.log 2>&1; echo "b1-11 r2 rc $?"
grep -hE "decode:|tpot" $L/ss-11-r2.log $L/b1-11-r2.log
cd $OUT && tar czf logs.tgz logs && rm -rf logs
