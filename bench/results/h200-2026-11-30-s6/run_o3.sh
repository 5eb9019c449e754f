#!/usr/bin/env bash
# Session 6 call 3: max load runs at the 700 W cap (call 2). Do cuBLASLt's candidates rank
# differently when sustained (power-limited) than in bursts? Each of the first 8 candidates
# of the four layer GEMMs at 1024 and 16384 rows: burst and sustained TFLOP/s.
set -uo pipefail
root=$(pwd); B=out/o3/bin; R=$OUT/r; mkdir -p $R
(cd out/o3 && tar xJf bins.tar.xz) || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader -lms 250 >$R/smi.csv 2>&1 & P=$!
timeout 300 $B/overlap_lab 1024 128 256 candidates >$R/candidates.log 2>&1; echo "rc $?"
kill $P
cat $R/candidates.log
(cd $OUT && tar czf results.tgz r)
