#!/usr/bin/env bash
# The kernel lab and the 8B check against transformers on the GPU machine,
# with every log under $OUT (the gpu test suites: tools/gpu_suites.sh).
#
# Runs on the GPU machine from the repository root:
#   tools/gpu_run.sh BINDIR [STEPS]
# BINDIR holds gemv_lab and hf_check_dump (tools/pack_device.sh BUILD DEST
# bench/kernels/gemv_lab bench/kernels/hf_check_dump packs them). STEPS: any
# of lab,hf8b (default both). HF8B_MODE: decode (default: 128 single-token steps,
# bucket 1 on the persistent kernel) or prefill (one chunk).
set -uo pipefail
BIN=${1:?BINDIR}
STEPS=${2:-lab,hf8b}
OUT=${OUT:-out/logs}
mkdir -p "$OUT"
root=$(pwd)
# The binaries were built in /work/main: test data and assets are found there.
if [ ! -e /work/main/tests ]; then mkdir -p /work && ln -sfn "$root" /work/main; fi
for d in /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda/lib64 /usr/local/cuda/lib "$root/$BIN/lib"; do
  [ -d "$d" ] && export LD_LIBRARY_PATH=$d:${LD_LIBRARY_PATH:-}
done
{ nvidia-smi; nvidia-smi -q -d CLOCK | head -40; } >"$OUT/nvidia_smi.txt" 2>&1
status=0
has() { [[ ",$STEPS," == *",$1,"* ]]; }
find_bin() { find "$BIN" -name "$1" -type f -perm -u+x | head -1; }
if has lab; then
  echo "== kernel lab"
  "$(find_bin gemv_lab)" 2>&1 | tee "$OUT/gemv_lab.log" || status=1
fi
if has hf8b; then
  echo "== 8B teacher-forced check against transformers"
  dir=$(mktemp -d)
  "$(find_bin hf_check_dump)" "$dir" dummy:llama-3.1-8b 128 float16 ${HF8B_MODE:-decode} 2>&1 | tee "$OUT/hf_8b_check.log" &&
    PYTHONUNBUFFERED=1 python3 tools/hf_8b_check.py "$dir" 2>&1 | tee -a "$OUT/hf_8b_check.log" || status=1
  rm -rf "$dir"
fi
exit $status
