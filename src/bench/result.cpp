#include "bench/result.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/stats.h"
#include "core/check.h"

namespace hayate::bench {

using nlohmann::json;

Summary summarize(const BenchResult& r) {
  Summary s;
  std::vector<double> secs, decode, prefill, tps, new_tokens;
  for (const auto& run : r.runs) {
    if (!run.ok()) continue;
    secs.push_back(run.seconds);
    tps.push_back(run.tokens_per_s());
    new_tokens.push_back(run.new_tokens);
    if (run.decode_ms_per_token) decode.push_back(*run.decode_ms_per_token);
    if (run.prefill_ms) prefill.push_back(*run.prefill_ms);
  }
  s.runs_ok = int(secs.size());
  if (secs.empty()) return s;
  s.mean_s = mean_from_run(secs, r.workload.summary_from_run);
  s.median_s = median(secs);
  s.min_s = min_of(secs);
  s.max_s = max_of(secs);
  s.first_s = secs.front();
  s.mean_all_s = mean(secs);
  s.max_over_median_after_first = max_over_median_after_first(secs);
  s.tokens_per_s = median(tps);
  if (!decode.empty()) s.decode_ms_per_token = median(decode);
  if (!prefill.empty()) s.prefill_ms = median(prefill);

  // Bandwidth: each decode step streams every weight once, so bytes per token
  // over the time per token is the achieved weight-streaming rate.
  const auto& bytes = r.model.weight_bytes_per_token;
  if (bytes && *bytes > 0.0 && s.decode_ms_per_token && *s.decode_ms_per_token > 0.0)
    s.achieved_gbs = *bytes / (*s.decode_ms_per_token * 1e-3) / 1e9;
  const auto& bw = r.startup.read_bandwidth_gbs;
  if (bytes && *bytes > 0.0 && bw && *bw > 0.0) {
    s.floor_ms_per_token = *bytes / (*bw * 1e9) * 1e3;
    s.floor_request_s = *s.floor_ms_per_token * 1e-3 * median(new_tokens);
    if (s.achieved_gbs) s.bandwidth_share = *s.achieved_gbs / *bw;
  }
  return s;
}

// ---- writing ---------------------------------------------------------------

template <typename T>
static json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json null_if_empty(const std::string& s) {
  return s.empty() ? json(nullptr) : json(s);
}

json system_json(const SystemInfo& s) {
  return json{{"device", s.device},
              {"driver", null_if_empty(s.driver)},
              {"cuda", null_if_empty(s.cuda)},
              {"sm_count", s.sm_count},
              {"memory_gb", s.memory_gb},
              {"host", null_if_empty(s.host)},
              {"torch", null_if_empty(s.torch)},
              {"transformers", null_if_empty(s.transformers)},
              {"python", null_if_empty(s.python)}};
}

json model_json(const ModelInfo& m) {
  return json{{"spec", m.spec},
              {"dtype", m.dtype},
              {"quantization", m.quantization},
              {"kv_cache_dtype", m.kv_cache_dtype},
              {"seed", m.seed},
              {"weight_bytes_per_token", opt(m.weight_bytes_per_token)}};
}

json to_json(const BenchResult& r) {
  json runs = json::array();
  for (const auto& run : r.runs) {
    json o = {{"run", run.run},
              {"prompt_index", run.prompt_index},
              {"prompt_tokens", run.prompt_tokens},
              {"new_tokens", run.new_tokens},
              {"seconds", run.ok() ? json(run.seconds) : json(nullptr)},
              {"tokens_per_s", run.ok() ? json(run.tokens_per_s()) : json(nullptr)},
              {"prefill_ms", opt(run.prefill_ms)},
              {"decode_ms_per_token", opt(run.decode_ms_per_token)},
              {"tokenize_ms", opt(run.tokenize_ms)},
              {"finish", null_if_empty(run.finish)},
              {"output_ids", run.output_ids},
              {"error", null_if_empty(run.error)}};
    runs.push_back(std::move(o));
  }
  const Summary& s = r.summary;
  return json{{"schema", kSchemaName},
              {"schema_version", r.schema_version},
              {"engine", r.engine},
              {"engine_version", null_if_empty(r.engine_version)},
              {"backend", null_if_empty(r.backend)},
              {"commit", null_if_empty(r.commit)},
              {"created_utc", null_if_empty(r.created_utc)},
              {"system", system_json(r.system)},
              {"model", model_json(r.model)},
              {"workload",
               {{"trial", r.workload.trial},
                {"source", null_if_empty(r.workload.source)},
                {"prompts", r.workload.prompts},
                {"chat_template", r.workload.chat_template},
                {"max_length", opt(r.workload.max_length)},
                {"max_new_tokens", opt(r.workload.max_new_tokens)},
                {"ignore_eos", r.workload.ignore_eos},
                {"warmup", r.workload.warmup},
                {"runs", r.workload.runs},
                {"summary_from_run", r.workload.summary_from_run},
                {"timer", null_if_empty(r.workload.timer)},
                {"timed_region", null_if_empty(r.workload.timed_region)}}},
              {"startup",
               {{"tokenizer_s", opt(r.startup.tokenizer_s)},
                {"load_s", opt(r.startup.load_s)},
                {"read_bandwidth_gbs", opt(r.startup.read_bandwidth_gbs)},
                {"first_token_s", opt(r.startup.first_token_s)},
                {"first_request_done_s", opt(r.startup.first_request_done_s)}}},
              {"runs", std::move(runs)},
              {"summary",
               {{"runs_ok", s.runs_ok},
                {"mean_s", opt(s.mean_s)},
                {"median_s", opt(s.median_s)},
                {"min_s", opt(s.min_s)},
                {"max_s", opt(s.max_s)},
                {"first_s", opt(s.first_s)},
                {"mean_all_s", opt(s.mean_all_s)},
                {"max_over_median_after_first", opt(s.max_over_median_after_first)},
                {"decode_ms_per_token", opt(s.decode_ms_per_token)},
                {"prefill_ms", opt(s.prefill_ms)},
                {"tokens_per_s", opt(s.tokens_per_s)},
                {"achieved_gbs", opt(s.achieved_gbs)},
                {"bandwidth_share", opt(s.bandwidth_share)},
                {"floor_ms_per_token", opt(s.floor_ms_per_token)},
                {"floor_request_s", opt(s.floor_request_s)}}},
              {"notes", r.notes}};
}

// ---- reading ---------------------------------------------------------------

namespace {

// Field access with errors that name the file and the field.
struct Reader {
  const std::string& source;

  const json& object(const json& o, const char* key) const {
    HAYATE_CHECK(o.contains(key) && o[key].is_object(), source, ": field '", key,
                 "' must be an object");
    return o[key];
  }
  std::string str(const json& o, const char* key, bool required = false) const {
    if (!o.contains(key) || o[key].is_null()) {
      HAYATE_CHECK(!required, source, ": missing field '", key, "'");
      return {};
    }
    HAYATE_CHECK(o[key].is_string(), source, ": field '", key, "' must be a string");
    return o[key].get<std::string>();
  }
  std::optional<double> num(const json& o, const char* key) const {
    if (!o.contains(key) || o[key].is_null()) return std::nullopt;
    HAYATE_CHECK(o[key].is_number(), source, ": field '", key, "' must be a number");
    double v = o[key].get<double>();
    HAYATE_CHECK(std::isfinite(v), source, ": field '", key, "' is not finite");
    return v;
  }
  template <typename T>
  T integer(const json& o, const char* key, T fallback) const {
    if (!o.contains(key) || o[key].is_null()) return fallback;
    HAYATE_CHECK(o[key].is_number_integer(), source, ": field '", key, "' must be an integer");
    return o[key].get<T>();
  }
  bool boolean(const json& o, const char* key, bool fallback) const {
    if (!o.contains(key) || o[key].is_null()) return fallback;
    HAYATE_CHECK(o[key].is_boolean(), source, ": field '", key, "' must be true or false");
    return o[key].get<bool>();
  }
};

}  // namespace

BenchResult result_from_json(const json& j, const std::string& source) {
  Reader rd{source};
  HAYATE_CHECK(j.is_object(), source, ": not a JSON object");
  HAYATE_CHECK(rd.str(j, "schema") == kSchemaName, source, ": not a ", kSchemaName,
               " result (field 'schema' is '", rd.str(j, "schema"), "')");
  BenchResult r;
  r.schema_version = rd.integer<int>(j, "schema_version", 0);
  HAYATE_CHECK(r.schema_version == kSchemaVersion, source, ": schema_version ", r.schema_version,
               " is not supported (this hayate reads version ", kSchemaVersion, ")");
  r.engine = rd.str(j, "engine", true);
  r.engine_version = rd.str(j, "engine_version");
  r.backend = rd.str(j, "backend");
  r.commit = rd.str(j, "commit");
  r.created_utc = rd.str(j, "created_utc");

  const json& sys = rd.object(j, "system");
  r.system.device = rd.str(sys, "device");
  r.system.driver = rd.str(sys, "driver");
  r.system.cuda = rd.str(sys, "cuda");
  r.system.sm_count = rd.integer<int>(sys, "sm_count", 0);
  r.system.memory_gb = rd.num(sys, "memory_gb").value_or(0.0);
  r.system.host = rd.str(sys, "host");
  r.system.torch = rd.str(sys, "torch");
  r.system.transformers = rd.str(sys, "transformers");
  r.system.python = rd.str(sys, "python");

  const json& model = rd.object(j, "model");
  r.model.spec = rd.str(model, "spec", true);
  r.model.dtype = rd.str(model, "dtype", true);
  r.model.quantization = rd.str(model, "quantization");
  if (r.model.quantization.empty()) r.model.quantization = "none";  // results before FP8
  r.model.kv_cache_dtype = rd.str(model, "kv_cache_dtype");
  if (r.model.kv_cache_dtype.empty()) r.model.kv_cache_dtype = "auto";
  r.model.seed = rd.integer<uint64_t>(model, "seed", 0);
  r.model.weight_bytes_per_token = rd.num(model, "weight_bytes_per_token");

  const json& wl = rd.object(j, "workload");
  r.workload.trial = rd.str(wl, "trial", true);
  r.workload.source = rd.str(wl, "source");
  if (wl.contains("prompts")) {
    HAYATE_CHECK(wl["prompts"].is_array(), source, ": field 'prompts' must be an array");
    for (const auto& p : wl["prompts"]) {
      HAYATE_CHECK(p.is_string(), source, ": every prompt must be a string");
      r.workload.prompts.push_back(p.get<std::string>());
    }
  }
  r.workload.chat_template = rd.boolean(wl, "chat_template", false);
  if (auto v = rd.num(wl, "max_length")) r.workload.max_length = int(*v);
  if (auto v = rd.num(wl, "max_new_tokens")) r.workload.max_new_tokens = int(*v);
  r.workload.ignore_eos = rd.boolean(wl, "ignore_eos", true);
  r.workload.warmup = rd.integer<int>(wl, "warmup", 0);
  r.workload.runs = rd.integer<int>(wl, "runs", 0);
  r.workload.summary_from_run = rd.integer<int>(wl, "summary_from_run", 3);
  HAYATE_CHECK(r.workload.summary_from_run >= 1, source, ": summary_from_run must be at least 1");
  r.workload.timer = rd.str(wl, "timer");
  r.workload.timed_region = rd.str(wl, "timed_region");

  if (j.contains("startup") && !j["startup"].is_null()) {
    const json& st = rd.object(j, "startup");
    r.startup.tokenizer_s = rd.num(st, "tokenizer_s");
    r.startup.load_s = rd.num(st, "load_s");
    r.startup.read_bandwidth_gbs = rd.num(st, "read_bandwidth_gbs");
    r.startup.first_token_s = rd.num(st, "first_token_s");
    r.startup.first_request_done_s = rd.num(st, "first_request_done_s");
  }

  HAYATE_CHECK(j.contains("runs") && j["runs"].is_array(), source,
               ": field 'runs' must be an array");
  for (const auto& o : j["runs"]) {
    HAYATE_CHECK(o.is_object(), source, ": every run must be an object");
    RunRecord run;
    run.run = rd.integer<int>(o, "run", int(r.runs.size()) + 1);
    run.prompt_index = rd.integer<int>(o, "prompt_index", 0);
    run.prompt_tokens = rd.integer<int>(o, "prompt_tokens", 0);
    run.new_tokens = rd.integer<int>(o, "new_tokens", 0);
    run.error = rd.str(o, "error");
    auto secs = rd.num(o, "seconds");
    HAYATE_CHECK(secs || !run.ok(), source, ": run ", run.run, " has neither seconds nor error");
    run.seconds = secs.value_or(0.0);
    HAYATE_CHECK(run.seconds >= 0.0, source, ": run ", run.run, " has negative seconds");
    run.prefill_ms = rd.num(o, "prefill_ms");
    run.decode_ms_per_token = rd.num(o, "decode_ms_per_token");
    run.tokenize_ms = rd.num(o, "tokenize_ms");
    run.finish = rd.str(o, "finish");
    if (o.contains("output_ids") && !o["output_ids"].is_null()) {
      HAYATE_CHECK(o["output_ids"].is_array(), source, ": output_ids must be an array");
      for (const auto& id : o["output_ids"]) {
        HAYATE_CHECK(id.is_number_integer(), source, ": output_ids must hold integers");
        run.output_ids.push_back(id.get<int32_t>());
      }
    }
    r.runs.push_back(std::move(run));
  }
  if (j.contains("notes") && j["notes"].is_array())
    for (const auto& n : j["notes"])
      if (n.is_string()) r.notes.push_back(n.get<std::string>());
  r.summary = summarize(r);
  return r;
}

BenchResult read_result_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  HAYATE_CHECK(in, path, ": cannot read");
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  HAYATE_CHECK(!j.is_discarded(), path, ": not valid JSON");
  return result_from_json(j, path);
}

void write_result_file(const BenchResult& r, const std::string& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  HAYATE_CHECK(out, "--json: cannot write '", path, "'");
  // replace: a prompt file with invalid UTF-8 must not abort the write.
  out << to_json(r).dump(2, ' ', false, json::error_handler_t::replace) << "\n";
  out.flush();
  HAYATE_CHECK(out.good(), "--json: writing '", path, "' failed");
}

std::string utc_now_iso8601() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string engine_label(const std::string& engine, const ModelInfo& m) {
  std::string out = engine;
  if (m.quantization == "fp8") out += " fp8";
  if (m.kv_cache_dtype == "fp8") out += " kv8";
  return out;
}

}  // namespace hayate::bench
