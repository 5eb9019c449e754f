#!/usr/bin/env bash
# Session 5 call 9: decode attention blocks ordered kv heads inside rows (out/k9, default on)
# against call 7's binary (out/k7, rows inside kv heads): tests, lab, max-load-128 interleaved.
set -uo pipefail
root=$(pwd); B=out/k9/bin; B5=out/k7/bin; R=$OUT/r; mkdir -p $R/logs $R/json
T0=$SECONDS; left() { echo $((560 - (SECONDS - T0))); }
(cd out/k9 && tar xJf bins.tar.xz) && (cd out/k7 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
M="--backend cuda --model dummy:llama-3.1-8b"
run() { bin=$1; name=$2; shift 2; timeout 100 $bin/hayate bench "$@" --json $R/json/$name.json >$R/logs/$name.log 2>&1; echo "$name rc $? ($(left) s left)"; grep -hE "^requests|tokens/s|tpot" $R/logs/$name.log; }
echo "== tests"
timeout 60 $B/gpu_paged_attention_tests --gtest_filter='*TensorCoreVsCpu*' >$R/logs/probe.log 2>&1; echo "probe rc $?"; tail -3 $R/logs/probe.log
for t in gpu_paged_attention_tests gpu_batch_tests; do
  timeout 150 $B/$t --gtest_brief=1 >$R/logs/$t.log 2>&1; echo "$t rc $?"; grep -E 'FAILED|PASSED|SKIPPED' $R/logs/$t.log | head -8
done
pack
echo "== lab"
timeout 150 $B/paged_attn_lab --quick >$R/logs/lab.log 2>&1; echo "lab rc $?"; grep -A10 -E '^(1024x192|512x256|64x4000|256x100)' $R/logs/lab.log | grep -v v1
pack
echo "== max load, interleaved"
for r in 1 2; do
  run $B ml-heads-r$r $M --mode throughput --preset max-load-128
  run $B5 ml-rows-r$r $M --mode throughput --preset max-load-128
done
pack
run $B b64-heads $M --mode throughput --preset llmib-128-b64
pack
echo "done at $((SECONDS - T0)) s"
