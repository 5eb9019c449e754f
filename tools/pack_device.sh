#!/usr/bin/env bash
# Packs what a device call needs from a release build into DEST.tar.xz, to
# carry (binaries, stripped, and the shared cpp-httplib the device lacks;
# the device code compresses about 7x), and CUPTI:
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
# CUPTI (hayate profile's kernel records), where the binary links it.
cupti=$(ldd "$B/hayate" | awk '/libcupti/ {print $3; exit}')
[ -n "$cupti" ] && cp -L "$cupti" "$D/lib/"
tar cf - "$D" | xz -T2 -1 >"$D.tar.xz"
rm -rf "$D"
du -sh "$D.tar.xz"
