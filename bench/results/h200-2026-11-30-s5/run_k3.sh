#!/usr/bin/env bash
# Session 5 call 3: GEMM pieces (LtGemm::chunk_rows), decode attention table prefetch, wmma prefill removed.
# Tests, lab, max-load-128 with and without the GEMM pieces (HAYATE_GEMM_CHUNK=0), profile, presets.
set -uo pipefail
root=$(pwd); B=out/k3/bin; R=$OUT/r; mkdir -p $R/logs $R/json
T0=$SECONDS; left() { echo $((560 - (SECONDS - T0))); }
(cd out/k3 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
M="--backend cuda --model dummy:llama-3.1-8b"
run() { name=$1; shift; timeout 100 $B/hayate bench "$@" --json $R/json/$name.json >$R/logs/$name.log 2>&1; echo "$name rc $? ($(left) s left)"; grep -hE "^requests|tokens/s|ttft|tpot|engine" $R/logs/$name.log; }
echo "== tests"
timeout 60 $B/gpu_paged_attention_tests --gtest_filter='*Prefill*' >$R/logs/probe.log 2>&1; echo "probe rc $?"; tail -3 $R/logs/probe.log
for t in gpu_paged_attention_tests gpu_kernel_tests gpu_batch_tests; do
  timeout 150 $B/$t --gtest_brief=1 >$R/logs/$t.log 2>&1; echo "$t rc $?"; grep -E 'FAILED|PASSED|SKIPPED' $R/logs/$t.log | head -8
done
pack
echo "== lab"
timeout 120 $B/paged_attn_lab --quick >$R/logs/lab.log 2>&1; echo "lab rc $?"; sed -n '/== prefill/,$p' $R/logs/lab.log; grep -A6 -E '^(1024x192|512x256|64x4000)' $R/logs/lab.log
pack
echo "== max load"
run ml $M --mode throughput --preset max-load-128
grep -m1 'GEMM algorithms' $R/logs/ml.log
HAYATE_GEMM_CHUNK=0 run ml-nochunk $M --mode throughput --preset max-load-128
run ml2 $M --mode throughput --preset max-load-128
pack
CUDA_INJECTION64_PATH=$root/$B/libkprof.so KPROF_OUT=$R/logs/ml-prof.kprof KPROF_LAST_MS=7400 run ml-prof $M --mode throughput --preset max-load-128
head -50 $R/logs/ml-prof.kprof
pack
run b64 $M --mode throughput --preset llmib-128-b64
run b64-1024 $M --mode throughput --preset llmib-1024-b64
pack
echo "done at $((SECONDS - T0)) s"
