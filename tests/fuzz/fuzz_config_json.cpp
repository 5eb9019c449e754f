// libFuzzer: random bytes as config.json. Parsing must succeed or throw
// hayate::Error (a JSON syntax error is nlohmann's, and skipped); an accepted
// config must respect the bounds the loader relies on before reading tensors.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/check.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    hayate::ModelConfig c = hayate::parse_config(j, "config.json");
    if (c.num_layers < 1 || c.num_layers > hayate::kMaxLayers || c.vocab_size < 1 ||
        c.head_dim < 1 || c.num_heads % c.num_kv_heads != 0)
      __builtin_trap();
  } catch (const hayate::Error&) {
  }
  return 0;
}
