#!/usr/bin/env bash
# Builds the CUDA binaries that tools/gpu_run.sh needs (build/cuda, -j2) and
# copies them to out/gpu, the folder a device call carries.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build/cuda -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/cuda -j2 --target gpu_kernel_tests gpu_forward_tests gemv_lab decode_bench hf_check_dump
mkdir -p out/gpu
for b in gpu_kernel_tests gpu_forward_tests gemv_lab decode_bench hf_check_dump; do
  cp "$(find build/cuda -name "$b" -type f -perm -u+x | head -1)" out/gpu/
done
du -sh out/gpu
