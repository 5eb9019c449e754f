#!/usr/bin/env bash
# Session 5 call 5 (final figures, hayate aac16de = fe00a37's code): batch 1 vs single stream
# (interleaved pairs, as in session 4), the throughput presets (max load twice), and two
# exploratory max-load settings (32,768 tokens per step; 2,048 requests at 2,048 seqs).
set -uo pipefail
root=$(pwd); B=out/k5/bin; R=$OUT/r; mkdir -p $R/logs $R/json
T0=$SECONDS; left() { echo $((560 - (SECONDS - T0))); }
(cd out/k5 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
M="--backend cuda --model dummy:llama-3.1-8b"
run() { name=$1; shift; timeout 100 $B/hayate bench "$@" --json $R/json/$name.json >$R/logs/$name.log 2>&1; echo "$name rc $? ($(left) s left)"; grep -hE "^requests|tokens/s|ttft|tpot|engine|mean s|decode" $R/logs/$name.log | head -6; }
echo "== batch 1 vs single stream"
for r in 1 2; do
  run ss-11-117-r$r $M --prompts same --runs 6 --max-length 128
  run b1-11-117-r$r --mode throughput $M --num-prompts 6 --input-len 11 --output-len 117 --concurrency 1
done
run ss-122-128 $M --prompts bench/results/h200-2026-11-30-s3/p.txt --runs 6 --max-new-tokens 128 --warmup 1
run b1-122-128 --mode throughput $M --num-prompts 6 --input-len 122 --output-len 128 --concurrency 1
pack
echo "== presets"
for p in llmib-128-b64 llmib-1024-b64 max-load-128; do run $p --mode throughput $M --preset $p; done
run max-load-128-r2 --mode throughput $M --preset max-load-128
pack
echo "== exploratory"
run ml-32k --mode throughput $M --preset max-load-128 --max-num-seqs 1024 --max-num-batched-tokens 32768
run ml-2048 --mode throughput $M --num-prompts 2048 --input-len 128 --output-len 128 --max-num-seqs 2048 --max-num-batched-tokens 16384
pack
echo "done at $((SECONDS - T0)) s"
