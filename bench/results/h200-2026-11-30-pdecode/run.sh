#!/usr/bin/env bash
# pdecode device call: lab (--quick: tensor-core default vs v2), paged attention
# and batch tests, then the two throughput presets. Binaries from build/pdecode,
# stripped, packed in out/pdecode/bins.tar.xz (libs from out/final4/lib).
set -uo pipefail
root=$(pwd); B=out/pdecode; L=$OUT/logs; mkdir -p $L
(cd $B && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf logs.tgz logs); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
timeout 120 $B/paged_attn_lab --quick >$L/paged_attn_lab.log 2>&1; echo "lab rc $?"
grep -E "probe|^[0-9a-z]+x?[0-9]*:|default|v2 tb|mma4|big [12]/|one-pass|FAILED|checks" $L/paged_attn_lab.log | head -120
pack
for t in gpu_paged_attention_tests gpu_batch_tests; do
  timeout 100 $B/$t --gtest_brief=1 >$L/$t.log 2>&1
  echo "$t rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]|tests ran' $L/$t.log | tr '\n' ' ')"
  grep -E "FAILED|Failure|seed" $L/$t.log | head -8
done
pack
M="--mode throughput --backend cuda --model dummy:llama-3.1-8b"
for p in max-load-128 llmib-1024-b64; do
  timeout 100 $B/hayate bench $M --preset $p --json $OUT/$p.json >$L/$p.log 2>&1; echo "$p rc $?"
  grep -hiE "tok/s|tokens/s|tpot|ttft|step" $L/$p.log | head -12
  pack
done
