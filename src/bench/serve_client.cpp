#include "bench/serve_client.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <ostream>
#include <random>
#include <sstream>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "bench/result.h"
#include "bench/stats.h"
#include "core/check.h"

namespace hayate::bench {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double>(t - t0).count();
}

// "http://host:port/v1" -> {"http://host:port", "/v1"}.
std::pair<std::string, std::string> split_endpoint(const std::string& endpoint) {
  size_t scheme = endpoint.find("://");
  HAYATE_CHECK(scheme != std::string::npos && (endpoint.rfind("http://", 0) == 0 ||
                                               endpoint.rfind("https://", 0) == 0),
               "--endpoint must start with http:// or https://, got '", endpoint, "'");
  size_t path = endpoint.find('/', scheme + 3);
  std::string origin = endpoint.substr(0, path);
  std::string prefix = path == std::string::npos ? "" : endpoint.substr(path);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  HAYATE_CHECK(origin.size() > scheme + 3, "--endpoint has no host: '", endpoint, "'");
  return {origin, prefix};
}

// Common English words, one Llama 3 token each with a leading space, for
// prompts that look like text to servers that take only strings.
constexpr const char* kWords[] = {
    "the", "of", "and", "to", "in", "is", "was", "for", "on", "that", "with", "as", "by", "at",
    "from", "his", "her", "they", "it", "an", "are", "this", "which", "be", "or", "had", "not",
    "have", "one", "but", "were", "their", "first", "new", "after", "who", "also", "been", "two",
    "time", "year", "city", "world", "school", "state", "house", "water", "light", "music",
    "river", "game", "team", "night", "story", "people", "family", "history", "book", "film",
    "road", "song", "king", "war", "land", "sea", "day", "life", "work", "part", "place", "name",
    "group", "power", "line", "church", "party", "island", "village", "army", "club", "station",
    "county", "album", "season", "series", "league", "village", "north", "south", "east", "west"};

// `len` random ids (a list) or words (a string) after `prefix` (of the same kind).
json make_prompt(const ServeBenchOptions& o, int len, std::mt19937_64& rng,
                 const json& prefix = nullptr) {
  if (o.prompt_kind == "ids") {
    std::uniform_int_distribution<int> id(o.id_low, o.id_high - 1);
    json ids = prefix.is_array() ? prefix : json::array();
    for (int i = 0; i < len; ++i) ids.push_back(id(rng));
    return ids;
  }
  std::uniform_int_distribution<size_t> w(0, std::size(kWords) - 1);
  std::string text = prefix.is_string() ? prefix.get<std::string>() : "";
  for (int i = 0; i < len; ++i) {
    if (!text.empty()) text += ' ';
    text += kWords[w(rng)];
  }
  return text;
}

std::unique_ptr<httplib::Client> make_client(const std::string& origin, const ServeBenchOptions& o) {
  auto cli = std::make_unique<httplib::Client>(origin);
  cli->set_connection_timeout(30, 0);
  cli->set_read_timeout(time_t(o.request_timeout_s), 0);
  cli->set_write_timeout(30, 0);
  cli->set_tcp_nodelay(true);
  if (!o.api_key.empty()) cli->set_bearer_token_auth(o.api_key);
  return cli;
}

std::string lookup_model(const std::string& origin, const std::string& prefix,
                         const ServeBenchOptions& o) {
  auto cli = make_client(origin, o);
  auto res = cli->Get(prefix + "/models");
  HAYATE_CHECK(res, "bench serve: GET ", o.endpoint, "/models failed: ",
               httplib::to_string(res.error()));
  HAYATE_CHECK(res->status == 200, "bench serve: GET ", o.endpoint, "/models answered ",
               res->status, ": ", res->body.substr(0, 200));
  json j = json::parse(res->body, nullptr, false);
  HAYATE_CHECK(j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
                   j["data"][0].contains("id") && j["data"][0]["id"].is_string(),
               "bench serve: ", o.endpoint, "/models lists no model");
  return j["data"][0]["id"].get<std::string>();
}

// One streaming request, timed as vLLM's async_request_openai_completions.
ServeRequestRecord run_one(const std::string& origin, const std::string& path,
                           const std::string& body, const ServeBenchOptions& o,
                           Clock::time_point bench_start) {
  ServeRequestRecord r;
  auto cli = make_client(origin, o);
  int status = 0;
  std::string buffer;   // SSE bytes not yet split into events
  std::string error_body;
  bool done = false;
  int chunks = 0;
  Clock::time_point last;
  const Clock::time_point sent = Clock::now();
  r.send_s = since(bench_start, sent);

  auto on_event = [&](std::string_view data) {
    if (data == "[DONE]") {
      done = true;
      return;
    }
    json j = json::parse(data, nullptr, false);
    if (!j.is_object()) {
      r.error = cat("unparsable event: ", std::string(data.substr(0, 120)));
      return;
    }
    if (j.contains("error")) {
      r.error = cat("error event: ", j["error"].dump().substr(0, 200));
      return;
    }
    if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
      const Clock::time_point now = Clock::now();
      const json& c = j["choices"][0];
      if (c.is_object() && c.contains("text") && c["text"].is_string())
        r.text += c["text"].get_ref<const std::string&>();
      if (c.is_object() && c.contains("token_ids") && c["token_ids"].is_array())
        for (const json& id : c["token_ids"])
          if (id.is_number_integer()) r.token_ids.push_back(id.get<int32_t>());
      if (!r.ttft_s)
        r.ttft_s = std::chrono::duration<double>(now - sent).count();
      else
        r.itl_s.push_back(std::chrono::duration<double>(now - last).count());
      last = now;
      ++chunks;
    }
    if (j.contains("usage") && j["usage"].is_object()) {
      const json& u = j["usage"];
      if (u.contains("completion_tokens") && u["completion_tokens"].is_number_integer())
        r.output_tokens = u["completion_tokens"].get<int>();
      if (u.contains("prompt_tokens") && u["prompt_tokens"].is_number_integer())
        r.prompt_tokens = u["prompt_tokens"].get<int>();
      if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object()) {
        const json& d = u["prompt_tokens_details"];
        if (d.contains("cached_tokens") && d["cached_tokens"].is_number_integer())
          r.cached_tokens = d["cached_tokens"].get<int>();
      }
    }
  };

  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = {{"Accept", "text/event-stream"}};
  req.body = body;
  req.set_header("Content-Type", "application/json");
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status != 200) {
      error_body.append(data, std::min<size_t>(n, 400 - std::min<size_t>(400, error_body.size())));
      return true;
    }
    buffer.append(data, n);
    // Events end with a blank line; lines may end with \r\n.
    for (;;) {
      size_t end = buffer.find("\n\n");
      size_t skip = 2;
      size_t crlf = buffer.find("\r\n\r\n");
      if (crlf != std::string::npos && (end == std::string::npos || crlf < end)) {
        end = crlf;
        skip = 4;
      }
      if (end == std::string::npos) break;
      std::string event = buffer.substr(0, end);
      buffer.erase(0, end + skip);
      std::istringstream lines(event);
      std::string line;
      while (std::getline(lines, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.rfind("data:", 0) != 0) continue;  // comments, event names
        std::string_view v(line);
        v.remove_prefix(5);
        if (!v.empty() && v.front() == ' ') v.remove_prefix(1);
        on_event(v);
      }
    }
    return r.error.empty();
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  bool sent_ok = cli->send(req, res, err);
  if (r.error.empty()) {
    if (!sent_ok && status == 0)
      r.error = cat("transport: ", httplib::to_string(err));
    else if (status != 200)
      r.error = cat("HTTP ", status, ": ", error_body);
    else if (!done)
      r.error = "stream ended without [DONE]";
    else if (!r.ttft_s)
      r.error = "no chunk carried choices";
  }
  if (!r.ok()) return r;
  r.latency_s = std::chrono::duration<double>(last - sent).count();
  if (r.output_tokens == 0) r.output_tokens = chunks;  // server sent no usage
  if (r.output_tokens > 1) r.tpot_s = (r.latency_s - *r.ttft_s) / (r.output_tokens - 1);
  return r;
}

LatencyStats stats_ms(std::vector<double> v) {
  for (double& x : v) x *= 1000.0;
  LatencyStats s;
  s.mean = mean(v);
  s.median = median(v);
  s.p99 = percentile(v, 99.0);
  double var = 0.0;
  for (double x : v) var += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(var / double(v.size()));  // numpy's std (population)
  return s;
}

}  // namespace

ServeBenchSummary summarize_serve(const std::vector<ServeRequestRecord>& requests,
                                  double duration_s) {
  ServeBenchSummary s;
  s.duration_s = duration_s;
  std::vector<double> ttft, tpot, itl, e2el;
  std::vector<std::vector<double>> ttft_turn;
  for (const ServeRequestRecord& r : requests) {
    if (!r.ok()) {
      ++s.failed;
      continue;
    }
    ++s.completed;
    s.input_tokens += r.prompt_tokens;
    s.output_tokens += r.output_tokens;
    s.cached_tokens += r.cached_tokens;
    if (r.ttft_s) {
      ttft.push_back(*r.ttft_s);
      if (ttft_turn.size() <= size_t(r.turn)) ttft_turn.resize(size_t(r.turn) + 1);
      ttft_turn[size_t(r.turn)].push_back(*r.ttft_s);
    }
    if (r.tpot_s) tpot.push_back(*r.tpot_s);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    e2el.push_back(r.latency_s);
  }
  if (duration_s > 0.0) {
    s.request_throughput = s.completed / duration_s;
    s.output_throughput = double(s.output_tokens) / duration_s;
    s.total_token_throughput = double(s.input_tokens + s.output_tokens) / duration_s;
  }
  if (s.input_tokens > 0)
    s.prefix_cache_hit_rate = double(s.cached_tokens) / double(s.input_tokens);
  if (!ttft.empty()) s.ttft_ms = stats_ms(ttft);
  if (!tpot.empty()) s.tpot_ms = stats_ms(tpot);
  if (ttft_turn.size() > 1)
    for (const std::vector<double>& v : ttft_turn)
      s.ttft_ms_by_turn.push_back(v.empty() ? LatencyStats{} : stats_ms(v));
  if (!itl.empty()) s.itl_ms = stats_ms(itl);
  if (!e2el.empty()) s.e2el_ms = stats_ms(e2el);
  return s;
}

ServeBenchResult run_serve_bench(const ServeBenchOptions& o, std::ostream* progress) {
  HAYATE_CHECK(o.num_prompts >= 1, "--num-prompts must be >= 1");
  HAYATE_CHECK(o.input_len >= 1, "--input-len must be >= 1");
  HAYATE_CHECK(o.prefix_len >= 0, "--prefix-len must be >= 0");
  HAYATE_CHECK(o.output_len >= 1, "--output-len must be >= 1");
  HAYATE_CHECK(o.turns >= 1, "--turns must be >= 1, got ", o.turns);
  HAYATE_CHECK(o.request_rate > 0.0, "--request-rate must be > 0 (or inf)");
  HAYATE_CHECK(o.max_concurrency >= 0, "--max-concurrency must be >= 0");
  HAYATE_CHECK(o.prompt_kind == "ids" || o.prompt_kind == "words",
               "--prompt-kind must be ids or words, got '", o.prompt_kind, "'");
  HAYATE_CHECK(0 <= o.id_low && o.id_low < o.id_high, "random id range [", o.id_low, ", ",
               o.id_high, ") is empty");
  HAYATE_CHECK(o.request_timeout_s >= 1.0, "request timeout must be >= 1 s");
  // Named strings, not a structured binding: the request threads' lambdas
  // capture them (clang with OpenMP refuses captured bindings).
  const std::pair<std::string, std::string> where = split_endpoint(o.endpoint);
  const std::string& origin = where.first;
  const std::string& prefix = where.second;

  ServeBenchResult result;
  result.options = o;
  result.created_utc = utc_now_iso8601();
  result.server_model = o.model.empty() ? lookup_model(origin, prefix, o) : o.model;

  // Prompts and arrival gaps come from one seeded stream, drawn up front, so a
  // rerun sends the same requests at the same offsets.
  std::mt19937_64 rng(o.seed);
  // The shared prefix from a stream of its own: the requests' own parts are
  // those of the same seed without one.
  std::mt19937_64 prefix_rng(o.seed ^ 0x5052454649580000ull);
  const json shared =
      o.prefix_len > 0 ? make_prompt(o, o.prefix_len, prefix_rng) : json(nullptr);
  // Requests (chats: their first turns) and their arrivals.
  std::vector<json> first;
  std::vector<double> arrival_s;
  double t = 0.0;
  std::exponential_distribution<double> gap(std::isinf(o.request_rate) ? 1.0 : o.request_rate);
  for (int i = 0; i < o.num_prompts; ++i) {
    first.push_back(make_prompt(o, o.input_len, rng, shared));
    arrival_s.push_back(t);
    if (!std::isinf(o.request_rate)) t += gap(rng);
  }
  const int turns = o.turns;
  // Chats of ids resend the answer's ids: ask the server for them.
  const bool want_ids = turns > 1 && o.prompt_kind == "ids";
  auto body_of = [&](const json& prompt) {
    json b = {{"model", result.server_model},
              {"prompt", prompt},
              {"max_tokens", o.output_len},
              {"temperature", 0.0},
              {"ignore_eos", true},
              {"stream", true},
              {"stream_options", {{"include_usage", true}}}};
    if (want_ids) b["return_token_ids"] = true;
    return b.dump();
  };

  const int total = o.num_prompts * turns;
  result.requests.resize(size_t(total));
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  int finished = 0;
  int max_seen = 0;
  const std::string path = prefix + "/completions";
  std::vector<std::thread> threads;
  threads.reserve(first.size());
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < o.num_prompts; ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(arrival_s[size_t(i)])));
    {
      // A request that arrives while max_concurrency are in flight waits for
      // a slot (vLLM's semaphore); its clock starts when it is sent.
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return o.max_concurrency == 0 || in_flight < o.max_concurrency; });
      ++in_flight;
      max_seen = std::max(max_seen, in_flight);
    }
    threads.emplace_back([&, i] {
      // A chat's later turns draw their own words from a stream of the chat's.
      std::mt19937_64 own(o.seed ^ (0x4348415400000000ull + uint64_t(i)));
      json prompt = first[size_t(i)];
      bool failed = false;
      for (int turn = 0; turn < turns; ++turn) {
        ServeRequestRecord rec;
        if (failed) {
          rec.error = "not sent: an earlier turn of its chat failed";
        } else {
          try {
            rec = run_one(origin, path, body_of(prompt), o, start);
          } catch (const std::exception& e) {
            rec.error = cat("client: ", e.what());
          }
          if (rec.ok() && want_ids && int(rec.token_ids.size()) != rec.output_tokens)
            rec.error = cat("the server returned ", rec.token_ids.size(), " token_ids for ",
                            rec.output_tokens, " tokens (vLLM's return_token_ids): chats against it "
                            "need --prompt-kind words");
          failed = !rec.ok();
        }
        rec.index = i * turns + turn;
        rec.turn = turn;
        rec.arrival_s = turn == 0 ? arrival_s[size_t(i)] : rec.send_s;
        if (turn + 1 < turns && !failed) {  // the conversation so far, then new ids or words
          json so_far = prompt;
          if (want_ids)
            for (int32_t id : rec.token_ids) so_far.push_back(id);
          else
            so_far = so_far.get<std::string>() + rec.text;
          prompt = make_prompt(o, o.input_len, own, so_far);
        }
        std::lock_guard lock(mu);
        result.requests[size_t(rec.index)] = std::move(rec);
        ++finished;
        if (progress && (finished % std::max(1, total / 10) == 0 || finished == total))
          *progress << "bench serve: " << finished << "/" << total << " done\n" << std::flush;
      }
      std::lock_guard lock(mu);
      --in_flight;
      cv.notify_all();
    });
  }
  for (std::thread& th : threads) th.join();
  const double duration = since(start, Clock::now());

  result.summary = summarize_serve(result.requests, duration);
  result.summary.max_concurrent = max_seen;
  if (result.summary.failed > 0) {
    std::string first;
    for (const auto& r : result.requests)
      if (!r.ok()) {
        first = r.error;
        break;
      }
    result.notes.push_back(cat(result.summary.failed, " requests failed; first: ", first));
  }
  if (o.prefix_len > 0)
    result.notes.push_back(cat("prompts: a shared prefix of ", o.prefix_len, " ", o.prompt_kind,
                               ", then each its own"));
  if (turns > 1)
    result.notes.push_back(cat(o.num_prompts, " chats of ", turns,
                               " turns: each turn sends the previous prompt, its answer (",
                               want_ids ? "the ids the server returned" : "its text",
                               ") and ", o.input_len, " new ", o.prompt_kind));
  if (o.prompt_kind == "ids")
    result.notes.push_back(cat("prompts: ", o.input_len, " random token ids in [", o.id_low, ", ",
                               o.id_high, ") each"));
  else
    result.notes.push_back(cat("prompts: ", o.input_len,
                               " random common English words each (the server's tokenizer "
                               "decides the token count)"));
  return result;
}

namespace {

json stats_json(const std::optional<LatencyStats>& s) {
  if (!s) return nullptr;
  return {{"mean", s->mean}, {"median", s->median}, {"p99", s->p99}, {"std", s->std}};
}

}  // namespace

json to_json(const ServeBenchResult& r) {
  const ServeBenchOptions& o = r.options;
  const ServeBenchSummary& s = r.summary;
  json requests = json::array();
  for (const ServeRequestRecord& q : r.requests) {
    json itl = json::array();
    for (double x : q.itl_s) itl.push_back(x * 1000.0);
    requests.push_back({{"index", q.index},
                        {"turn", q.turn},
                        {"prompt_tokens", q.prompt_tokens},
                        {"output_tokens", q.output_tokens},
                        {"cached_tokens", q.cached_tokens},
                        {"arrival_s", q.arrival_s},
                        {"send_s", q.send_s},
                        {"latency_s", q.ok() ? json(q.latency_s) : json(nullptr)},
                        {"ttft_s", q.ttft_s ? json(*q.ttft_s) : json(nullptr)},
                        {"tpot_ms", q.tpot_s ? json(*q.tpot_s * 1000.0) : json(nullptr)},
                        {"itl_ms", std::move(itl)},
                        {"error", null_if_empty(q.error)}});
  }
  return json{
      {"schema", kServeSchemaName},
      {"schema_version", r.schema_version},
      {"mode", "serve"},
      {"engine", null_if_empty(o.label)},  // the server measured, as the user named it
      {"client", "hayate"},
      {"engine_version", null_if_empty(r.engine_version)},
      {"commit", null_if_empty(r.commit)},
      {"created_utc", null_if_empty(r.created_utc)},
      {"endpoint", o.endpoint},
      {"server_model", r.server_model},
      {"workload",
       {{"num_prompts", o.num_prompts},
        {"input_len", o.input_len},
        {"prefix_len", o.prefix_len},
        {"output_len", o.output_len},
        {"turns", o.turns},
        {"request_rate", std::isinf(o.request_rate) ? json("inf") : json(o.request_rate)},
        {"burstiness", 1.0},
        {"max_concurrency", o.max_concurrency == 0 ? json(nullptr) : json(o.max_concurrency)},
        {"prompt_kind", o.prompt_kind},
        {"seed", o.seed},
        {"ignore_eos", true},
        {"temperature", 0.0},
        {"timer", "steady-clock"},
        {"timed_region",
         "per request: sent to last chunk carrying choices; duration: first send to last "
         "request done"}}},
      {"requests", std::move(requests)},
      {"summary",
       {{"completed", s.completed},
        {"failed", s.failed},
        {"duration_s", s.duration_s},
        {"input_tokens", s.input_tokens},
        {"output_tokens", s.output_tokens},
        {"request_throughput", s.request_throughput},
        {"output_throughput", s.output_throughput},
        {"total_token_throughput", s.total_token_throughput},
        {"max_concurrent", s.max_concurrent},
        {"cached_tokens", s.cached_tokens},
        {"prefix_cache_hit_rate", s.prefix_cache_hit_rate},
        {"ttft_ms", stats_json(s.ttft_ms)},
        {"tpot_ms", stats_json(s.tpot_ms)},
        {"itl_ms", stats_json(s.itl_ms)},
        {"e2el_ms", stats_json(s.e2el_ms)},
        {"ttft_ms_by_turn", [&] {
           json by_turn = json::array();
           for (const LatencyStats& st : s.ttft_ms_by_turn) by_turn.push_back(stats_json(st));
           return by_turn;
         }()}}},
      {"notes", r.notes},
  };
}

std::string format_serve(const ServeBenchResult& r) {
  const ServeBenchSummary& s = r.summary;
  std::string out;
  char line[160];
  auto row = [&](const char* name, double v, int prec = 2) {
    std::snprintf(line, sizeof line, "%-40s %-10.*f\n", name, prec, v);
    out += line;
  };
  auto head = [&](const char* title) {
    std::string t = std::string(" ") + title + " ";
    size_t pad = t.size() < 50 ? 50 - t.size() : 0;
    out += std::string(pad / 2, '-') + t + std::string(pad - pad / 2, '-') + "\n";
  };
  out += "============ Serving Benchmark Result ============\n";
  std::snprintf(line, sizeof line, "%-40s %-10d\n", "Successful requests:", s.completed);
  out += line;
  std::snprintf(line, sizeof line, "%-40s %-10d\n", "Failed requests:", s.failed);
  out += line;
  if (r.options.max_concurrency > 0) {
    std::snprintf(line, sizeof line, "%-40s %-10d\n", "Maximum request concurrency:",
                  r.options.max_concurrency);
    out += line;
  }
  row("Benchmark duration (s):", s.duration_s);
  std::snprintf(line, sizeof line, "%-40s %-10lld\n", "Total input tokens:",
                static_cast<long long>(s.input_tokens));
  out += line;
  std::snprintf(line, sizeof line, "%-40s %-10lld\n", "Total generated tokens:",
                static_cast<long long>(s.output_tokens));
  out += line;
  row("Request throughput (req/s):", s.request_throughput);
  row("Output token throughput (tok/s):", s.output_throughput);
  row("Total Token throughput (tok/s):", s.total_token_throughput);
  row("Prefix cache hit rate (%):", 100.0 * s.prefix_cache_hit_rate);
  auto block = [&](const char* title, const char* key, const std::optional<LatencyStats>& st) {
    if (!st) return;
    head(title);
    row(cat("Mean ", key, " (ms):").c_str(), st->mean);
    row(cat("Median ", key, " (ms):").c_str(), st->median);
    row(cat("P99 ", key, " (ms):").c_str(), st->p99);
  };
  block("Time to First Token", "TTFT", s.ttft_ms);
  block("Time per Output Token (excl. 1st token)", "TPOT", s.tpot_ms);
  block("Inter-token Latency", "ITL", s.itl_ms);
  block("End-to-end Latency", "E2EL", s.e2el_ms);
  if (!s.ttft_ms_by_turn.empty()) {
    head("Time to First Token by Turn");
    for (size_t k = 0; k < s.ttft_ms_by_turn.size(); ++k)
      row(cat("Median TTFT, turn ", k + 1, " (ms):").c_str(), s.ttft_ms_by_turn[k].median);
  }
  out += "==================================================\n";
  return out;
}

}  // namespace hayate::bench
