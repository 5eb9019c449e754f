// HTTP wiring: routes, authentication, error bodies, and the server's life
// (listen before the model is ready, drain on shutdown).
#include "server/server.h"

#include <ctime>

#include "core/check.h"
#include "core/rng.h"
#include "server/chat_page.h"
#include "server/server_impl.h"
#include "server/thread_pool.h"
#include "tokenizer/tokenizer.h"

namespace hayate::server {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void respond_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  if (e.status() == 503) res.set_header("Retry-After", "1");
  res.set_content(dump(e.to_json()), "application/json");
}

namespace {

// Compares without an early exit, so the time taken does not reveal how much
// of the key matched.
bool same_key(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i] ^ b[i]);
  return diff == 0;
}

// Runs a handler, answering every exception in OpenAI's error shape: our own
// ApiError as it says, hayate::Error (bad input caught deeper down) as 400,
// anything else as 500.
template <typename F>
void guarded(httplib::Response& res, F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    respond_error(res, e);
  } catch (const Error& e) {
    respond_error(res, bad_request(e.what()));
  } catch (const std::exception& e) {
    respond_error(res, ApiError(500, cat("internal error: ", e.what())));
  }
}

}  // namespace

std::string OpenAIServer::Impl::new_id(const char* prefix) {
  uint64_t n = next_id++;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx",
                static_cast<unsigned long long>(mix64(id_nonce ^ mix64(n))),
                static_cast<unsigned long long>(mix64(n ^ mix64(id_nonce))));
  return std::string(prefix) + buf;
}

bool OpenAIServer::Impl::apply_cors(const httplib::Request& req, httplib::Response& res) {
  const std::string origin = req.get_header_value("Origin");
  if (origin.empty()) return false;
  bool any = false, listed = false;
  for (const std::string& o : opt.allowed_origins) {
    any = any || o == "*";
    listed = listed || o == origin;
  }
  const bool preflight =
      req.method == "OPTIONS" && req.has_header("Access-Control-Request-Method");
  if (!any && !listed) {
    if (!preflight) return false;  // no CORS headers: the browser withholds the answer
    respond_error(res, ApiError(400, cat("Disallowed CORS origin '", origin, "'"), "",
                                "cors_origin_not_allowed"));
    return true;
  }
  res.set_header("Access-Control-Allow-Origin", any ? "*" : origin);
  if (!any) res.set_header("Vary", "Origin");
  if (!preflight) {
    res.set_header("Access-Control-Expose-Headers", "X-Request-Id");
    return false;
  }
  // As Starlette's CORSMiddleware (vLLM): any method and the headers asked for.
  res.status = 200;
  res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
  const std::string asked = req.get_header_value("Access-Control-Request-Headers");
  res.set_header("Access-Control-Allow-Headers", asked.empty() ? "*" : asked);
  res.set_header("Access-Control-Max-Age", "600");
  return true;
}

void OpenAIServer::Impl::begin_access(const httplib::Request& req, std::string request_id) {
  std::lock_guard lock(access_m);
  access[&req] = AccessEntry{Clock::now(), std::move(request_id), nullptr, {}};
}

void OpenAIServer::Impl::note_call(const httplib::Request& req, const std::shared_ptr<Call>& call) {
  std::string prompt;
  if (opt.log.log_requests) {
    for (const PromptIds& q : call->req.prompts) {  // a list of prompts: one after the other
      if (!prompt.empty()) prompt += "\n";
      prompt += q.echo_text.empty() ? model.tokenizer->decode(q.ids) : q.echo_text;
    }
    if (prompt.size() > 4096) prompt.resize(4096);
  }
  std::lock_guard lock(access_m);
  auto it = access.find(&req);
  if (it == access.end()) return;
  it->second.call = call;
  it->second.prompt = std::move(prompt);
}

// httplib's logger: runs once the response is written (a stream: at its end).
void OpenAIServer::Impl::end_access(const httplib::Request& req, const httplib::Response& res) {
  AccessRecord r;
  const Clock::time_point now = Clock::now();
  {
    std::lock_guard lock(access_m);
    auto it = access.find(&req);
    if (it != access.end()) {
      r.duration_s = std::chrono::duration<double>(now - it->second.start).count();
      r.request_id = std::move(it->second.request_id);
      r.prompt = std::move(it->second.prompt);
      if (const std::shared_ptr<Call>& call = it->second.call) {
        std::lock_guard call_lock(call->m);
        r.prompt_tokens = 0;
        for (const PromptIds& q : call->req.prompts) r.prompt_tokens += int(q.ids.size());
        r.completion_tokens = 0;
        for (const ChoiceState& c : call->choices) r.completion_tokens += c.completion_tokens;
        if (call->first_token)
          r.ttft_s = std::chrono::duration<double>(*call->first_token - call->arrival).count();
      }
      access.erase(it);
    }
  }
  if (!log.enabled(LogLevel::kInfo)) return;
  r.remote = cat(req.remote_addr, ":", req.remote_port);
  r.method = req.method;
  r.path = req.path;
  r.version = req.version;
  r.status = res.status;
  log.line(LogLevel::kInfo, format_access(r));
}

void OpenAIServer::Impl::stats_loop() {
  EngineStats prev = model.engine->stats();
  Clock::time_point t_prev = Clock::now();
  const auto interval = std::chrono::milliseconds(int64_t(opt.log.stats_interval_s * 1000.0));
  std::unique_lock lock(stats_m);
  while (!stats_cv.wait_for(lock, interval, [&] { return stats_stop; })) {
    const EngineStats s = model.engine->stats();
    const Clock::time_point t = Clock::now();
    const double dt = std::chrono::duration<double>(t - t_prev).count();
    const uint64_t gen = s.generation_tokens_total - prev.generation_tokens_total;
    // Tokens run through the model that were not decode steps: prompt
    // (prefill) tokens, recomputation after preemption included.
    const uint64_t computed = s.computed_tokens_total - prev.computed_tokens_total;
    const uint64_t prefill = computed > gen ? computed - gen : 0;
    const bool busy = s.num_running > 0 || s.num_waiting > 0 || gen > 0 || computed > 0;
    prev = s;
    t_prev = t;
    if (!busy || dt <= 0.0) continue;  // idle: no line, as vLLM
    StatsLine line;
    line.prompt_tps = double(prefill) / dt;
    line.generation_tps = double(gen) / dt;
    line.running = s.num_running;
    line.waiting = s.num_waiting;
    line.kv_usage = s.kv_usage;
    log.line(LogLevel::kInfo, format_stats(line));
  }
}

// Before any body byte: a body the library would refuse only after reading
// (or never, when chunked) is refused here by its declared length;
// unauthorised /v1/ requests never get their body read.
httplib::Server::HandlerResponse OpenAIServer::Impl::pre_route(const httplib::Request& req,
                                                               httplib::Response& res) {
  // The client's X-Request-Id is echoed (vLLM); a request without one gets one.
  std::string rid = req.get_header_value("X-Request-Id");
  if (rid.empty() || rid.size() > 256) rid = new_id("req-");
  res.set_header("X-Request-Id", rid);
  begin_access(req, std::move(rid));
  // CORS first: a browser's preflight carries no Authorization header.
  if (apply_cors(req, res)) return httplib::Server::HandlerResponse::Handled;
  if (req.get_header_value<uint64_t>("Content-Length") > opt.max_body_bytes) {
    respond_error(res, ApiError(413, cat("the request body is larger than ", opt.max_body_bytes,
                                         " bytes"), "", "request_too_large"));
    return httplib::Server::HandlerResponse::Handled;
  }
  const std::string enc = req.get_header_value("Content-Encoding");
  if (!enc.empty() && enc != "identity" && enc != "gzip" && enc != "deflate" && enc != "br") {
    respond_error(res, ApiError(415, cat("unsupported Content-Encoding '", enc,
                                         "' (gzip, deflate and br are accepted)"),
                                "", "unsupported_encoding"));
    return httplib::Server::HandlerResponse::Handled;
  }
  if (opt.api_key.empty() || req.path.rfind("/v1/", 0) != 0)
    return httplib::Server::HandlerResponse::Unhandled;
  const std::string auth = req.get_header_value("Authorization");
  const std::string bearer = "Bearer ";
  if (auth.rfind(bearer, 0) == 0 && same_key(auth.substr(bearer.size()), opt.api_key))
    return httplib::Server::HandlerResponse::Unhandled;
  respond_error(res, ApiError(401, "invalid or missing API key (Authorization: Bearer KEY)", "",
                              "invalid_api_key"));
  return httplib::Server::HandlerResponse::Handled;
}

void OpenAIServer::Impl::install_routes() {
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    end_access(req, res);
  });

  // Runs once the head is read, before any body byte (pre_route). A request
  // answered here never has its body read, and the connection layer closes
  // such a connection after the response (connection.h), so the response
  // says "Connection: close": a client reusing the connection would send its
  // next request into a closed socket ("other side closed"). httplib writes
  // that header for a request that asks for it; it hands this handler a const
  // view of its own mutable request.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const auto handled = pre_route(req, res);
    if (handled == httplib::Server::HandlerResponse::Handled &&
        req.get_header_value<uint64_t>("Content-Length") > 0)
      close_after_response(const_cast<httplib::Request&>(req));
    return handled;
  });

  // Errors httplib produces itself (unknown path, oversized body, malformed
  // request) get an OpenAI body too; our own error bodies are left alone.
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message;
    std::string code;
    switch (res.status) {
      case 404: message = cat("no route for ", req.method, " ", req.path); code = "not_found"; break;
      case 413:
        message = cat("the request body is larger than ", opt.max_body_bytes, " bytes");
        code = "request_too_large";
        break;
      case 415:
        message = cat("unsupported Content-Encoding '", req.get_header_value("Content-Encoding"),
                      "' (gzip, deflate and br are accepted)");
        break;
      default: message = cat("HTTP ", res.status); break;
    }
    respond_error(res, ApiError(res.status, message, "", code));
    return httplib::Server::HandlerResponse::Handled;
  }));

  http.set_exception_handler([](const httplib::Request&, httplib::Response& res,
                                std::exception_ptr) {
    respond_error(res, ApiError(500, "internal error"));
  });

  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (ready && !draining) {
      res.status = 200;
      return;
    }
    respond_error(res, ApiError(503, draining ? "the server is shutting down"
                                              : "the model is still loading"));
  });

  http.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::string(chat_page_html()), "text/html; charset=utf-8");
  });

  http.Get("/version", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump({{"version", "hayate 0.1"}}), "application/json");
  });

  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    guarded(res, [&] {
      EngineStats s = ready ? model.engine->stats() : EngineStats{};
      std::string text = metrics.render(s, [&] {
        std::lock_guard lock(admit_m);
        return in_flight;
      }(), model.max_model_len, opt.served_model_names.front());
      res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
    });
  });

  http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    guarded(res, [&] {
      if (!ready) throw ApiError(503, "the model is still loading", "", "loading");
      json data = json::array();
      for (const std::string& name : opt.served_model_names)
        data.push_back({{"id", name},
                        {"object", "model"},
                        {"created", int64_t(std::time(nullptr))},
                        {"owned_by", "hayate"},
                        {"root", model.root},
                        {"parent", nullptr},
                        {"max_model_len", model.max_model_len},
                        {"permission", json::array()}});
      res.set_content(dump({{"object", "list"}, {"data", data}}), "application/json");
    });
  });

  // Bodies are read through ContentReader so their decoded size is bounded
  // (the library's own reader inflates compressed bodies without a limit).
  using Reader = httplib::ContentReader;
  http.Post("/v1/completions",
            [this](const httplib::Request& req, httplib::Response& res, const Reader& reader) {
    guarded(res, [&] { handle_generate(req, res, read_body(reader), Endpoint::kCompletions); });
  });
  http.Post("/v1/chat/completions",
            [this](const httplib::Request& req, httplib::Response& res, const Reader& reader) {
    guarded(res, [&] { handle_generate(req, res, read_body(reader), Endpoint::kChat); });
  });

  http.Post("/tokenize",
            [this](const httplib::Request&, httplib::Response& res, const Reader& reader) {
    guarded(res, [&] {
      std::string body = read_body(reader);
      if (!ready) throw ApiError(503, "the model is still loading", "", "loading");
      const json j = parse_json_body(body);
      const nlohmann::ordered_json ordered = parse_json_body_ordered(body);
      json out = handle_tokenize(j, limits, *model.tokenizer, &ordered);
      res.set_content(dump(out), "application/json");
    });
  });
  http.Post("/detokenize",
            [this](const httplib::Request&, httplib::Response& res, const Reader& reader) {
    guarded(res, [&] {
      std::string body = read_body(reader);
      if (!ready) throw ApiError(503, "the model is still loading", "", "loading");
      json out = handle_detokenize(parse_json_body(body), limits, *model.tokenizer);
      res.set_content(dump(out), "application/json");
    });
  });
}

std::string OpenAIServer::Impl::read_body(const httplib::ContentReader& reader) const {
  std::string body;
  bool too_large = false;
  const bool ok = reader([&](const char* data, size_t n) {
    if (n > opt.max_body_bytes - body.size()) {
      too_large = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  if (too_large)
    throw ApiError(413, cat("the request body is larger than ", opt.max_body_bytes, " bytes"), "",
                   "request_too_large");
  if (!ok)
    throw bad_request("the request body could not be read (truncated, or invalid chunked or "
                      "compressed data)");
  return body;
}

OpenAIServer::OpenAIServer(ServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl& s = *impl_;
  HAYATE_CHECK(!s.opt.served_model_names.empty(), "serve: no served model name");
  HAYATE_CHECK(s.opt.max_queued >= 0, "--max-queued must be >= 0");
  HAYATE_CHECK(s.opt.keep_alive_timeout_s >= 1, "--keep-alive-timeout must be >= 1");
  HAYATE_CHECK(s.opt.max_connections >= 1, "--max-connections must be >= 1");
  HAYATE_CHECK(s.opt.port >= 0 && s.opt.port <= 65535, "--port must be in [0, 65535], got ",
               s.opt.port);
  HAYATE_CHECK(s.opt.max_body_bytes >= 1, "--max-body-bytes must be >= 1");
  HAYATE_CHECK(s.opt.head_timeout_s > 0 && s.opt.head_timeout_s <= 3600,
               "--request-head-timeout must be in (0, 3600] seconds");
  HAYATE_CHECK(s.opt.request_timeout_s >= s.opt.head_timeout_s && s.opt.request_timeout_s <= 3600,
               "--request-timeout must be in [--request-head-timeout, 3600] seconds");
  HAYATE_CHECK(s.opt.max_grammar_compile_ms >= 1 && s.opt.max_grammar_compile_ms <= 3600000,
               "--max-grammar-compile-ms must be in [1, 3600000]");
  s.structured_limits.max_compile_ms = s.opt.max_grammar_compile_ms;
  s.limits = s.opt.limits;
  s.id_nonce = mix64(uint64_t(std::time(nullptr)) ^ uint64_t(reinterpret_cast<uintptr_t>(&s)));
  const size_t max_threads = s.opt.max_connections;
  s.http.new_task_queue = [max_threads] { return new GrowingThreadPool(max_threads); };
  s.http.set_payload_max_length(s.opt.max_body_bytes);
  s.http.set_keep_alive_max_count(1000);
  s.http.set_keep_alive_timeout(s.opt.keep_alive_timeout_s);
  auto ms = [](double sec) { return std::chrono::milliseconds(int64_t(sec * 1000.0)); };
  s.http.limits.max_body_bytes = s.opt.max_body_bytes;
  s.http.limits.head_timeout = ms(s.opt.head_timeout_s);
  s.http.limits.request_timeout = ms(s.opt.request_timeout_s);
  s.http.set_tcp_nodelay(true);  // SSE chunks are small; do not wait to coalesce them
  s.install_routes();
}

OpenAIServer::~OpenAIServer() { shutdown(std::chrono::milliseconds(0)); }

int OpenAIServer::listen() {
  Impl& s = *impl_;
  int port = s.opt.port;
  if (port == 0) {
    port = s.http.bind_to_any_port(s.opt.host);
    HAYATE_CHECK(port > 0, "serve: cannot bind ", s.opt.host, " to any port");
  } else {
    HAYATE_CHECK(s.http.bind_to_port(s.opt.host, port), "serve: cannot bind ", s.opt.host, ":",
                 port, " (in use, or not a local address)");
  }
  s.http.widen_backlog(1024);
  s.listen_thread = std::thread([&s] { s.http.listen_after_bind(); });
  return port;
}

void OpenAIServer::set_ready(const ServingModel& model) {
  Impl& s = *impl_;
  HAYATE_CHECK(model.engine && model.tokenizer, "serve: set_ready without an engine");
  s.model = model;
  s.limits.max_model_len = model.max_model_len;
  s.limits.vocab_size = model.vocab_size;
  s.ready = true;
  if (s.opt.log.stats && s.log.enabled(LogLevel::kInfo) && s.opt.log.stats_interval_s > 0)
    s.stats_thread = std::thread([&s] { s.stats_loop(); });
}

int OpenAIServer::in_flight() const {
  std::lock_guard lock(impl_->admit_m);
  return impl_->in_flight;
}

void OpenAIServer::shutdown(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  if (s.stats_thread.joinable()) {
    {
      std::lock_guard lock(s.stats_m);
      s.stats_stop = true;
    }
    s.stats_cv.notify_all();
    s.stats_thread.join();
  }
  if (!s.listen_thread.joinable()) return;
  s.draining = true;
  s.http.stop_accepting();
  if (s.ready) {
    std::unique_lock lock(s.admit_m);
    if (!s.drained_cv.wait_for(lock, grace, [&] { return s.in_flight == 0; })) {
      lock.unlock();
      s.abort_all();
      lock.lock();
      // Aborts take effect at the engine's next step.
      s.drained_cv.wait(lock, [&] { return s.in_flight == 0; });
    }
  }
  // The accept loop has ended; this waits for connection threads to write
  // their last bytes (idle keep-alive connections close within their timeout).
  s.listen_thread.join();
  s.http.stop();
}

}  // namespace hayate::server
