// Grammar engine timings, run by hand (Release build):
//   bench_grammar [--benchmark_filter=...]
// Compile time (schema -> grammar -> per-position token tables) and mask
// time per token along seeded random walks with the Llama 3.1 vocabulary
// (128,256 ids), for a typical tool schema and for the JSON Schema Test
// Suite's draft 7 schemas that compile. Percentiles are over every
// compile / every mask call, in microseconds of thread CPU time.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/check.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace hayate::grammar;

const char* kToolSchema = R"({"type": "object", "properties": {
  "location": {"type": "string", "description": "City and country, e.g. Paris, France"},
  "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
  "days": {"type": "integer", "minimum": 1, "maximum": 14},
  "include_hourly": {"type": "boolean"},
  "fields": {"type": "array", "items": {"type": "string", "enum": ["temp", "wind", "rain", "uv"]}, "maxItems": 4}},
  "required": ["location", "unit"], "additionalProperties": false})";

std::shared_ptr<const TokenVocab> vocab() {
  static const auto v = [] {
    const auto tok = hayate::Tokenizer::load(std::string(HAYATE_ASSETS_DIR) + "/llama3_1");
    std::vector<int32_t> eos;
    for (const char* t : {"<|end_of_text|>", "<|eom_id|>", "<|eot_id|>"})
      if (auto id = tok.token_to_id(t)) eos.push_back(*id);
    return std::make_shared<const TokenVocab>(TokenVocab::from_tokenizer(tok, eos));
  }();
  return v;
}

// Thread CPU time: the machine this runs on is shared, and wall time
// there counts other processes' slices too.
double cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

std::shared_ptr<const TokenTables> compile_tables(const nlohmann::json& schema) {
  return std::make_shared<const TokenTables>(std::make_shared<const Grammar>(compile_json_schema(schema)), vocab());
}

// A random walk (uniform over allowed tokens, EOS with p = 0.3 where
// allowed), timing every fill_mask.
void walk(const std::shared_ptr<const TokenTables>& t, uint64_t seed, int budget, size_t cache,
          std::vector<double>& mask_us) {
  GrammarMatcher m(t, cache);
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> mask;
  std::vector<int32_t> allowed;
  for (int step = 0; step < budget; ++step) {
    const double t0 = cpu_us();
    m.fill_mask(mask);
    mask_us.push_back(cpu_us() - t0);
    allowed.clear();
    bool eos = false;
    for (int32_t e : t->vocab().eos()) {
      eos = eos || ((mask[static_cast<size_t>(e) >> 5] >> (e & 31)) & 1);
      mask[static_cast<size_t>(e) >> 5] &= ~(1u << (e & 31));
    }
    for (size_t i = 0; i < mask.size(); ++i)
      for (uint32_t w = mask[i]; w; w &= w - 1)
        allowed.push_back(static_cast<int32_t>(i * 32 + static_cast<size_t>(__builtin_ctz(w))));
    if (allowed.empty() || (eos && std::uniform_real_distribution<double>(0, 1)(rng) < 0.3)) return;
    m.accept_token(allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)]);
  }
}

void report(benchmark::State& state, const std::vector<double>& compile_us, const std::vector<double>& mask_us) {
  state.counters["compile_p50_us"] = percentile(compile_us, 0.5);
  state.counters["compile_p99_us"] = percentile(compile_us, 0.99);
  state.counters["mask_p50_us"] = percentile(mask_us, 0.5);
  state.counters["mask_p99_us"] = percentile(mask_us, 0.99);
  state.counters["mask_max_us"] = percentile(mask_us, 1.0);
  state.counters["masks"] = static_cast<double>(mask_us.size());
}

// state.range(0): mask cache entries per matcher (0 = off).
void BM_ToolSchema(benchmark::State& state) {
  vocab();
  const auto schema = nlohmann::json::parse(kToolSchema);
  std::vector<double> compile_us, mask_us;
  for (auto _ : state) {
    const double t0 = cpu_us();
    auto t = compile_tables(schema);
    compile_us.push_back(cpu_us() - t0);
    for (uint64_t seed = 0; seed < 50; ++seed) walk(t, seed, 200, static_cast<size_t>(state.range(0)), mask_us);
  }
  report(state, compile_us, mask_us);
  state.counters["uncertain_tokens"] = static_cast<double>(compile_tables(schema)->stats().uncertain);
}
BENCHMARK(BM_ToolSchema)->Arg(0)->Arg(16)->Iterations(3)->Unit(benchmark::kMillisecond);

void BM_TestSuite(benchmark::State& state) {
  vocab();
  std::vector<nlohmann::json> schemas;
  const std::filesystem::path dir = "/usr/share/json-schema-test-suite/tests/draft7";
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f);
    for (const auto& g : nlohmann::json::parse(in)) schemas.push_back(g["schema"]);
  }
  std::vector<double> compile_us, mask_us;
  int compiled = 0;
  for (auto _ : state) {
    compiled = 0;
    for (const auto& s : schemas) {
      const double t0 = cpu_us();
      std::shared_ptr<const TokenTables> t;
      try {
        t = compile_tables(s);
      } catch (const hayate::Error&) {
        continue;
      }
      compile_us.push_back(cpu_us() - t0);
      ++compiled;
      for (uint64_t seed = 0; seed < 4; ++seed) walk(t, seed, 200, static_cast<size_t>(state.range(0)), mask_us);
    }
  }
  report(state, compile_us, mask_us);
  state.counters["schemas_compiled"] = compiled;
  state.counters["schemas_total"] = static_cast<double>(schemas.size());
}
BENCHMARK(BM_TestSuite)->Arg(0)->Arg(16)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
