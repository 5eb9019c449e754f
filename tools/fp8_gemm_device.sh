#!/usr/bin/env bash
# Issue 16, the FP8 GEMM at few rows, in one device call: the FP8 GEMM lab
# (bench/kernels/gemm_fp8_lab: cuBLASLt against every tile of gemm_fp8_small
# on the 8B shapes, m = 1 .. 128, against the byte floor), gpu_fp8_tests (with
# the hand kernel's test) and llmib-128-b64 in fp16 and fp8 back to back
# (tools/fp8_device.sh), then llmib-1024-b64 where the call has room.
# Usage, from the repository root on the GPU machine (binaries packed by
# tools/pack_device.sh with hayate, tests/gpu/gpu_fp8_tests and
# bench/kernels/gemm_fp8_lab; the build's source dir linked to the root):
#   OUT=dir tools/fp8_gemm_device.sh PACK_DIR
set -uo pipefail
P=${1:?PACK_DIR}
O=${OUT:-out/fp8gemm}
mkdir -p "$O"
export LD_LIBRARY_PATH=$P/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv >"$O/gpu.txt" 2>&1
t0=$SECONDS
timeout 80 "$P/bench/kernels/gemm_fp8_lab" >"$O/gemm_fp8_lab.log" 2>&1
echo "lab rc $? $((SECONDS - t0))s" >>"$O/times.txt"
OUT=$O/fp8 TESTS="gpu_fp8_tests" BENCHES="llmib-128-b64:none,fp8" \
  timeout 150 tools/fp8_device.sh "$P" tests,bench >"$O/fp8_device.log" 2>&1
echo "fp8_device rc $? $((SECONDS - t0))s" >>"$O/times.txt"
if [ $((SECONDS - t0)) -lt 110 ]; then  # llmib-1024-b64: ~45 s a run
  OUT=$O/fp8b TESTS="" BENCHES="llmib-1024-b64:none,fp8" \
    timeout 120 tools/fp8_device.sh "$P" bench >"$O/fp8_device_b.log" 2>&1
  echo "fp8_device 1024 rc $? $((SECONDS - t0))s" >>"$O/times.txt"
  cat "$O/fp8b/summary.txt" >>"$O/fp8/summary.txt" 2>/dev/null
fi
grep -v "tiles (us)" "$O/gemm_fp8_lab.log"
cut -c1-400 "$O/fp8/summary.txt"
