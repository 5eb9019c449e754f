#!/usr/bin/env bash
# Session 6 call 1: overlap lab (can max load's decode attention hide under the other
# half-batch's GEMMs?), 1024 rows x 128..256 keys (max load's decode) and 2048 rows.
set -uo pipefail
root=$(pwd); B=out/o1/bin; R=$OUT/r; mkdir -p $R
(cd out/o1 && tar xJf bins.tar.xz) || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv >$R/gpu.txt 2>&1
timeout 250 $B/overlap_lab 1024 128 256 >$R/overlap-1024.log 2>&1; echo "1024 rc $?"
cat $R/overlap-1024.log
timeout 200 $B/overlap_lab 2048 128 256 >$R/overlap-2048.log 2>&1; echo "2048 rc $?"
grep -v "^  gemm" $R/overlap-2048.log
(cd $OUT && tar czf results.tgz r)
