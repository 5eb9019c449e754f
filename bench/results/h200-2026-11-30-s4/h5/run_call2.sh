#!/usr/bin/env bash
# Run from the repository root on the GPU machine with out/h5/bins.tar.xz present: stripped
# build/h5 binaries (hayate, gemm_lab, gpu_batch_tests) in bin/ and the Debian .so files of
# out/final4/lib in bin/lib/. Session 4, engineer h5, call 2 (GemmEx timed beside 8 cuBLASLt
# candidates per row count; row counts that were not timed run GemmEx): the GEMM lab,
# gpu_batch_tests, then the presets with the lt path (default) and max-load-128 once more with the previous path
# (HAYATE_BATCH_GEMM=ex) in the same call. Results are tarred after each section.
set -uo pipefail
root=$(pwd); B=out/h5/bin; R=$OUT/r; mkdir -p $R/logs $R/json
T0=$SECONDS
(cd out/h5 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
  --format=csv >$R/logs/gpu.txt 2>&1
echo "== gemm_lab"
timeout 75 $B/gemm_lab >$R/logs/gemm_lab.log 2>&1; echo "gemm_lab rc $?"
cat $R/logs/gemm_lab.log
pack
echo "== gpu tests ($((SECONDS - T0)) s)"
for t in gpu_batch_tests; do
  timeout 60 $B/$t --gtest_brief=1 >$R/logs/$t.log 2>&1
  echo "$t rc $?: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' $R/logs/$t.log | tr '\n' ' ')"
  grep -E "^\[  FAILED|Failure" -A4 $R/logs/$t.log | head -12
done
pack
M="--mode throughput --backend cuda --model dummy:llama-3.1-8b"
run() {  # name, gemm path, preset
  timeout 100 env HAYATE_BATCH_GEMM=$2 $B/hayate bench $M --preset $3 --json $R/json/$1.json \
    >$R/logs/$1.log 2>&1
  echo "$1 rc $? ($((SECONDS - T0)) s)"; grep -hE "cuBLASLt|^requests|tokens/s|tpot|ttft" $R/logs/$1.log | cut -c1-400
}
run max-load-128-lt lt max-load-128
run max-load-128-ex ex max-load-128
pack
run llmib-128-b64-lt lt llmib-128-b64
if [ $((SECONDS - T0)) -lt 200 ]; then run llmib-1024-b64-lt lt llmib-1024-b64; else echo "llmib-1024-b64 skipped (time)"; fi
pack
echo "done at $((SECONDS - T0)) s"
