#!/usr/bin/env bash
# Session 6 call 10: is the decode attention slower at the capped clock? tools/kprof over the
# last ~7 s of overlap_lab's maxload mode (its last pass: GEMMs picked sustained, every part,
# the GPU at its power limit) gives per-kernel times inside the sequence; the lab's isolated
# attention timing (same binary, printed first) runs at boost clock.
set -uo pipefail
root=$(pwd); B=out/o10/bin; R=$OUT/r; mkdir -p $R
(cd out/o10 && tar xJf bins.tar.xz) || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active --format=csv,noheader -lms 250 >$R/smi.csv 2>&1 & P=$!
CUDA_INJECTION64_PATH=$root/$B/lib/libkprof.so KPROF_OUT=$R/maxload.kprof KPROF_LAST_MS=6900 \
  timeout 400 $B/overlap_lab 1024 128 256 maxload >$R/maxload.log 2>&1; echo "rc $?"
kill $P
grep -v "^  gemm" $R/maxload.log
head -24 $R/maxload.kprof
tail -40 $R/smi.csv | awk 'NR%4==0'
(cd $OUT && tar czf results.tgz r)
