#!/usr/bin/env bash
# Packs what a device call needs from a release build into DEST.tar.xz, to
# carry (binaries, stripped, and the shared cpp-httplib the device lacks;
# the device code compresses about 7x; hayate ~5.2 MB at xz -9):
#   tools/pack_device.sh BUILD_DIR DEST [BINARY...]
# Default binaries: hayate and every gpu_*_tests of the build. On the device:
#   tar xf DEST.tar.xz   (unpacks to DEST/)
set -euo pipefail
cd "$(dirname "$0")/.."
B=$1
D=$2
shift 2
mkdir -p "$D/tests/gpu" "$D/lib"
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
  bins=(hayate)
  for t in "$B"/tests/gpu/gpu_*_tests; do bins+=("tests/gpu/$(basename "$t")"); done
fi
for b in "${bins[@]}"; do
  mkdir -p "$D/$(dirname "$b")"
  strip -o "$D/$b" "$B/$b"
done
cp -L "$(ldconfig -p | awk '/libcpp-httplib.so/ {print $NF; exit}')" "$D/lib/"
# CUPTI (hayate profile's kernel records) only with CARRY_CUPTI=1: the
# device's CUDA has it (/usr/local/cuda-13.0/targets/x86_64-linux/lib, found
# there 2026-12-05), and its 1.2 MB compressed count against the 64 MiB a
# call may carry beside the tracked tree (~53 MB).
if [ -n "${CARRY_CUPTI:-}" ]; then
  cupti=$(ldd "$B/hayate" | awk '/libcupti/ {print $3; exit}')
  [ -n "$cupti" ] && cp -L "$cupti" "$D/lib/"
fi
tar cf - "$D" | xz -T2 -9 >"$D.tar.xz"
rm -rf "$D"
du -sh "$D.tar.xz"
