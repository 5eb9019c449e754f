#!/usr/bin/env bash
# Session 5 call 4 (fe00a37 tree): one RoPE + KV-append kernel for all three callers; every gpu
# suite, the decode-split lab variants, max-load-128 once.
set -uo pipefail
root=$(pwd); B=out/k4/bin; R=$OUT/r; mkdir -p $R/logs $R/json
T0=$SECONDS; left() { echo $((560 - (SECONDS - T0))); }
(cd out/k4 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
M="--backend cuda --model dummy:llama-3.1-8b"
run() { name=$1; shift; timeout 100 $B/hayate bench "$@" --json $R/json/$name.json >$R/logs/$name.log 2>&1; echo "$name rc $? ($(left) s left)"; grep -hE "^requests|tokens/s|ttft|tpot|engine" $R/logs/$name.log; }
echo "== tests"
for t in gpu_kernel_tests gpu_paged_attention_tests gpu_batch_tests gpu_forward_tests; do
  timeout 150 $B/$t --gtest_brief=1 >$R/logs/$t.log 2>&1; echo "$t rc $?"; grep -E 'FAILED|PASSED|SKIPPED' $R/logs/$t.log | head -8
done
pack
echo "== lab"
timeout 150 $B/paged_attn_lab --quick >$R/logs/lab.log 2>&1; echo "lab rc $?"; grep -A9 -E '^(1024x192|512x256|64x4000)' $R/logs/lab.log; sed -n '/== prefill/,$p' $R/logs/lab.log
pack
echo "== max load"
run ml $M --mode throughput --preset max-load-128
pack
echo "done at $((SECONDS - T0)) s"
