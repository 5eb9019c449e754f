#!/usr/bin/env bash
# Session 6 call 9: the final tree (385b61e's code): every gpu suite; llmib-128-b64,
# llmib-1024-b64, max-load-128 at the preset's capacity and at --max-context 8192.
set -uo pipefail
root=$(pwd); B=out/o9/bin; R=$OUT/r; mkdir -p $R/logs $R/json
T0=$SECONDS; left() { echo $((580 - (SECONDS - T0))); }
(cd out/o9 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
for t in gpu_kernel_tests gpu_paged_attention_tests gpu_batch_tests gpu_forward_tests; do
  timeout 150 $B/$t --gtest_brief=1 >$R/logs/$t.log 2>&1
  echo "$t rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' $R/logs/$t.log | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure" $R/logs/$t.log | head -5
done
pack
M="--backend cuda --model dummy:llama-3.1-8b --mode throughput"
run() { name=$1; shift; timeout 120 $B/hayate bench $M "$@" --json $R/json/$name.json >$R/logs/$name.log 2>&1; echo "$name rc $? ($(left) s left)"; grep -hE "^requests|tokens/s|tpot" $R/logs/$name.log; }
run max-load-128 --preset max-load-128
run max-load-128-ctx8k --preset max-load-128 --max-context 8192
pack
run llmib-128-b64 --preset llmib-128-b64
[ $(left) -gt 80 ] && run llmib-1024-b64 --preset llmib-1024-b64
pack
echo "done at $((SECONDS - T0)) s"
