// `hayate serve`: an OpenAI-compatible HTTP server over the batching Engine.
//
// Life of a served request: the HTTP thread of its connection parses and
// validates the body (protocol.h), admits it against the bounded queue (503
// with Retry-After when full), submits one engine request per choice (n), and
// then either waits for the final events (non-streaming) or turns events into
// server-sent-event chunks as the engine's stepping thread delivers them. A
// stream whose client goes away aborts its engine requests, which frees their
// KV blocks at the next step.
//
// The listener starts before the model is loaded: /health answers 503 until
// set_ready(), then 200.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/log.h"
#include "server/protocol.h"

namespace hayate {
class Engine;
class Tokenizer;
}  // namespace hayate

namespace hayate::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                 // 0: any free port (listen() returns it)
  std::string api_key;             // when set, /v1/* needs "Authorization: Bearer KEY"
  std::vector<std::string> served_model_names;  // first one is reported; others accepted
  // Admission bound: requests are refused with 503 once the sequences the
  // server holds would exceed max_num_seqs (running) + max_queued (waiting).
  int max_queued = 256;
  size_t max_body_bytes = 16u << 20;  // larger bodies (after decoding) get 413
  // A request's head must arrive within this from its first byte, the whole
  // request within request_timeout_s; 408 otherwise.
  double head_timeout_s = 10.0;
  double request_timeout_s = 60.0;
  size_t max_connections = 2048;      // connection threads; more connections wait
  // Idle keep-alive connections close after this; it also bounds how long
  // shutdown waits for them once requests are done.
  int keep_alive_timeout_s = 5;
  Limits limits;                      // n, stop and logprob bounds (model fields set by set_ready)
  // CORS: origins whose browser pages may call the API ("*": any, vLLM's
  // default); preflight OPTIONS requests are answered for them.
  std::vector<std::string> allowed_origins = {"*"};
  LogOptions log;
  // Requests without a seed draw theirs from this (vLLM's --seed makes a
  // run's sampling repeatable); unset: from the OS's random device.
  std::optional<uint64_t> seed;
  ToolOptions tools;  // --enable-auto-tool-choice, --tool-call-parser
  // vLLM's --reasoning-parser: "" (none) or "qwen3" (reasoning.h); chat
  // answers then carry reasoning_content beside content.
  std::string reasoning_parser;
  // Wall time of one structured-output or tools grammar's compile
  // (--max-grammar-compile-ms; StructuredLimits::max_compile_ms): past it
  // the request is a 400.
  int64_t max_grammar_compile_ms = 10000;
};

// The loaded model, handed over once it is ready. Everything must outlive the
// server's shutdown().
struct ServingModel {
  Engine* engine = nullptr;          // started (background loop) by the caller
  const Tokenizer* tokenizer = nullptr;
  int max_model_len = 0;
  int vocab_size = 0;
  int max_num_seqs = 0;
  GenerationDefaults defaults;
  std::string root;                  // what --model named
};

class OpenAIServer {
 public:
  explicit OpenAIServer(ServerOptions options);
  ~OpenAIServer();  // shuts down with no grace if still running
  OpenAIServer(const OpenAIServer&) = delete;
  OpenAIServer& operator=(const OpenAIServer&) = delete;

  // Binds and starts accepting on a background thread; returns the port.
  // Throws Error when the address cannot be bound.
  int listen();

  // The model is loaded: generation endpoints and /health turn on.
  void set_ready(const ServingModel& model);

  // Stops accepting connections and new requests (503), lets in-flight
  // requests finish for up to `grace`, aborts the rest (streams end with
  // finish_reason "abort"), then closes every connection and returns.
  void shutdown(std::chrono::milliseconds grace);

  int in_flight() const;  // engine sequences the server is waiting on

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace hayate::server
