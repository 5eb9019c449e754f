// Internals shared by server.cpp (HTTP wiring, lifecycle) and
// generation.cpp (engine requests, responses, SSE streaming).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <httplib.h>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/connection.h"
#include "server/metrics.h"
#include "server/server.h"
#include "server/structured.h"

namespace hayate::server {

using Clock = std::chrono::steady_clock;

// One choice (of n) of a call, as the engine's events report it.
struct ChoiceState {
  RequestId id = 0;
  bool submitted = false;
  bool finished = false;
  std::string text;  // accumulated (non-streaming only)
  std::vector<SampleResult> logprobs;  // accumulated (non-streaming, logprobs wanted)
  std::vector<int32_t> token_ids;      // accumulated (non-streaming, return_token_ids)
  FinishReason finish = FinishReason::kLength;
  std::string error;
  int completion_tokens = 0;
  int cached_tokens = 0;  // prompt tokens found computed (usage.prompt_tokens_details)
  bool got_token = false;
  Clock::time_point last_token;
};

// One HTTP generation request and its n engine requests. Shared by the
// connection thread and the engine callbacks; everything below `m` is
// guarded by it.
struct Call {
  GenRequest req;
  std::string id;        // cmpl-... / chatcmpl-...
  int64_t created = 0;   // unix seconds
  Clock::time_point arrival;

  std::mutex m;
  std::condition_variable cv;
  std::vector<ChoiceState> choices;
  std::deque<std::pair<int, EngineEvent>> pending;  // streaming: events not yet written
  int unfinished = 0;
  // Per prompt, with prompt logprobs: entry i scores prompt token i + 1
  // (filled from the logits the prompt's first choice streams).
  std::vector<std::vector<SampleResult>> prompt_lp;
  std::optional<Clock::time_point> first_token;  // of any choice (the access log's TTFT)
};

// A request between its head and its access-log line.
struct AccessEntry {
  Clock::time_point start;
  std::string request_id;
  std::shared_ptr<Call> call;  // generation requests: tokens and TTFT at the end
  std::string prompt;          // --log-requests
};

struct OpenAIServer::Impl {
  explicit Impl(ServerOptions o) : opt(std::move(o)), log(opt.log.level, opt.log.out) {}

  ServerOptions opt;
  HttpServer http;
  std::thread listen_thread;
  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};
  ServingModel model;
  Limits limits;
  Metrics metrics;
  Log log;

  // Access log: requests whose line is not written yet, by their Request
  // (a request object lives on its connection thread's stack until then).
  std::mutex access_m;
  std::unordered_map<const httplib::Request*, AccessEntry> access;
  std::atomic<uint64_t> seed_counter{0};

  // Periodic stats (running while ready).
  std::thread stats_thread;
  std::mutex stats_m;
  std::condition_variable stats_cv;
  bool stats_stop = false;

  // Structured outputs: the model's vocabulary as the grammar sees it (made
  // at the first such request) and the compiled grammars.
  std::once_flag vocab_once;
  std::shared_ptr<const grammar::TokenVocab> token_vocab;
  GrammarCache grammars;
  StructuredLimits structured_limits;

  std::atomic<uint64_t> next_id{0};
  uint64_t id_nonce = 0;

  // Admission and the set of live calls (for abort at shutdown).
  mutable std::mutex admit_m;
  std::condition_variable drained_cv;
  int in_flight = 0;  // engine sequences submitted and not finished
  std::set<std::shared_ptr<Call>> calls;

  // server.cpp
  void install_routes();
  std::string new_id(const char* prefix);
  // CORS headers for the request's Origin; true when it was a preflight,
  // answered here.
  bool apply_cors(const httplib::Request& req, httplib::Response& res);
  // The pre-routing checks (CORS preflight, declared body size, encoding, API
  // key): Handled when they answered the request.
  httplib::Server::HandlerResponse pre_route(const httplib::Request& req, httplib::Response& res);
  void begin_access(const httplib::Request& req, std::string request_id);
  void end_access(const httplib::Request& req, const httplib::Response& res);
  void note_call(const httplib::Request& req, const std::shared_ptr<Call>& call);
  void stats_loop();

  // generation.cpp
  void handle_generate(const httplib::Request& req, httplib::Response& res,
                       const std::string& body, Endpoint endpoint);
  std::shared_ptr<Call> start_call(GenRequest r);
  // The compiled grammar of a request's structured output (400 when it
  // cannot compile).
  std::shared_ptr<const grammar::TokenTables> grammar_for(const StructuredSpec& spec);
  void on_event(const std::shared_ptr<Call>& call, int index, const EngineEvent& e);
  void abort_call(Call& call);
  void abort_all();
  void respond_once(Call& call, const httplib::Request& req, httplib::Response& res);
  void respond_stream(const std::shared_ptr<Call>& call, const httplib::Request& req,
                      httplib::Response& res);
  // The request body, decoded, at most opt.max_body_bytes (413 beyond).
  std::string read_body(const httplib::ContentReader& reader) const;
};

// JSON text that never throws on invalid UTF-8 (replaced by U+FFFD).
std::string dump(const nlohmann::json& j);
// Writes `e` as the response (status, OpenAI error body, Retry-After on 503).
void respond_error(httplib::Response& res, const ApiError& e);

}  // namespace hayate::server
