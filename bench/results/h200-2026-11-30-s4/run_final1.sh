#!/usr/bin/env bash
# Session 4, final call 1 (binaries of the clean tree at the commit in the logs, packed into
# out/fin/bins.tar.xz: hayate, gpu_*_tests, gemv_lab, decode_bench, hf_check_dump + their .so
# files): every gpu test, the 8B check against transformers over 128 decode steps (the
# persistent kernel), decode_bench --quick and gemv_lab --persistent.
set -uo pipefail
root=$(pwd); B=out/fin/bin; R=$OUT/r; mkdir -p $R
(cd out/fin && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== gpu tests"
for t in gpu_forward_tests gpu_kernel_tests gpu_batch_tests gpu_paged_attention_tests; do
  timeout 150 $B/$t --gtest_brief=1 >$R/$t.log 2>&1
  echo "$t rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' $R/$t.log | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure" $R/$t.log | head -5
done
pack
echo "== 8B check against transformers, 128 decode steps"
dir=$(mktemp -d)
timeout 60 $B/hf_check_dump "$dir" dummy:llama-3.1-8b 128 float16 decode >$R/hf_8b_decode_check.log 2>&1 &&
  PYTHONUNBUFFERED=1 timeout 200 python3 tools/hf_8b_check.py "$dir" >>$R/hf_8b_decode_check.log 2>&1
echo "hf_8b_check rc $?"; tail -8 $R/hf_8b_decode_check.log
rm -rf "$dir"; pack
echo "== decode_bench --quick"
timeout 120 $B/decode_bench --quick >$R/decode_bench.log 2>&1; echo "rc $?"; cat $R/decode_bench.log
pack
echo "== gemv_lab --persistent"
timeout 100 $B/gemv_lab --persistent >$R/gemv_lab_persistent.log 2>&1; echo "rc $?"; cat $R/gemv_lab_persistent.log
pack
