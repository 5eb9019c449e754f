#!/usr/bin/env bash
# Session 6 call 4: max-load-128's GPU work without the engine (overlap_lab ... maxload):
# GEMMs only, + small kernels, + decode attention; GEMM algorithms picked in bursts (as the
# engine's start-up) or sustained (at the power limit). nvidia-smi every 250 ms.
set -uo pipefail
root=$(pwd); B=out/o4/bin; R=$OUT/r; mkdir -p $R
(cd out/o4 && tar xJf bins.tar.xz) || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 250 >$R/smi.csv 2>&1 & P=$!
timeout 400 $B/overlap_lab 1024 128 256 maxload >$R/maxload.log 2>&1; echo "rc $?"
kill $P
cat $R/maxload.log
awk 'NR%12==0' $R/smi.csv
(cd $OUT && tar czf results.tgz r)
