#!/usr/bin/env bash
# The CUDA backend's device run: gpu tests, the kernel lab, decode timing and
# the 8B check against transformers, with every log under $OUT.
#
# Runs on the GPU machine from the repository root:
#   tools/gpu_run.sh [BINDIR] [STEPS]
# BINDIR holds prebuilt binaries (default out/gpu: gpu_kernel_tests,
# gpu_forward_tests, gemv_lab, decode_bench, hf_check_dump; tools/gpu_pack.sh
# copies them there from build/cuda); when one is missing it is built here in
# build/cuda. STEPS: any of tests,lab,decode,hf8b (default all).
set -uo pipefail
BIN=${1:-out/gpu}
STEPS=${2:-tests,lab,decode,hf8b}
OUT=${OUT:-out/logs}
mkdir -p "$OUT"
root=$(pwd)

# The binaries were built in /work/main: test data and assets are found there.
if [ ! -e /work/main/tests ]; then mkdir -p /work && ln -sfn "$root" /work/main; fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}
done
if ! ldconfig -p | grep -q libcublas.so.13 && [ ! -e /usr/local/cuda/lib64/libcublas.so.13 ]; then
  lib=$(find / -name 'libcublas.so.13' -not -path '*/proc/*' 2>/dev/null | head -1)
  [ -n "$lib" ] && export LD_LIBRARY_PATH=$(dirname "$lib"):$LD_LIBRARY_PATH
fi

for b in gpu_kernel_tests gpu_forward_tests gemv_lab decode_bench hf_check_dump; do
  if [ ! -x "$BIN/$b" ]; then
    echo "== $b missing in $BIN: building in build/cuda"
    cmake -S . -B build/cuda -G Ninja -DCMAKE_BUILD_TYPE=Release >"$OUT/build.log" 2>&1 &&
      cmake --build build/cuda --target "$b" -j "$(nproc)" >>"$OUT/build.log" 2>&1
    mkdir -p "$BIN"
    cp "$(find build/cuda -name "$b" -type f -perm -u+x | head -1)" "$BIN/" || echo "cannot build $b"
  fi
done

{ nvidia-smi; nvidia-smi -q -d CLOCK | head -40; } >"$OUT/nvidia_smi.txt" 2>&1
status=0
has() { [[ ",$STEPS," == *",$1,"* ]]; }

if has tests; then
  echo "== gpu tests"
  "$BIN/gpu_kernel_tests" --gtest_brief=1 2>&1 | tee "$OUT/gpu_tests.log" | tail -30 || status=1
  "$BIN/gpu_forward_tests" --gtest_brief=1 2>&1 | tee -a "$OUT/gpu_tests.log" | grep -v "^\[ *OK" | tail -40 || status=1
  grep -E "^\[  (PASSED|FAILED)|tests ran" "$OUT/gpu_tests.log"
fi
if has lab; then
  echo "== kernel lab"
  "$BIN/gemv_lab" 2>&1 | tee "$OUT/gemv_lab.log" || status=1
fi
if has decode; then
  echo "== decode timing"
  "$BIN/decode_bench" dummy:llama-3.1-8b float16 2>&1 | tee "$OUT/decode_bench.log" || status=1
fi
if has hf8b; then
  echo "== 8B teacher-forced check against transformers"
  dir=$(mktemp -d)
  "$BIN/hf_check_dump" "$dir" dummy:llama-3.1-8b 128 float16 2>&1 | tee "$OUT/hf_8b_check.log" &&
    PYTHONUNBUFFERED=1 python3 tools/hf_8b_check.py "$dir" 2>&1 | tee -a "$OUT/hf_8b_check.log" || status=1
  rm -rf "$dir"
fi
exit $status
