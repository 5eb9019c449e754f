#!/usr/bin/env bash
# Session 7 call 2: the streaming decode kernel on by default (>= 1024 pairs, one split slot),
# the 4-wide RoPE/KV-write and RMSNorm kernels. Every gpu suite; paged_attn_lab --quick;
# max-load-128 interleaved with call 1's binary with the stream off (= bc4c910's kernels) x3;
# kprof over one new max-load run; llmib-128-b64, llmib-1024-b64, max-load at --max-context 8192.
set -uo pipefail
root=$(pwd); B=out/p2/bin; A=out/p1/bin; R=$OUT/r; mkdir -p $R/logs $R/json
T0=$SECONDS; left() { echo $((580 - (SECONDS - T0))); }
(cd out/p2 && tar xJf bins.tar.xz) || exit 1
(cd out/p1 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
for t in gpu_kernel_tests gpu_paged_attention_tests gpu_batch_tests gpu_forward_tests; do
  timeout 150 $B/$t --gtest_brief=1 >$R/logs/$t.log 2>&1
  echo "$t rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' $R/logs/$t.log | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure" $R/logs/$t.log | head -5
done
pack
timeout 100 $B/paged_attn_lab --quick >$R/logs/lab.log 2>&1; echo "lab rc $? ($(left) s left)"
grep -E "^(64x1536|256x200|1024x192|512x256|64x200):|default|stream|FAIL" $R/logs/lab.log | grep -v "^  mma \|v2" | head -40
pack
M="--backend cuda --model dummy:llama-3.1-8b --mode throughput"
run() { bin=$1; name=$2; shift 2; timeout 100 $bin/hayate bench $M "$@" --json $R/json/$name.json >$R/logs/$name.log 2>&1; echo "$name rc $? ($(left) s left)"; grep -hE "tokens/s" $R/logs/$name.log; }
for r in 1 2 3; do
  [ $(left) -lt 200 ] && break
  run $B ml-new-r$r --preset max-load-128
  HAYATE_DECODE_STREAM=0 run $A ml-base-r$r --preset max-load-128
  pack
done
[ $(left) -gt 120 ] && CUDA_INJECTION64_PATH=$root/$B/lib/libkprof.so KPROF_OUT=$R/logs/ml.kprof KPROF_LAST_MS=7000 \
  run $B ml-kprof --preset max-load-128 && head -30 $R/logs/ml.kprof
pack
[ $(left) -gt 60 ] && run $B ml-ctx8k --preset max-load-128 --max-context 8192
[ $(left) -gt 50 ] && run $B b64 --preset llmib-128-b64
[ $(left) -gt 70 ] && run $B b64-1024 --preset llmib-1024-b64
pack
echo "done at $((SECONDS - T0)) s"
