// Every switch of hayate that is not a command-line flag, declared once: the
// lab's and the tests' choices among code paths the product ships (the
// default is the measured winner). Each has one environment variable, a
// type, its allowed values and a line on what it does. The binary reads them
// once at start (Switches::from_environment) and passes them down in
// BatchBackendOptions; tests set the fields. Nothing else reads getenv().
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hayate {

// Non-greedy sampling rows after a batched step.
enum class SamplerPath {
  kAuto,     // batched from the row count where a start-up timing finds it faster
  kBatched,  // one segmented sort and one pick launch for all rows
  kRows,     // row by row through the one-row sampler
};

// The batched steps' GEMMs.
enum class GemmPath {
  kLt,    // per shape and row count the fastest of cuBLASLt's candidates and GemmEx, T outputs
  kEx16,  // cublasGemmEx only, T outputs where the reader takes T
  kEx,    // cublasGemmEx only, fp32 outputs
};

// Bucket 1 on the persistent decode kernel.
enum class PersistentMode {
  kOn,           // where it has a configuration and its start-up trial launch runs
  kOff,          // never (batched GEMVs or cuBLAS)
  kRefuseTrial,  // tests: the trial asks for a grid the runtime refuses, as under MPS limits
};

struct Switches {
  SamplerPath sampler = SamplerPath::kAuto;
  PersistentMode persistent = PersistentMode::kOn;
  GemmPath gemm = GemmPath::kLt;

  // Reads the variables below; throws Error naming the variable and its
  // allowed values for anything else.
  static Switches from_environment();
};

// The table: one row per switch, for from_environment() and `hayate --help`.
struct SwitchInfo {
  std::string_view env;      // the variable
  std::string_view values;   // allowed values, the default first
  std::string_view meaning;  // one line
};
const std::vector<SwitchInfo>& switch_table();

}  // namespace hayate
