#!/usr/bin/env bash
# Session 6 call 5: GEMM algorithms timed sustained (HAYATE_GEMM_TUNE=sustained: tiers of
# >= 256 rows round-robin in ~2 ms windows at the power limit) against bursts (default),
# same binary, max-load-128 interleaved x3.
set -uo pipefail
root=$(pwd); B=out/o5/bin; R=$OUT/r; mkdir -p $R/logs $R/json
T0=$SECONDS; left() { echo $((560 - (SECONDS - T0))); }
(cd out/o5 && tar xJf bins.tar.xz) || exit 1
mkdir -p /work && ln -sfn "$root" /work/main
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$root/$B/lib:${LD_LIBRARY_PATH:-}
pack() { (cd $OUT && tar czf results.tgz r); }
M="--backend cuda --model dummy:llama-3.1-8b"
run() { mode=$1; name=$2; shift 2; HAYATE_GEMM_TUNE=$mode timeout 100 $B/hayate bench "$@" --json $R/json/$name.json >$R/logs/$name.log 2>&1; echo "$name rc $? ($(left) s left)"; grep -hE "^requests|tokens/s" $R/logs/$name.log; grep -oE "GEMM algorithms timed in [0-9]+ ms" $R/logs/$name.log; }
for r in 1 2 3; do
  run sustained ml-sus-r$r $M --mode throughput --preset max-load-128
  run burst ml-burst-r$r $M --mode throughput --preset max-load-128
  pack
  [ $(left) -lt 80 ] && break
done
grep -h "GEMM algorithms" $R/logs/ml-sus-r1.log $R/logs/ml-burst-r1.log | cut -c1-900
pack
echo "done at $((SECONDS - T0)) s"
