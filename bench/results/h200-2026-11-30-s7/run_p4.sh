#!/usr/bin/env bash
# Session 7 call 4: the final tree. Every gpu suite; paged_attn_lab --quick (the stream kernel
# also for rows of <= 512 keys with fewer pairs); max-load-128 interleaved with call 1's binary
# with the stream off (bc4c910's kernels) x2; llmib-128-b64 interleaved with call 2's binary
# (stream only from 1,024 pairs) x2; llmib-1024-b64; max-load-128 at --max-context 8192.
set -uo pipefail
root=$(pwd); B=out/p4/bin; A=out/p1h/bin; C=out/p2h/bin; R=$OUT/r; mkdir -p $R/logs $R/json
T0=$SECONDS; left() { echo $((580 - (SECONDS - T0))); }
for d in p4 p1h p2h; do (cd out/$d && tar xJf bins.tar.xz) || exit 1; done
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv >$R/logs/gpu.txt 2>&1
for t in gpu_kernel_tests gpu_paged_attention_tests gpu_batch_tests gpu_forward_tests; do
  timeout 150 $B/$t --gtest_brief=1 >$R/logs/$t.log 2>&1
  echo "$t rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' $R/logs/$t.log | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure" $R/logs/$t.log | head -5
done
pack
timeout 100 $B/paged_attn_lab --quick >$R/logs/lab.log 2>&1; echo "lab rc $? ($(left) s left)"
grep -E "^(64x200|64x1536|1024x192):|default|no-stream" $R/logs/lab.log | grep -A2 "^\(64x200\|64x1536\|1024x192\)" | head -12
pack
M="--backend cuda --model dummy:llama-3.1-8b --mode throughput"
run() { bin=$1; name=$2; shift 2; timeout 100 $bin/hayate bench $M "$@" --json $R/json/$name.json >$R/logs/$name.log 2>&1; echo "$name rc $? ($(left) s left)"; grep -hE "tokens/s|TPOT|tpot" $R/logs/$name.log | head -3; }
for r in 1 2; do
  [ $(left) -lt 150 ] && break
  run $B ml-new-r$r --preset max-load-128
  HAYATE_DECODE_STREAM=0 run $A ml-base-r$r --preset max-load-128
  pack
done
for r in 1 2; do
  [ $(left) -lt 100 ] && break
  run $B b64-new-r$r --preset llmib-128-b64
  run $C b64-p2-r$r --preset llmib-128-b64
done
pack
[ $(left) -gt 70 ] && run $B b64-1024 --preset llmib-1024-b64
[ $(left) -gt 40 ] && run $B ml-ctx8k --preset max-load-128 --max-context 8192
pack
echo "done at $((SECONDS - T0)) s"
