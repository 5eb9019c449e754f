#!/usr/bin/env bash
# The merged tree's check on the GPU machine, from the repository root: every
# gpu suite, the default bench job, then an 8B FP8 checkpoint
# (tools/make_fp8_8b.py): load to first token from a warm page cache, and its
# batch-1 decode. Results under $OUT (suites.txt, logs.tgz).
#   tools/final_check_device.sh PACK_TAR [ASSETS_TAR]
# PACK_TAR: tools/pack_device.sh's binaries as a tarball of pack/ (unpacked
# beside it); ASSETS_TAR: the tokenizer assets, where assets/ is absent.
set -uo pipefail
root=$(pwd)
pack_tar=$1
dir=$(dirname "$pack_tar")
tar xf "$pack_tar" -C "$dir"
export LD_LIBRARY_PATH=$root/$dir/pack/lib:/usr/local/cuda/lib64:/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
# Binaries built in another checkout look for test data there.
build_root=${BUILD_ROOT:-/work/main}
[ "$build_root" = "$root" ] || { mkdir -p "$(dirname "$build_root")" && ln -sfn "$root" "$build_root"; }
[ -e "$root/assets" ] || tar xf "${2:?assets/ is absent: pass ASSETS_TAR}"
H=$dir/pack/hayate
mkdir -p "$OUT/logs"
nvidia-smi > "$OUT/logs/nvidia_smi.txt" 2>&1
OUT=$OUT/logs SUITE_TIMEOUT=200 bash tools/gpu_suites.sh "$dir/pack" > "$OUT/suites.txt" 2>&1
echo "suites rc $?" >> "$OUT/suites.txt"
timeout 150 $H bench --runs 3 > "$OUT/logs/bench_default.log" 2>&1
echo "bench rc $?" >> "$OUT/suites.txt"
tail -12 "$OUT/logs/bench_default.log" >> "$OUT/suites.txt"
{
  echo "== fp8 8B checkpoint"
  s=$(date +%s.%N)
  timeout 150 python3 tools/make_fp8_8b.py --out /tmp/fp8-8b --tokenizer assets/llama3_1 2>&1 | tail -3
  echo "make rc $? in $(awk -v s=$s -v e=$(date +%s.%N) "BEGIN{printf \"%.2f\", e-s}") s"; du -sh /tmp/fp8-8b; ls /tmp/fp8-8b
  for i in 1 2; do
    s=$(date +%s.%N)
    timeout 90 $H generate --model /tmp/fp8-8b --prompt "The capital of France is" --max-tokens 1 > "$OUT/logs/fp8_load_$i.log" 2>&1
    rc=$?
    echo "load+first token run $i: rc $rc, $(awk -v s=$s -v e=$(date +%s.%N) "BEGIN{printf \"%.2f\", e-s}") s wall"
    grep -E "loaded|weights|fp8|FP8|error|tokens" "$OUT/logs/fp8_load_$i.log" | head -8
  done
  timeout 120 $H bench --model /tmp/fp8-8b --prompts same --runs 3 --warmup 1 --explain > "$OUT/logs/fp8_ckpt_bench.log" 2>&1
  echo "fp8 checkpoint bench rc $?"; tail -15 "$OUT/logs/fp8_ckpt_bench.log"
} >> "$OUT/suites.txt" 2>&1
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs
