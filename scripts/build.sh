#!/usr/bin/env bash
# Builds the release binary, build/release/hayate (with the CUDA backend when
# nvcc is found): just the binary by default.
#   scripts/build.sh            the hayate binary
#   scripts/build.sh --tests    every target (tests, kernel lab) too
#   scripts/build.sh --install PREFIX   the binary, then cmake --install to PREFIX
#                               (PREFIX/bin/hayate, PREFIX/share/hayate/assets)
set -euo pipefail
cd "$(dirname "$0")/.."
target=(--target hayate)
prefix=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tests) target=() ;;
    --install) prefix=${2:?--install needs a PREFIX}; shift ;;
    *) echo "usage: scripts/build.sh [--tests] [--install PREFIX]" >&2; exit 2 ;;
  esac
  shift
done
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" "${target[@]}"
if [ -n "$prefix" ]; then cmake --install build/release --prefix "$prefix"; fi
