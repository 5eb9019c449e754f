#!/usr/bin/env bash
# Session 5 call 1 (HEAD 190f69c + tools/kprof): the gpu tests on the never-run HEAD, then
# max-load-128 plain and under tools/kprof (CUPTI kernel times), and engine-knob variants.
set -uo pipefail
root=$(pwd); B=out/k1/bin; R=$OUT/r; mkdir -p $R/logs $R/json
T0=$SECONDS; left() { echo $((560 - (SECONDS - T0))); }
(cd out/k1 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
M="--backend cuda --model dummy:llama-3.1-8b"
run() { name=$1; shift; timeout 100 $B/hayate bench "$@" --json $R/json/$name.json >$R/logs/$name.log 2>&1; echo "$name rc $? ($(left) s left)"; grep -hE "^requests|tokens/s|ttft|tpot|engine" $R/logs/$name.log; }
prof() { name=$1; shift; CUDA_INJECTION64_PATH=$root/$B/libkprof.so KPROF_OUT=$R/logs/$name.kprof run $name "$@"; head -60 $R/logs/$name.kprof; }
echo "== tests"
for t in gpu_kernel_tests gpu_paged_attention_tests gpu_batch_tests gpu_forward_tests; do
  timeout 150 $B/$t --gtest_brief=1 >$R/logs/$t.log 2>&1; echo "$t rc $?"; tail -3 $R/logs/$t.log
done
pack
echo "== max load"
run ml $M --mode throughput --preset max-load-128
pack
prof ml-prof $M --mode throughput --preset max-load-128
pack
run ml-8k $M --mode throughput --preset max-load-128 --max-num-seqs 1024 --max-num-batched-tokens 8192
run ml-4k $M --mode throughput --preset max-load-128 --max-num-seqs 1024 --max-num-batched-tokens 4096
pack
run ml-2048 $M --mode throughput --num-prompts 2048 --input-len 128 --output-len 128 --max-num-seqs 2048 --max-num-batched-tokens 16384
pack
prof b64-prof $M --mode throughput --preset llmib-128-b64
pack
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv
echo "done at $((SECONDS - T0)) s"
