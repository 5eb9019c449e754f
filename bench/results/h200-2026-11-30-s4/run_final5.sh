#!/usr/bin/env bash
# Session 4, final call 5: after the review refactor (ring_tile_dot, softmax_tile64, ring init,
# memsets on the backend's stream): every gpu test, decode_bench --quick, hayate bench same x6.
set -uo pipefail
root=$(pwd); B=out/fin5/bin; R=$OUT/r; mkdir -p $R
(cd out/fin5 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
for t in gpu_forward_tests gpu_kernel_tests gpu_batch_tests gpu_paged_attention_tests; do
  timeout 100 $B/$t --gtest_brief=1 >$R/$t.log 2>&1
  echo "$t rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' $R/$t.log | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure" $R/$t.log | head -5
done
timeout 80 $B/decode_bench --quick >$R/decode_bench.log 2>&1; echo "decode_bench rc $?"
grep -E "^decode|phases" $R/decode_bench.log
timeout 60 $B/hayate bench --backend cuda --model dummy:llama-3.1-8b --prompts same --runs 6 --max-length 128 --json $R/same6.json >$R/same6.log 2>&1; echo "bench rc $?"
grep -E "mean|decode" $R/same6.log | head -4
