#!/usr/bin/env bash
# Session 4, call 8 (run 12h): gemv_lab --persistent with the barrier polled every 100 / 500 ns.
set -uo pipefail
root=$(pwd); B=out/p12/bin; R=$OUT/r; mkdir -p $R
(cd out/p12 && tar xJf bins.tar.xz) || exit 1
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
timeout 150 $B/gemv_lab --persistent >$R/gemv_lab_persistent.log 2>&1; echo "rc $?"
cat $R/gemv_lab_persistent.log
