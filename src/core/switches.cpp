#include "core/switches.h"

#include <algorithm>
#include <cstdlib>

#include "core/check.h"

namespace hayate {

const std::vector<SwitchInfo>& switch_table() {
  static const std::vector<SwitchInfo> table = {
      {"HAYATE_BATCH_SAMPLER", "auto|batched|rows",
       "non-greedy rows: whichever a start-up timing finds faster, one batched pass, row by row"},
      {"HAYATE_BATCH_PERSISTENT", "1|0|refuse-trial",
       "bucket 1 on the persistent decode kernel where it runs, never, or its trial refused"},
      {"HAYATE_BATCH_GEMM", "lt|ex16|ex",
       "batched GEMMs: timed cuBLASLt/GemmEx with T outputs, GemmEx with T outputs, GemmEx fp32"},
  };
  return table;
}

namespace {

// The value of `env`, checked against its row's allowed values; the default
// (first) when unset.
std::string read(std::string_view env) {
  for (const SwitchInfo& s : switch_table()) {
    if (s.env != env) continue;
    const std::string values(s.values);
    const char* v = std::getenv(std::string(env).c_str());
    if (v == nullptr) return values.substr(0, values.find('|'));
    for (size_t at = 0; at <= values.size();) {
      const size_t end = std::min(values.find('|', at), values.size());
      if (values.compare(at, end - at, v) == 0) return v;
      at = end + 1;
    }
    fail(cat(env, " must be one of ", values, ", got '", v, "'"));
  }
  fail(cat("no switch ", env));
}

}  // namespace

Switches Switches::from_environment() {
  Switches s;
  const std::string sampler = read("HAYATE_BATCH_SAMPLER");
  s.sampler = sampler == "batched" ? SamplerPath::kBatched
              : sampler == "rows"  ? SamplerPath::kRows
                                   : SamplerPath::kAuto;
  const std::string persistent = read("HAYATE_BATCH_PERSISTENT");
  s.persistent = persistent == "0"              ? PersistentMode::kOff
                 : persistent == "refuse-trial" ? PersistentMode::kRefuseTrial
                                                : PersistentMode::kOn;
  const std::string gemm = read("HAYATE_BATCH_GEMM");
  s.gemm = gemm == "ex16" ? GemmPath::kEx16 : gemm == "ex" ? GemmPath::kEx : GemmPath::kLt;
  return s;
}

}  // namespace hayate
