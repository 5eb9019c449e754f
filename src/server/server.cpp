// HTTP wiring: routes, authentication, error bodies, and the server's life
// (listen before the model is ready, drain on shutdown).
#include "server/server.h"

#include <ctime>

#include "core/check.h"
#include "core/rng.h"
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

void OpenAIServer::Impl::install_routes() {
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (opt.api_key.empty() || req.path.rfind("/v1/", 0) != 0)
      return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string bearer = "Bearer ";
    if (auth.rfind(bearer, 0) == 0 && same_key(auth.substr(bearer.size()), opt.api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    respond_error(res, ApiError(401, "invalid or missing API key (Authorization: Bearer KEY)", "",
                                "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
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

  http.Get("/version", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump({{"version", "hayate 0.1"}}), "application/json");
  });

  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    guarded(res, [&] {
      EngineStats s = ready ? model.engine->stats() : EngineStats{};
      std::string text = metrics.render(s, [&] {
        std::lock_guard lock(admit_m);
        return in_flight;
      }(), model.max_model_len);
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

  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] { handle_generate(req, res, Endpoint::kCompletions); });
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] { handle_generate(req, res, Endpoint::kChat); });
  });

  http.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      if (!ready) throw ApiError(503, "the model is still loading", "", "loading");
      json out = handle_tokenize(parse_json_body(req.body), limits, *model.tokenizer);
      res.set_content(dump(out), "application/json");
    });
  });
  http.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    guarded(res, [&] {
      if (!ready) throw ApiError(503, "the model is still loading", "", "loading");
      json out = handle_detokenize(parse_json_body(req.body), limits, *model.tokenizer);
      res.set_content(dump(out), "application/json");
    });
  });
}

OpenAIServer::OpenAIServer(ServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {
  Impl& s = *impl_;
  HAYATE_CHECK(!s.opt.served_model_names.empty(), "serve: no served model name");
  HAYATE_CHECK(s.opt.max_queued >= 0, "--max-queued must be >= 0");
  HAYATE_CHECK(s.opt.keep_alive_timeout_s >= 1, "--keep-alive-timeout must be >= 1");
  HAYATE_CHECK(s.opt.max_connections >= 1, "--max-connections must be >= 1");
  s.limits = s.opt.limits;
  s.id_nonce = mix64(uint64_t(std::time(nullptr)) ^ uint64_t(reinterpret_cast<uintptr_t>(&s)));
  const size_t max_threads = s.opt.max_connections;
  s.http.new_task_queue = [max_threads] { return new GrowingThreadPool(max_threads); };
  s.http.set_payload_max_length(s.opt.max_body_bytes);
  s.http.set_keep_alive_max_count(1000);
  s.http.set_keep_alive_timeout(s.opt.keep_alive_timeout_s);
  s.http.set_read_timeout(10, 0);
  s.http.set_write_timeout(10, 0);
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
}

int OpenAIServer::in_flight() const {
  std::lock_guard lock(impl_->admit_m);
  return impl_->in_flight;
}

void OpenAIServer::shutdown(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
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
