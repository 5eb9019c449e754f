#!/usr/bin/env bash
# Session 5 call 8: Nsight Compute on the tensor-core decode attention, max load's 1024 x 192
# keys (74 % of the read probe) against 64 x 4000 (87 %): what limits the short rows.
set -uo pipefail
root=$(pwd); B=out/k8/bin; R=$OUT/r; mkdir -p $R
(cd out/k8 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
NCU=$(ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1); [ -z "$NCU" ] && NCU=$(command -v ncu)
echo "ncu: $NCU"
for c in 1024x192 64x4000; do
  timeout 200 $NCU --clock-control none --kernel-name regex:paged_decode_mma_kernel --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section Occupancy --section SchedulerStats --section LaunchStats \
    $B/paged_attn_lab --only $c >$R/ncu-$c.txt 2>&1
  echo "$c rc $?"
  grep -E 'Duration|Memory Throughput|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per|Block Limit|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|L2 Hit|L1/TEX Hit|Waves Per SM|Mem Busy|Max Bandwidth' $R/ncu-$c.txt | head -40
done
(cd $OUT && tar czf results.tgz r)
