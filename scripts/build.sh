#!/usr/bin/env bash
# Builds the release binary (build/release/hayate), with the CUDA backend when
# nvcc is found.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)"
