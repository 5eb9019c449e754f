#!/usr/bin/env bash
# Session 7 call 1: the streaming decode kernel (a warp per (row, kv head), next step's loads in
# flight during this step's math; persistent warps). gpu_paged_attention_tests (DecodeStreamVsCpu);
# paged_attn_lab --quick (stream 1 / 2 beside the default); gpu_batch_tests with the stream on;
# max-load-128 with HAYATE_DECODE_STREAM=0/2/1 interleaved x2; nvidia-smi power log.
set -uo pipefail
root=$(pwd); B=out/p1/bin; R=$OUT/r; mkdir -p $R/logs
T0=$SECONDS; left() { echo $((580 - (SECONDS - T0))); }
(cd out/p1 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm >$R/logs/gpu.txt 2>&1
timeout 200 $B/gpu_paged_attention_tests --gtest_brief=1 >$R/logs/gpu_paged_attention_tests.log 2>&1
echo "gpu_paged_attention_tests rc $?: $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $R/logs/gpu_paged_attention_tests.log | tr '\n' ' ')"
timeout 150 $B/paged_attn_lab --quick >$R/logs/lab.log 2>&1; echo "lab rc $? ($(left) s left)"
grep -E "^[0-9a-z]+x[0-9]+:|default|stream|FAIL" $R/logs/lab.log | head -80
pack
HAYATE_DECODE_STREAM=2 timeout 200 $B/gpu_batch_tests --gtest_brief=1 >$R/logs/gpu_batch_tests-s2.log 2>&1
echo "gpu_batch_tests (stream 2) rc $?: $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $R/logs/gpu_batch_tests-s2.log | tr '\n' ' ')"
pack
M="--backend cuda --model dummy:llama-3.1-8b --mode throughput"
run() { st=$1; p=$2; name=$3; HAYATE_DECODE_STREAM=$st timeout 100 $B/hayate bench $M --preset $p >$R/logs/$name.log 2>&1; echo "$name rc $? ($(left) s left)"; grep -hE "tokens/s" $R/logs/$name.log; }
nvidia-smi --query-gpu=timestamp,power.draw,clocks.sm,clocks_event_reasons.active --format=csv -lms 200 >$R/logs/smi.csv 2>&1 &
SMI=$!
for r in 1 2; do
  for st in 0 2 1; do
    [ $(left) -lt 60 ] && break
    run $st max-load-128 ml-s$st-r$r
  done
  pack
done
kill $SMI
for st in 0 2; do
  [ $(left) -lt 60 ] && break
  run $st llmib-128-b64 b64-s$st
done
pack
echo "done at $((SECONDS - T0)) s"
