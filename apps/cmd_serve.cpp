// hayate serve: the OpenAI-compatible server (src/server) over the batching
// engine. The listener comes up first (/health says 503 while the model
// loads), then the model, the engine loop, and readiness. SIGTERM or SIGINT
// stop new requests, give in-flight ones --shutdown-grace seconds, abort the
// rest, and exit 0.
#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "apps/common.h"
#include "core/check.h"
#include "engine/engine.h"
#include "server/log.h"
#include "server/server.h"

namespace hayate {

namespace {

struct ServeArgs {
  ModelArgs model;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  std::vector<std::string> served_names;
  int max_queued = 256;
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;
  int num_kv_blocks = 0;
  int block_size = 16;
  size_t max_body_bytes = 16u << 20;
  size_t max_connections = 2048;
  double shutdown_grace_s = 30.0;
  int keep_alive_timeout_s = 5;
  double head_timeout_s = 10.0;
  int64_t max_grammar_compile_ms = 10000;
  double request_timeout_s = 60.0;
  int max_n = 16;
  double gpu_memory_fraction = 0.9;
  bool enable_prefix_caching = true;
  std::string chat_template;             // a file, a template name, or the template itself
  bool trust_request_chat_template = false;
  std::string reasoning_parser;          // "" or qwen3 (server/reasoning.h)
  std::string generation_config = "auto";  // auto | vllm | a folder
  std::string log_level = "info";
  bool log_requests = false;
  bool disable_log_stats = false;
  std::string allowed_origins = "[\"*\"]";
  bool gpu_memory_given = false;
  bool seed_given = false;  // --seed also seeds requests that give none
  bool enable_auto_tool_choice = false;
  std::string tool_call_parser;
};

// vLLM's --chat-template: a file, else one of the model's named templates
// (HF's chat_template argument: "tool_use", ...), else the template text
// itself when it reads as one (holds "{{" or "{%").
std::string read_chat_template(const std::string& given, const Tokenizer& tok) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(given, ec)) {
    std::ifstream in(given, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    HAYATE_CHECK(in.good() || in.eof(), "--chat-template: cannot read ", given);
    return ss.str();
  }
  const std::vector<std::string> names = tok.chat_template_names();
  if (std::find(names.begin(), names.end(), given) != names.end()) return given;
  std::string known;
  for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
  HAYATE_CHECK(given.find("{{") != std::string::npos || given.find("{%") != std::string::npos,
               "--chat-template: '", given, "' is neither a file nor a Jinja template",
               names.empty() ? std::string() : cat(" nor one of the model's templates (", known, ")"));
  return given;
}

// --allowed-origins: a JSON list as vLLM takes it, or comma-separated.
std::vector<std::string> parse_origins(const std::string& given) {
  std::vector<std::string> out;
  if (!given.empty() && given.front() == '[') {
    nlohmann::json j = nlohmann::json::parse(given, nullptr, false);
    HAYATE_CHECK(j.is_array(), "--allowed-origins: not a JSON list of strings: ", given);
    for (const auto& o : j) {
      HAYATE_CHECK(o.is_string(), "--allowed-origins: not a JSON list of strings: ", given);
      out.push_back(o.get<std::string>());
    }
    return out;
  }
  std::stringstream ss(given);
  for (std::string o; std::getline(ss, o, ',');)
    if (!o.empty()) out.push_back(o);
  return out;
}

int run_serve(const ServeArgs& a) {
  // Signals go to sigwait below, not to whichever thread happens to run:
  // block them before any thread (httplib's, OpenMP's, the engine's) starts.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // A client that closes its socket must not kill the server on the next write.
  std::signal(SIGPIPE, SIG_IGN);

  // Everything the command line names is checked, and the model's config,
  // tokenizer and template read, before the port is bound; only the weights
  // (the long part) load behind a listening /health that answers 503.
  HAYATE_CHECK(!a.model.model.empty(),
               "serve: no model given (hayate serve MODEL, or --model: a checkpoint directory, "
               "a Hugging Face id ORG/NAME in the local cache, or dummy:NAME for random weights)");
  const server::LogLevel level = server::parse_log_level(a.log_level);
  HAYATE_CHECK(a.gpu_memory_fraction > 0.0 && a.gpu_memory_fraction <= 1.0,
               "--gpu-memory-utilization must be in (0, 1], got ", a.gpu_memory_fraction);
  HAYATE_CHECK(a.max_num_seqs >= 1, "--max-num-seqs must be >= 1, got ", a.max_num_seqs);
  HAYATE_CHECK(a.max_num_batched_tokens >= 1, "--max-num-batched-tokens must be >= 1, got ",
               a.max_num_batched_tokens);
  HAYATE_CHECK(a.block_size >= 1 && a.block_size <= 1024, "--block-size must be in [1, 1024]");
  HAYATE_CHECK(a.num_kv_blocks >= 0, "--num-kv-blocks must be >= 0");
  HAYATE_CHECK(a.max_n >= 1, "--max-n must be >= 1");
  const std::vector<std::string> origins = parse_origins(a.allowed_origins);
  const std::string backend_name = resolve_backend(a.model);
  const std::string spec = resolve_model(a.model, backend_name);
  if (backend_name == "cpu" && a.gpu_memory_given)
    std::printf("hayate serve: note: --gpu-memory-utilization has no effect on the cpu backend "
                "(its KV pool is --num-kv-blocks)\n");
  Model model = load_model_args(spec, a.model);
  // A context past the model's positions would size the KV pool for it
  // (--max-context 100000000 ended in std::bad_alloc).
  HAYATE_CHECK(a.model.max_context >= 0 &&
                   a.model.max_context <= model.config.max_position_embeddings,
               "--max-model-len must be in [0, ", model.config.max_position_embeddings,
               "] (0: the default), got ", a.model.max_context);
  const DType dtype = resolve_dtype(a.model, model.config);
  HAYATE_CHECK(backend_name == "cpu" || dtype != DType::F32,
               "--dtype float32: the cuda backend runs float16 or bfloat16");
  Tokenizer tokenizer =
      Tokenizer::load(a.model.tokenizer.empty() ? model.tokenizer_dir : a.model.tokenizer);
  std::string chat_template;  // HF's chat_template argument for every request
  if (!a.chat_template.empty()) {
    chat_template = read_chat_template(a.chat_template, tokenizer);
    try {
      (void)tokenizer.apply_chat_template_json(R"([{"role": "user", "content": "hello"}])", true,
                                               "", chat_template);
    } catch (const Error& e) {
      fail(cat("--chat-template: ", e.what()));
    }
  }
  server::GenerationDefaults defaults;
  if (a.generation_config == "auto") {
    if (!model.is_dummy()) defaults = server::GenerationDefaults::load(spec);
  } else if (a.generation_config != "vllm") {
    HAYATE_CHECK(std::filesystem::is_regular_file(std::filesystem::path(a.generation_config) /
                                                  "generation_config.json"),
                 "--generation-config: no generation_config.json in '", a.generation_config,
                 "' (expected auto, vllm or a folder)");
    defaults = server::GenerationDefaults::load(a.generation_config);
  }

  server::ServerOptions so;
  so.host = a.host;
  so.port = a.port;
  so.api_key = a.api_key;
  if (so.api_key.empty())
    if (const char* k = std::getenv("VLLM_API_KEY")) so.api_key = k;  // as vllm serve
  so.served_model_names = a.served_names;
  if (so.served_model_names.empty()) so.served_model_names.push_back(a.model.model);
  so.max_queued = a.max_queued;
  so.max_body_bytes = a.max_body_bytes;
  so.max_connections = a.max_connections;
  so.keep_alive_timeout_s = a.keep_alive_timeout_s;
  so.head_timeout_s = a.head_timeout_s;
  so.max_grammar_compile_ms = a.max_grammar_compile_ms;
  so.request_timeout_s = a.request_timeout_s;
  so.limits.max_n = a.max_n;
  so.limits.chat_template = chat_template;
  so.limits.trust_request_chat_template = a.trust_request_chat_template;
  so.allowed_origins = origins;
  if (a.seed_given) so.seed = a.model.seed;
  so.reasoning_parser = a.reasoning_parser;
  so.log.level = level;
  so.tools.enable_auto_tool_choice = a.enable_auto_tool_choice;
  so.tools.parser = server::parse_tool_parser_name(a.tool_call_parser);
  HAYATE_CHECK(!a.enable_auto_tool_choice || so.tools.parser != server::ToolParser::kNone,
               "--enable-auto-tool-choice needs --tool-call-parser (llama3_json or hermes)");
  so.log.log_requests = a.log_requests;
  so.log.stats = !a.disable_log_stats;
  server::OpenAIServer srv(so);
  const int port = srv.listen();
  std::printf("hayate serve: listening on http://%s:%d (loading %s on %s)\n", a.host.c_str(), port,
              spec.c_str(), backend_name.c_str());
  std::fflush(stdout);

  BatchBackendOptions bo;
  bo.block_size = a.block_size;
  bo.num_blocks = a.num_kv_blocks;
  bo.max_model_len = a.model.max_context;
  bo.max_num_seqs = a.max_num_seqs;
  bo.max_num_batched_tokens = a.max_num_batched_tokens;
  bo.dtype = dtype;
  bo.kv_cache_dtype = resolve_kv_cache_dtype(a.model);
  bo.tensor_parallel_size = a.model.tensor_parallel_size;
  bo.gpu_memory_fraction = a.gpu_memory_fraction;
  server::LoadProgress progress(level <= server::LogLevel::kInfo);
  bo.on_load_progress = [&progress](uint64_t done, uint64_t total) {
    progress.update(done, total);
  };
  std::unique_ptr<BatchBackend> backend = make_batch_backend(backend_name, model, bo);
  progress.finish();
  EngineOptions eo;
  eo.max_num_seqs = a.max_num_seqs;
  eo.max_num_batched_tokens = a.max_num_batched_tokens;
  eo.enable_prefix_caching = a.enable_prefix_caching;
  Engine engine(*backend, &tokenizer, eo);
  engine.start();

  server::ServingModel sm;
  sm.engine = &engine;
  sm.tokenizer = &tokenizer;
  sm.max_model_len = backend->max_model_len();
  sm.vocab_size = model.config.vocab_size;
  sm.max_num_seqs = a.max_num_seqs;
  sm.root = spec;
  sm.defaults = defaults;
  srv.set_ready(sm);
  std::printf("hayate serve: ready (max_model_len %d, %d KV blocks of %d tokens)\n",
              sm.max_model_len, backend->num_blocks(), backend->block_size());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  std::printf("hayate serve: signal %d, draining (grace %.1f s)\n", sig, a.shutdown_grace_s);
  std::fflush(stdout);
  srv.shutdown(std::chrono::milliseconds(int64_t(a.shutdown_grace_s * 1000.0)));
  engine.stop();
  std::printf("hayate serve: stopped\n");
  std::fflush(stdout);
  return 0;
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching");
  cmd->footer(
      "Sampling fields: temperature, top_p, top_k, min_p, seed; presence_penalty and "
      "frequency_penalty (OpenAI, over the generated ids), repetition_penalty (HF/vLLM, over "
      "prompt + generated ids). logprobs (completions: N; chat: logprobs + top_logprobs, N <= "
      "20) are those of the model's raw distribution: log_softmax of the logits before "
      "penalties and temperature (vLLM's default raw_logprobs). logit_bias (OpenAI), min_tokens "
      "and include_stop_str_in_output (vLLM). Requests with penalties, logit_bias, min_tokens or "
      "logprobs sample on the host from the step's logits row; the others keep the backend's "
      "own sampler.");
  add_model_options(cmd, args->model, /*serving=*/true);
  cmd->add_option("--host", args->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", args->port, "port (0: any free port, printed at start)")
      ->capture_default_str();
  cmd->add_option("--api-key", args->api_key,
                  "require Authorization: Bearer KEY on /v1/* (default: $VLLM_API_KEY)");
  cmd->add_option("--served-model-name,--alias,-a", args->served_names,
                  "model name(s) clients use (default: the --model value)");
  cmd->add_option("--max-queued", args->max_queued,
                  "requests beyond --max-num-seqs that may wait; more get 503")
      ->capture_default_str();
  cmd->add_option("--max-num-seqs,--parallel", args->max_num_seqs,
                  "most sequences in one engine step")
      ->capture_default_str();
  cmd->add_option("--max-num-batched-tokens,--batch-size,-b", args->max_num_batched_tokens,
                  "most tokens in one engine step")
      ->capture_default_str();
  cmd->add_option("--num-kv-blocks", args->num_kv_blocks,
                  "CPU: KV blocks in the pool (0: enough for 4 sequences of max_model_len)")
      ->capture_default_str();
  auto* gpu_mem = cmd->add_option("--gpu-memory-utilization,--gpu-memory-fraction",
                                  args->gpu_memory_fraction,
                                  "GPU: share of device memory for weights, workspace and the KV "
                                  "pool (no effect on the cpu backend)")
                      ->capture_default_str();
  cmd->add_option("--block-size", args->block_size, "tokens per KV block")->capture_default_str();
  cmd->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", args->enable_prefix_caching,
                "reuse the KV blocks of prompt prefixes earlier requests computed (default on)");
  cmd->add_option("--chat-template", args->chat_template,
                  "chat template: a Jinja file, the name of one of the model's templates "
                  "(tool_use, ...), or the template itself (default: the model's; tool_use "
                  "for requests with tools when the model names one)");
  cmd->add_flag("--trust-request-chat-template", args->trust_request_chat_template,
                "accept a chat_template in requests (vLLM's flag; refused with a 400 "
                "otherwise)");
  cmd->add_option("--reasoning-parser", args->reasoning_parser,
                  "split <think>...</think> out of chat answers as reasoning_content (vLLM's "
                  "flag): qwen3")
      ->check(CLI::IsMember({"qwen3"}));
  cmd->add_option("--generation-config", args->generation_config,
                  "sampling defaults: auto (the model's generation_config.json), vllm (none) or "
                  "a folder holding generation_config.json")
      ->capture_default_str();
  cmd->add_option("--log-level,--uvicorn-log-level", args->log_level,
                  "trace, debug, info (access log and stats), warning, error or critical")
      ->capture_default_str();
  cmd->add_flag("--enable-log-requests,--log-requests", args->log_requests,
                "also log each request's prompt text (never logged otherwise)");
  cmd->add_flag("--enable-auto-tool-choice", args->enable_auto_tool_choice,
                "tools: let the model decide (tool_choice auto, the default with tools); needs "
                "--tool-call-parser");
  cmd->add_option("--tool-call-parser", args->tool_call_parser,
                  "tools: how tool calls are read from free text under auto: llama3_json "
                  "(Llama 3.x JSON) or hermes (<tool_call> blocks: Qwen2.5, Qwen3)")
      ->check(CLI::IsMember({"llama3_json", "hermes"}));
  cmd->add_flag("--disable-log-stats", args->disable_log_stats,
                "no periodic engine stats line (every 10 s while busy)");
  cmd->add_option("--allowed-origins", args->allowed_origins,
                  "CORS: origins allowed to call the API, a JSON list or comma-separated "
                  "(\"*\": any)")
      ->capture_default_str();
  cmd->add_option("--max-body-bytes", args->max_body_bytes, "larger request bodies get 413")
      ->capture_default_str();
  cmd->add_option("--max-connections", args->max_connections,
                  "connection threads; more connections wait")
      ->capture_default_str();
  cmd->add_option("--keep-alive-timeout", args->keep_alive_timeout_s,
                  "seconds an idle connection stays open (also bounds the wait at shutdown)")
      ->capture_default_str();
  cmd->add_option("--max-grammar-compile-ms", args->max_grammar_compile_ms,
                  "wall time of one structured-output or tools grammar's compile (ms); 400 beyond")
      ->capture_default_str();
  cmd->add_option("--request-head-timeout", args->head_timeout_s,
                  "seconds from a request's first byte to the end of its headers; 408 beyond")
      ->capture_default_str();
  cmd->add_option("--request-timeout", args->request_timeout_s,
                  "seconds from a request's first byte to the end of its body; 408 beyond")
      ->capture_default_str();
  cmd->add_option("--max-n", args->max_n, "most choices (n) per request")->capture_default_str();
  cmd->add_option("--shutdown-grace", args->shutdown_grace_s,
                  "seconds in-flight requests get to finish after SIGTERM before they are aborted")
      ->capture_default_str();
  auto* seed = cmd->get_option("--seed");
  cmd->callback([args, gpu_mem, seed] {
    args->gpu_memory_given = gpu_mem->count() > 0;
    args->seed_given = seed->count() > 0;
    HAYATE_CHECK(args->shutdown_grace_s >= 0.0, "--shutdown-grace must be >= 0");
    HAYATE_CHECK(args->port >= 0 && args->port <= 65535, "--port must be in [0, 65535], got ",
                 args->port);
    int rc = run_serve(*args);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace hayate
