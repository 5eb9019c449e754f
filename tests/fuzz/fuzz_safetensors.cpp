// libFuzzer target for the safetensors header parser: any byte string must
// either parse into tensors whose spans lie inside the input, or throw
// hayate::Error. Crashes, leaks, hangs and sanitizer reports are bugs.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/check.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  try {
    const hayate::SafetensorsFile f = hayate::parse_safetensors(bytes, "fuzz.safetensors");
    // Touch the first and last byte of each tensor: ASan flags any span that
    // escapes the input buffer.
    unsigned sum = 0;
    for (const hayate::SafetensorsTensor& t : f.tensors) {
      if (t.data.empty()) continue;
      if (t.data.data() < data || t.data.data() + t.data.size() > data + size) __builtin_trap();
      sum += t.data.front() + t.data.back();
      if (f.find(t.name) != &t) __builtin_trap();
    }
    volatile unsigned sink = sum;
    (void)sink;
  } catch (const hayate::Error&) {
  }
  return 0;
}
