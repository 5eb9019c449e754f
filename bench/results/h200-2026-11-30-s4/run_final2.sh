#!/usr/bin/env bash
# Run from the repository root on the GPU machine with out/fin/bins.tar.xz present: the stripped
# build/release binaries (hayate, gpu_*_tests) in bin/ and their Debian .so files in bin/lib/
# (see ldd), packed here and carried by the device call (the 122-token prompt: bench/results/h200-2026-11-30-s3/p.txt).
# Session 4 final call 2 (gpu tests in final call 1): batch 1 vs single stream, throughput presets, serving,
# then the article's comparison (hayate, HF eager, HF + torch.compile). Results are
# tarred after each section so a cut-short call still returns what it made.
set -uo pipefail
root=$(pwd); B=out/fin/bin; R=$OUT/r; mkdir -p $R/logs $R/json
T0=$SECONDS; left() { echo $((570 - (SECONDS - T0))); }
(cd out/fin && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
M="--backend cuda --model dummy:llama-3.1-8b"
echo "== batch 1 vs single stream ($(left) s left)"
run() { name=$1; shift; timeout 90 $B/hayate bench "$@" --json $R/json/$name.json >$R/logs/$name.log 2>&1; echo "$name rc $?"; }
for r in 1 2; do
  run ss-11-117-r$r $M --prompts same --runs 6 --max-length 128
  run b1-11-117-r$r --mode throughput $M --num-prompts 6 --input-len 11 --output-len 117 --concurrency 1
done
run ss-122-128 $M --prompts bench/results/h200-2026-11-30-s3/p.txt --runs 6 --max-new-tokens 128 --warmup 1
run b1-122-128 --mode throughput $M --num-prompts 6 --input-len 122 --output-len 128 --concurrency 1
pack
echo "== presets ($(left) s left)"
for p in llmib-128-b64 llmib-1024-b64 max-load-128; do
  run $p --mode throughput $M --preset $p
  grep -hE "^requests|tokens/s|tpot" $R/logs/$p.log
done
pack
echo "== serving ($(left) s left)"
OUT=$R/serve timeout 150 tools/serve_bench.sh $B/hayate >$R/logs/serve.log 2>&1; echo "serve rc $?"
tail -12 $R/logs/serve.log
pack
b=$(( $(left) - 20 ))
echo "== article comparison (budget $b s)"
if [ $b -gt 200 ]; then
  OUT=$R/article BUDGET_S=$b tools/final_bench.sh $B/hayate >$R/logs/final_bench.log 2>&1; echo "final_bench rc $?"
  cat $R/article/steps.txt 2>/dev/null | grep -E "rc|done"; tail -20 $R/logs/final_bench.log
fi
pack
echo "done at $((SECONDS - T0)) s"
