// `hayate profile`: one decode step at batch B and context C (and optionally one
// prefill chunk of P tokens): the plan the backend runs, then per op what it
// computes, the bytes and FLOPs it moves, its floor at the measured read
// bandwidth and matmul rate, its measured time (CUPTI kernel records on the
// GPU, the persistent kernel's own timestamps, the host clock on the CPU) and
// its share of the step, against the step time on the bench's clock.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/common.h"
#include "bench/build_info.h"
#include "bench/stats.h"
#include "core/check.h"
#include "core/rng.h"
#include "engine/step_profile.h"

namespace hayate {
namespace {

struct ProfileArgs {
  ModelArgs model;
  int batch = 1;
  int context = 128;
  int prompt_len = 0;
  int runs = 20;
  std::string json;
};

// One profiled shape: its costs, the measured times, the bench clock's step.
struct ShapeProfile {
  std::string kind;  // decode | prefill
  int batch = 0, context = 0, tokens = 0;
  std::vector<OpCost> costs;  // as the backend ran them (fused when persistent)
  StepTimes times;
  double step_ms = 0;  // median over runs of the whole step on the bench's clock
};

// The KV blocks of `seqs` sequences of `len` positions each, consecutive.
std::vector<std::vector<int32_t>> tables(int seqs, int len, int block_size, int first) {
  std::vector<std::vector<int32_t>> t(static_cast<size_t>(seqs));
  const int per = (len + block_size - 1) / block_size;
  for (int s = 0; s < seqs; ++s)
    for (int b = 0; b < per; ++b) t[size_t(s)].push_back(first + s * per + b);
  return t;
}

ShapeProfile profile_shape(BatchBackend& be, const StepDtypes& dt, const std::string& kind,
                           int seqs, int context, int tokens, int first_block, int runs,
                           uint64_t seed) {
  const ModelConfig& c = be.config();
  const int len = context + tokens;
  const auto tab = tables(seqs, len, be.block_size(), first_block);
  uint64_t drawn = 0;
  const auto random_ids = [&](int n) {
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t& id : ids) id = int32_t(mix64(seed ^ mix64(drawn++)) % uint64_t(c.vocab_size));
    return ids;
  };
  // Fill each sequence's cache with `context` random tokens, in chunks.
  std::vector<int32_t> sink(1);
  const int chunk = 512;
  for (int s = 0; s < seqs; ++s)
    for (int p = 0; p < context; p += chunk) {
      const std::vector<int32_t> ids = random_ids(std::min(chunk, context - p));
      Batch b;
      b.seqs.push_back({uint64_t(s), ids, p, tab[size_t(s)]});
      b.num_tokens = int(ids.size());
      be.step(b, sink);
    }
  // The profiled step: `tokens` new tokens per sequence at position `context`.
  std::vector<std::vector<int32_t>> ids(static_cast<size_t>(seqs));
  const SamplingParams greedy{};
  Batch step;
  for (int s = 0; s < seqs; ++s) {
    ids[size_t(s)] = random_ids(tokens);
    BatchSeq q{uint64_t(s), ids[size_t(s)], context, tab[size_t(s)], true};
    q.sampling = &greedy;
    step.seqs.push_back(q);
    step.num_tokens += tokens;
  }
  std::vector<int32_t> out(static_cast<size_t>(seqs));
  for (int w = 0; w < 3; ++w) be.step(step, out);  // warm-up (rewrites the same positions)
  std::vector<double> ms;
  std::unique_ptr<RegionTimer> timer = be.make_timer();
  for (int r = 0; r < runs; ++r) {
    timer->start();
    be.step(step, out);
    ms.push_back(timer->stop_ms());
  }
  ShapeProfile p;
  p.kind = kind;
  p.batch = seqs;
  p.context = context;
  p.tokens = tokens;
  p.step_ms = bench::median(ms);
  // Five profiled steps; the one with the median kernel time is reported.
  std::vector<StepTimes> t;
  for (int r = 0; r < 5; ++r) t.push_back(be.profile_step(step, out));
  std::sort(t.begin(), t.end(),
            [](const StepTimes& a, const StepTimes& b) { return a.kernel_ms < b.kernel_ms; });
  p.times = t[t.size() / 2];
  p.costs = step_costs(c, dt, step);
  if (p.times.persistent) p.costs = fuse_persistent(p.costs);
  return p;
}

struct Row {
  std::string name, what;
  int calls = 0;
  double read = 0, written = 0, flops = 0, floor = 0;
  double ms = std::nan("");  // NaN: not measured
};

// Costs in forward order joined with the measured ops (those without a cost:
// step_meta first, the rest after).
std::vector<Row> rows_of(const ShapeProfile& p, double gbs, const MatmulRates& rates) {
  std::vector<Row> rows;
  std::map<std::string, const OpTime*> measured;
  for (const OpTime& o : p.times.ops) measured[o.name] = &o;
  const auto ms_of = [&](const std::string& n) {
    auto it = measured.find(n);
    return it == measured.end() ? (p.times.measured ? 0.0 : std::nan("")) : it->second->ms;
  };
  if (measured.count(op::kStepMeta)) rows.push_back({op::kStepMeta, "metadata unpack", 1});
  for (const OpCost& c : p.costs)
    rows.push_back({c.name, c.what, c.calls, c.bytes_read, c.bytes_written, c.flops,
                    floor_ms(c, gbs, rates)});
  for (const OpTime& o : p.times.ops) {
    const bool listed = std::any_of(rows.begin(), rows.end(), [&](const Row& r) { return r.name == o.name; });
    if (!listed) rows.push_back({o.name, o.name == op::kBarrier ? "waits at grid barriers" : "", o.kernels});
  }
  for (Row& r : rows) r.ms = ms_of(r.name);
  return rows;
}

nlohmann::json to_json(const ShapeProfile& p, double gbs, const MatmulRates& rates) {
  nlohmann::json ops = nlohmann::json::array();
  double floors = 0;
  for (const Row& r : rows_of(p, gbs, rates)) {
    floors += r.floor;
    ops.push_back({{"name", r.name}, {"what", r.what}, {"calls", r.calls},
                   {"bytes_read", r.read}, {"bytes_written", r.written}, {"flops", r.flops},
                   {"floor_ms", r.floor},
                   {"measured_ms", std::isnan(r.ms) ? nlohmann::json(nullptr) : nlohmann::json(r.ms)}});
  }
  nlohmann::json plan = nlohmann::json::object();
  for (const auto& [k, v] : p.times.plan) plan[k] = v;
  return {{"kind", p.kind},
          {"batch", p.batch},
          {"context", p.context},
          {"tokens_per_sequence", p.tokens},
          {"plan", plan},
          {"persistent", p.times.persistent},
          {"measured", p.times.measured},
          {"unmeasured_reason", p.times.why},
          {"ops", ops},
          {"floor_ms", floors},
          {"kernel_ms", p.times.kernel_ms},
          {"span_ms", p.times.span_ms},
          {"step_ms", p.step_ms},
          {"host_and_gaps_ms", p.step_ms - p.times.kernel_ms}};
}

void print(const ShapeProfile& p, double gbs, const MatmulRates& rates) {
  std::printf("\n== %s step: batch %d, context %d, %d new token%s per sequence\n", p.kind.c_str(),
              p.batch, p.context, p.tokens, p.tokens == 1 ? "" : "s");
  for (const auto& [k, v] : p.times.plan) std::printf("  %-10s %s\n", k.c_str(), v.c_str());
  if (!p.times.measured) std::printf("  (no per-op times: %s)\n", p.times.why.c_str());
  std::printf("\n  %-13s %5s %10s %10s %9s %10s %11s %6s  %s\n", "op", "calls", "read MB",
              "write MB", "GFLOP", "floor us", "measured us", "share", "what");
  double floors = 0;
  for (const Row& r : rows_of(p, gbs, rates)) {
    floors += r.floor;
    char ms[32] = "-", share[16] = "-";
    if (!std::isnan(r.ms)) {
      std::snprintf(ms, sizeof ms, "%.1f", r.ms * 1e3);
      std::snprintf(share, sizeof share, "%.1f%%", 100.0 * r.ms / p.step_ms);
    }
    std::printf("  %-13s %5d %10.2f %10.2f %9.3f %10.1f %11s %6s  %s\n", r.name.c_str(), r.calls,
                r.read / 1e6, r.written / 1e6, r.flops / 1e9, r.floor * 1e3, ms, share,
                r.what.c_str());
  }
  std::printf("\n  step %.3f ms (median of the bench's clock); sum of floors %.3f ms (%.0f%% of the "
              "step)\n",
              p.step_ms, floors, 100.0 * floors / p.step_ms);
  if (p.times.measured)
    std::printf("  kernels %.3f ms measured (%.1f%% of the step), device span %.3f ms; host and "
                "gaps %.3f ms\n",
                p.times.kernel_ms, 100.0 * p.times.kernel_ms / p.step_ms, p.times.span_ms,
                p.step_ms - p.times.kernel_ms);
}

// The host's read bandwidth (every thread summing its share of 256 MB, best
// of three): the CPU backend's memory floor.
double host_read_gbs() {
  std::vector<float> v(size_t(64) << 20, 1.0f);
  const long long n = static_cast<long long>(v.size());
  double best = 1e30, sum = 0;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for reduction(+ : sum)
    for (long long i = 0; i < n; ++i) sum += v[size_t(i)];
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  HAYATE_CHECK(sum > 0, "host read probe");
  return double(v.size() * sizeof(float)) / best / 1e9;
}

void run_profile(const ProfileArgs& a) {
  HAYATE_CHECK(a.batch >= 1, "--batch must be >= 1, got ", a.batch);
  HAYATE_CHECK(a.context >= 0, "--context must be >= 0, got ", a.context);
  HAYATE_CHECK(a.prompt_len >= 0, "--prompt-len must be >= 0, got ", a.prompt_len);
  HAYATE_CHECK(a.runs >= 1, "--runs must be >= 1, got ", a.runs);
  const std::string backend = resolve_backend(a.model);
  const std::string spec = resolve_model(a.model, backend);
  const Model model = load_model_args(spec, a.model);
  const ModelConfig& c = model.config;
  const int len = std::max(a.context + 1, a.prompt_len);
  HAYATE_CHECK(len <= c.max_position_embeddings, "profile: context ", a.context, " + 1",
               a.prompt_len > 0 ? cat(" (or prompt ", a.prompt_len, ")") : std::string(),
               " exceeds the model's max_position_embeddings ", c.max_position_embeddings);
  BatchBackendOptions bo;
  bo.max_model_len = len;
  const int per = (len + bo.block_size - 1) / bo.block_size;
  bo.num_blocks = (a.batch + (a.prompt_len > 0 ? 1 : 0)) * per;
  bo.max_num_seqs = a.batch;
  bo.max_num_batched_tokens = std::max({512, a.batch, a.prompt_len});
  bo.dtype = resolve_dtype(a.model, model.config);
  bo.kv_cache_dtype = resolve_kv_cache_dtype(a.model);
  bo.tensor_parallel_size = a.model.tensor_parallel_size;
  std::unique_ptr<BatchBackend> be = make_batch_backend(backend, model, bo);
  const double gbs = be->name() == "cuda" ? be->measure_read_bandwidth_gbs() : host_read_gbs();
  const MatmulRates rates = be->measure_matmul_rates();
  const DeviceInfo dev = be->device_info();
  std::printf("hayate profile: %s on %s (%s); read probe %.0f GB/s, matmul %.3g TFLOP/s",
              spec.c_str(), be->name().c_str(), dev.name.c_str(), gbs, rates.tflops);
  if (rates.fp8_tflops > 0) std::printf(" (FP8 %.3g)", rates.fp8_tflops);
  std::printf("\n");
  // Bytes per element: cuda keeps 16-bit weights and activations (e4m3 codes
  // for FP8 linears and pools), the cpu backend fp32 (FP8 weights dequantized).
  const bool cuda = be->name() == "cuda";
  StepDtypes dt = cuda ? StepDtypes{2, 2, 4} : StepDtypes{4, 4, 4};
  if (cuda && model.quant.fp8()) dt.linear = 1;
  if (cuda && bo.kv_cache_dtype == KvCacheDtype::kFp8) dt.kv = 1;
  std::vector<ShapeProfile> shapes;
  shapes.push_back(
      profile_shape(*be, dt, "decode", a.batch, a.context, 1, 0, a.runs, a.model.seed));
  if (a.prompt_len > 0)
    shapes.push_back(profile_shape(*be, dt, "prefill", 1, 0, a.prompt_len, a.batch * per,
                                   a.runs, a.model.seed + 1));
  for (const ShapeProfile& p : shapes) print(p, gbs, rates);
  if (!a.json.empty()) {
    nlohmann::json j = {{"schema", "hayate-profile/1"},
                        {"model", spec},
                        {"backend", be->name()},
                        {"dtype", a.model.dtype},
                        {"device", dev.name},
                        {"commit", bench::build_commit()},
                        {"read_gbs", gbs},
                        {"matmul_tflops", rates.tflops},
                        {"matmul_fp8_tflops", rates.fp8_tflops},
                        {"steps", nlohmann::json::array()}};
    for (const ShapeProfile& p : shapes) j["steps"].push_back(to_json(p, gbs, rates));
    std::ofstream f(a.json);
    HAYATE_CHECK(bool(f), "cannot write ", a.json);
    f << j.dump(2) << "\n";
    HAYATE_CHECK(bool(f), "cannot write ", a.json);
  }
}

}  // namespace

std::string profile_chart(const nlohmann::json& j) {
  HAYATE_CHECK(j.value("schema", "") == "hayate-profile/1", "not a hayate profile");
  std::string out = cat("hayate profile of ", j.value("model", "?"), " on ", j.value("backend", "?"),
                        " (", j.value("device", "?"), "), commit ", j.value("commit", "?"), "\n");
  for (const nlohmann::json& st : j.at("steps")) {
    out += cat("\n", st.value("kind", "?"), " step, batch ", st.value("batch", 0), ", context ",
               st.value("context", 0), ": step ", st.value("step_ms", 0.0), " ms, floors ",
               st.value("floor_ms", 0.0),
               " ms (per op: # measured within the floor, = measured beyond it, . floor not "
               "reached)\n");
    double top = 1e-9;
    for (const nlohmann::json& o : st.at("ops")) {
      top = std::max(top, o.value("floor_ms", 0.0));
      if (o["measured_ms"].is_number()) top = std::max(top, o["measured_ms"].get<double>());
    }
    constexpr int kWidth = 50;
    for (const nlohmann::json& o : st.at("ops")) {
      const double fl = o.value("floor_ms", 0.0);
      const bool has = o["measured_ms"].is_number();
      const double ms = has ? o["measured_ms"].get<double>() : 0.0;
      const int nf = int(kWidth * fl / top + 0.5), nm = int(kWidth * ms / top + 0.5);
      std::string bar(size_t(has ? std::min(nf, nm) : 0), '#');
      if (has && nm > nf) bar += std::string(size_t(nm - nf), '=');
      if (nf > (has ? nm : 0)) bar += std::string(size_t(nf - (has ? nm : 0)), '.');
      char line[160];
      std::snprintf(line, sizeof line, "  %-13s %9.1f us %9s  |%s\n",
                    o.value("name", "?").c_str(), fl * 1e3,
                    has ? cat(int(ms * 1e3 + 0.5), " us").c_str() : "-", bar.c_str());
      out += line;
    }
  }
  return out;
}

void add_profile_command(CLI::App& app) {
  auto a = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand(
      "profile", "One step's plan, per-op bytes, FLOPs, floors and measured times");
  add_model_options(cmd, a->model);
  cmd->add_option("--batch", a->batch, "Sequences in the decode step")->capture_default_str();
  cmd->add_option("--context", a->context, "Tokens already cached per sequence")
      ->capture_default_str();
  cmd->add_option("--prompt-len", a->prompt_len,
                  "Also profile one prefill chunk of this many tokens (0: none)")
      ->capture_default_str();
  cmd->add_option("--runs", a->runs, "Timed steps for the step time (median)")
      ->capture_default_str();
  cmd->add_option("--json", a->json, "Write the profile as JSON (docs/bench_schema.md)");
  cmd->callback([a] { run_profile(*a); });
}

}  // namespace hayate
