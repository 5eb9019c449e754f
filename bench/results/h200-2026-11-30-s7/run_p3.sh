#!/usr/bin/env bash
# Session 7 call 3: the streaming decode kernel's variants in the lab (4 blocks per SM / 128
# registers, loads without L1 allocation); max-load-128's GPU work without the engine with the
# streaming kernel (overlap_lab ... maxload: GEMMs only, + small kernels, + decode attention),
# nvidia-smi every 250 ms.
set -uo pipefail
root=$(pwd); B=out/p3/bin; R=$OUT/r; mkdir -p $R
T0=$SECONDS
(cd out/p3 && tar xJf bins.tar.xz) || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
timeout 150 $B/gpu_paged_attention_tests --gtest_brief=1 >$R/gpu_paged_attention_tests.log 2>&1
echo "gpu_paged_attention_tests rc $?: $(grep -E '^\[  (PASSED|FAILED)|FAILED  \]' $R/gpu_paged_attention_tests.log | tr '\n' ' ')"
timeout 100 $B/paged_attn_lab --quick >$R/lab.log 2>&1; echo "lab rc $? at $((SECONDS - T0)) s"
grep -E "^(64x1536|256x200|1024x192|512x256|64x200|64x100):|default|stream|FAIL" $R/lab.log | grep -v "^  mma \(tb\|4\|help\)\|v2" | head -60
pack
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 250 >$R/smi.csv 2>&1 & P=$!
timeout 330 $B/overlap_lab 1024 128 256 maxload >$R/maxload.log 2>&1; echo "maxload rc $? at $((SECONDS - T0)) s"
kill $P
grep -E "^max load|^attention|^full" $R/maxload.log
awk 'NR%40==0' $R/smi.csv
pack
