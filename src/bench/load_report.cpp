#include "bench/load_report.h"

#include <optional>

#include "bench/serve_client.h"
#include "bench/table.h"
#include "bench/throughput.h"
#include "core/check.h"

namespace hayate::bench {

using nlohmann::json;

namespace {

std::optional<double> number_at(const json& j, std::initializer_list<const char*> path) {
  const json* p = &j;
  for (const char* k : path) {
    if (!p->is_object() || !p->contains(k)) return std::nullopt;
    p = &(*p)[k];
  }
  if (!p->is_number()) return std::nullopt;
  return p->get<double>();
}

std::string text_at(const json& j, const char* k) {
  return j.contains(k) && j[k].is_string() ? j[k].get<std::string>() : "-";
}

}  // namespace

std::string schema_of(const json& j) {
  return j.is_object() && j.contains("schema") && j["schema"].is_string()
             ? j["schema"].get<std::string>()
             : "";
}

bool is_load_result(const json& j) {
  const std::string s = schema_of(j);
  return s == kThroughputSchemaName || s == kServeSchemaName;
}

std::string load_comparison(const std::vector<json>& results,
                            const std::vector<std::string>& sources, bool markdown) {
  Table t;
  t.add_column("result", Table::Align::kLeft);
  t.add_column("engine", Table::Align::kLeft);
  t.add_column("mode", Table::Align::kLeft);
  t.add_column("prompts");
  t.add_column("in/out");
  t.add_column("concurrency");
  t.add_column("req/s");
  t.add_column("out tok/s");
  t.add_column("total tok/s");
  t.add_column("TTFT p50 ms");
  t.add_column("TTFT p99 ms");
  t.add_column("TPOT p50 ms");
  t.add_column("TPOT p99 ms");
  for (size_t i = 0; i < results.size(); ++i) {
    const json& j = results[i];
    const std::string& src = sources[i];
    HAYATE_CHECK(is_load_result(j), src, ": not a throughput or serve result");
    const bool serve = schema_of(j) == kServeSchemaName;
    auto need = [&](std::initializer_list<const char*> path, const char* name) {
      std::optional<double> v = number_at(j, path);
      HAYATE_CHECK(v.has_value(), src, ": no ", name);
      return *v;
    };
    const json& w = j.value("workload", json::object());
    const double prompts = need({"workload", "num_prompts"}, "workload.num_prompts");
    std::optional<double> in = number_at(j, {"workload", "input_len"});
    const double out = need({"workload", "output_len"}, "workload.output_len");
    std::optional<double> conc = number_at(j, {"workload", serve ? "max_concurrency" : "concurrency"});
    // Throughput results keep TTFT in seconds and percentiles as p50/p99;
    // serve results in ms as median/p99 (vllm bench serve's names).
    const double ttft_scale = serve ? 1.0 : 1000.0;
    const char* ttft_key = serve ? "ttft_ms" : "ttft_s";
    const char* median = serve ? "median" : "p50";
    auto scaled = [](std::optional<double> v, double s) {
      return v ? std::optional<double>(*v * s) : std::nullopt;
    };
    ModelInfo m;  // the FP8 fields of a hayate result (serve results have none)
    if (const json* mj = j.contains("model") && j["model"].is_object() ? &j["model"] : nullptr) {
      m.quantization = mj->value("quantization", "none");
      m.kv_cache_dtype = mj->value("kv_cache_dtype", "auto");
    }
    t.add_row({src, engine_label(text_at(j, "engine"), m), serve ? "serve" : "throughput",
               fmt(prompts, 0),
               fmt(in, 0) + "/" + fmt(out, 0), conc && *conc > 0 ? fmt(conc, 0) : "all",
               fmt(need({"summary", serve ? "request_throughput" : "requests_per_s"}, "req/s"), 2),
               fmt(need({"summary", serve ? "output_throughput" : "output_tokens_per_s"},
                        "output tok/s"),
                   1),
               fmt(need({"summary", serve ? "total_token_throughput" : "total_tokens_per_s"},
                        "total tok/s"),
                   1),
               fmt(scaled(number_at(j, {"summary", ttft_key, median}), ttft_scale), 1),
               fmt(scaled(number_at(j, {"summary", ttft_key, "p99"}), ttft_scale), 1),
               fmt(number_at(j, {"summary", "tpot_ms", median}), 2),
               fmt(number_at(j, {"summary", "tpot_ms", "p99"}), 2)});
    (void)w;
  }
  return markdown ? t.markdown() : t.text();
}

}  // namespace hayate::bench
