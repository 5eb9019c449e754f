#!/usr/bin/env bash
# Builds tools/kprof/libkprof.so (kprof.cpp: a CUPTI kernel-time profile of
# any CUDA program). Usage: tools/kprof/build.sh [OUT_DIR] (default: build/kprof).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../build/kprof}
cuda=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$out"
g++ -std=c++20 -O2 -Wall -Wextra -Werror -fPIC -shared -I"$cuda/include" \
  "$here/kprof.cpp" -o "$out/libkprof.so" -L"$cuda/lib64" -L"$cuda/lib" -lcupti \
  -Wl,-rpath,'$ORIGIN'
echo "$out/libkprof.so"
