#!/usr/bin/env bash
# Session 5 call 10: the persistent kernel's start-up trial and its fallback (HEAD): every gpu suite,
# decode_bench --quick, max-load-128 once.

set -uo pipefail
root=$(pwd); B=out/k10/bin; R=$OUT/r; mkdir -p $R/logs $R/json
T0=$SECONDS; left() { echo $((560 - (SECONDS - T0))); }
(cd out/k10 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
M="--backend cuda --model dummy:llama-3.1-8b"
echo "== tests"
for t in gpu_kernel_tests gpu_paged_attention_tests gpu_batch_tests gpu_forward_tests; do
  timeout 150 $B/$t --gtest_brief=1 >$R/logs/$t.log 2>&1
  echo "$t rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' $R/logs/$t.log | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure" $R/logs/$t.log | head -5
done
pack
echo "== decode_bench --quick"
timeout 120 $B/decode_bench --quick >$R/logs/decode_bench.log 2>&1; echo "rc $?"; tail -8 $R/logs/decode_bench.log
pack
echo "== max load"
timeout 100 $B/hayate bench --mode throughput $M --preset max-load-128 --json $R/json/max-load-128.json >$R/logs/max-load-128.log 2>&1; echo "rc $?"
grep -hE "^requests|tokens/s|tpot" $R/logs/max-load-128.log
pack
echo "done at $((SECONDS - T0)) s"
