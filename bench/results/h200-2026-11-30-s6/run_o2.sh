#!/usr/bin/env bash
# Session 6 call 2: is max load power-bound? Sustained GEMM / attention / decode-layer rates
# in windows of 250 ms (overlap_lab ... sustain), and max-load-128, each with nvidia-smi
# sampling clocks, power and throttle reasons every 100 ms.
set -uo pipefail
root=$(pwd); B=out/o2/bin; R=$OUT/r; mkdir -p $R
(cd out/o2 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
smi() {  # $1: output file; runs until killed
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active,utilization.gpu \
    --format=csv,noheader -lms 100 >$1 2>&1
}
smi $R/smi-lab.csv & P=$!
timeout 120 $B/overlap_lab 1024 128 256 sustain >$R/sustain.log 2>&1; echo "sustain rc $?"
kill $P; wait $P 2>/dev/null
grep -v "^  gemm" $R/sustain.log
smi $R/smi-ml.csv & P=$!
date +%s.%N >$R/ml-start.txt
timeout 100 $B/hayate bench --mode throughput --backend cuda --model dummy:llama-3.1-8b --preset max-load-128 >$R/ml.log 2>&1; echo "ml rc $?"
date +%s.%N >>$R/ml-start.txt
kill $P; wait $P 2>/dev/null
grep -E '^requests|tokens/s' $R/ml.log | cut -c1-300
echo "--- lab smi (every 5th)"; awk 'NR%5==0' $R/smi-lab.csv | head -60
echo "--- ml smi (last 90, every 2nd)"; tail -90 $R/smi-ml.csv | awk 'NR%2==0'
(cd $OUT && tar czf results.tgz r)
