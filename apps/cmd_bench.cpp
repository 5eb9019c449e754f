// `hayate bench`: the article's experiment on one backend (see src/bench).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <iostream>

#include "apps/common.h"
#include "bench/build_info.h"
#include "bench/result.h"
#include "bench/runner.h"
#include "bench/serve_client.h"
#include "bench/table.h"
#include "bench/throughput.h"
#include "bench/workload.h"
#include "core/check.h"

namespace hayate {

namespace {

// --explain: why each request took its time. Per run the prefill, the decode
// ms/token, the bytes one decode step reads (every weight once, plus the K/V
// rows of the run's mean context) and the bandwidth that achieves, against
// the read probe.
void explain_runs(std::ostream& os, const bench::BenchResult& r, const ModelConfig& c,
                  int kv_bytes, double probe_gbs) {
  const double weights = r.model.weight_bytes_per_token.value_or(0.0);
  const double kv_per_pos = 2.0 * c.kv_dim() * c.num_layers * kv_bytes;
  os << "explain (decode bytes per token = weights " << weights / 1e9 << " GB + K/V "
     << kv_per_pos / 1e3 << " KB per cached position):\n";
  char line[256];
  for (const bench::RunRecord& run : r.runs) {
    if (!run.ok() || !run.decode_ms_per_token) continue;
    const double ctx = run.prompt_tokens + run.new_tokens / 2.0;
    const double bytes = weights + kv_per_pos * ctx;
    const double gbs = bytes / (*run.decode_ms_per_token * 1e-3) / 1e9;
    const std::string share =
        probe_gbs > 0 ? cat(int(100.0 * gbs / probe_gbs + 0.5), "% of the read probe") : "";
    std::snprintf(line, sizeof line,
                  "  run %2d: prefill %7.2f ms (%d tokens), decode %.3f ms/token, %.3f GB/token, "
                  "%.0f GB/s %s\n",
                  run.run, run.prefill_ms.value_or(0.0), run.prompt_tokens,
                  *run.decode_ms_per_token, bytes / 1e9, gbs, share.c_str());
    os << line;
  }
}


struct BenchArgs {
  ModelArgs model;
  std::string prompts = "same";
  int runs = 0;
  int max_length = 128;
  int max_new_tokens = 0;
  bool chat = false;
  bool respect_eos = false;
  int warmup = 0;
  int summary_from = 3;
  std::string json;
  std::string commit;
  std::string print_config;
  bool no_ids = false;
  bool explain = false;

  std::string mode = "latency";  // latency (the article) | throughput | serve
  // --mode throughput: the batching engine, offline.
  std::string preset;
  bench::ThroughputOptions throughput;
  std::string json_schema_file;  // throughput: --json-schema
  double gpu_memory_fraction = 0.9;
  // --mode serve: a client against any OpenAI-compatible endpoint.
  bench::ServeBenchOptions serve;
  std::string request_rate = "inf";
  bool engine_knobs_given = false;  // --max-num-seqs or --max-num-batched-tokens on the line
};

// --mode throughput: many requests through the continuous-batching engine.
void run_throughput_mode(const BenchArgs& a) {
  bench::ThroughputOptions t = a.throughput;
  if (!a.preset.empty()) bench::apply_throughput_preset(a.preset, t, a.engine_knobs_given);
  const std::string backend_name = resolve_backend(a.model);
  const std::string spec = resolve_model(a.model, backend_name);
  Model model = load_model_args(spec, a.model);
  std::unique_ptr<Tokenizer> tok;
  if (!a.json_schema_file.empty()) {
    std::ifstream f(a.json_schema_file, std::ios::binary);
    HAYATE_CHECK(f.good(), "cannot read --json-schema ", a.json_schema_file);
    t.json_schema.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  if (!t.dataset.empty() || !t.json_schema.empty()) {
    tok = std::make_unique<Tokenizer>(
        Tokenizer::load(a.model.tokenizer.empty() ? model.tokenizer_dir : a.model.tokenizer));
  }
  HAYATE_CHECK(a.model.max_context >= 0, "--max-context must be >= 0, got ", a.model.max_context);
  BatchBackendOptions bo;
  // The longest request: the shared prefix and, in a chat, every turn's ids and answer.
  const int longest = t.prefix_len + t.turns * (t.input_len + t.output_len);
  bo.max_model_len = a.model.max_context > 0 ? a.model.max_context : longest;
  bo.max_num_seqs = t.max_num_seqs;
  bo.max_num_batched_tokens = t.max_num_batched_tokens;
  bo.gpu_memory_fraction = a.gpu_memory_fraction;
  bo.dtype = resolve_dtype(a.model, model.config);
  bo.kv_cache_dtype = resolve_kv_cache_dtype(a.model);
  bo.tensor_parallel_size = a.model.tensor_parallel_size;
  std::unique_ptr<BatchBackend> backend = make_batch_backend(backend_name, model, bo);
  bench::ThroughputResult r = bench::run_throughput(*backend, tok.get(), t, &std::cerr);
  r.engine_version = bench::hayate_version();
  r.commit = a.commit.empty() ? bench::build_commit() : a.commit;
  const DeviceInfo di = backend->device_info();
  r.system.device = di.name;
  r.system.driver = di.driver_version;
  r.system.cuda = di.cuda_runtime;
  r.system.sm_count = di.sm_count;
  r.system.memory_gb = di.memory_gb;
  r.system.host = bench::host_name();
  r.model.spec = spec;
  r.model.dtype = backend_name == "cpu" ? "float32" : std::string(dtype_name(bo.dtype));
  r.model.quantization = quantization_name(model);
  r.model.kv_cache_dtype = a.model.kv_cache_dtype == "auto" ? "auto" : "fp8";
  r.model.seed = a.model.seed;
  std::cout << bench::format_throughput(r) << std::flush;
  if (!a.json.empty()) {
    std::ofstream out(a.json);
    HAYATE_CHECK(out.good(), a.json, ": cannot write");
    out << bench::to_json(r).dump(2) << "\n";
    std::cerr << "hayate bench: wrote " << a.json << "\n";
  }
}

// --mode serve: the serving benchmark client (vllm bench serve's figures).
void run_serve_mode(const BenchArgs& a) {
  bench::ServeBenchOptions o = a.serve;
  if (o.api_key.empty())
    if (const char* k = std::getenv("OPENAI_API_KEY")) o.api_key = k;
  HAYATE_CHECK(!o.endpoint.empty(), "--mode serve needs --endpoint http://HOST:PORT/v1");
  bench::ThroughputOptions t = a.throughput;
  if (!a.preset.empty()) {  // the preset's requests, sent to the endpoint
    bench::apply_throughput_preset(a.preset, t, true);
    o.num_prompts = t.num_prompts;
    o.input_len = t.input_len;
    o.output_len = t.output_len;
    o.prefix_len = t.prefix_len;
    if (o.max_concurrency == 0) o.max_concurrency = t.concurrency;
  }
  o.turns = t.turns;
  if (a.request_rate == "inf") {
    o.request_rate = std::numeric_limits<double>::infinity();
  } else {
    char* end = nullptr;
    o.request_rate = std::strtod(a.request_rate.c_str(), &end);
    HAYATE_CHECK(end && *end == '\0' && o.request_rate > 0 && std::isfinite(o.request_rate),
                 "--request-rate: expected a positive number or inf, got '", a.request_rate, "'");
  }
  bench::ServeBenchResult r = bench::run_serve_bench(o, &std::cerr);
  r.engine_version = bench::hayate_version();
  r.commit = a.commit.empty() ? bench::build_commit() : a.commit;
  std::cout << bench::format_serve(r) << std::flush;
  if (!a.json.empty()) {
    std::ofstream out(a.json);
    HAYATE_CHECK(out.good(), a.json, ": cannot write");
    out << bench::to_json(r).dump(2) << "\n";
    std::cerr << "hayate bench: wrote " << a.json << "\n";
  }
}

void run_bench_command(const BenchArgs& a) {
  if (a.mode == "throughput") return run_throughput_mode(a);
  if (a.mode == "serve") return run_serve_mode(a);
  if (!a.print_config.empty()) {
    std::string name = a.print_config;
    if (name.rfind("dummy:", 0) == 0) name = name.substr(6);
    std::cout << dummy_config_json(name) << "\n";
    return;
  }
  // Process age at each point: from /proc when available, else from here.
  const auto cmd_start = std::chrono::steady_clock::now();
  const bool have_proc = bench::seconds_since_process_start().has_value();
  auto since_start = [&]() -> double {
    if (auto s = bench::seconds_since_process_start()) return *s;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - cmd_start).count();
  };

  // Arguments first, so a typo fails before 16 GB of weights are made.
  bench::Workload w = bench::make_workload(a.prompts, a.runs);
  bench::BenchOptions opt;
  opt.max_length = a.max_length;
  opt.max_new_tokens = a.max_new_tokens;
  opt.chat = a.chat;
  opt.respect_eos = a.respect_eos;
  opt.warmup = a.warmup;
  opt.summary_from_run = a.summary_from;
  opt.record_ids = !a.no_ids;
  HAYATE_CHECK(a.max_new_tokens > 0 || a.max_length > 1, "--max-length must be > 1");

  // The tokenizer first, and the prompts against max_length with it: bad
  // lengths and unknown dummy names fail before any weight is made.
  auto tt = std::chrono::steady_clock::now();
  std::unique_ptr<Tokenizer> tok = load_tokenizer_only(a.model);
  double tokenizer_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - tt).count();
  for (const auto& p : w.prompts)
    (void)bench::new_tokens_for(opt, int(bench::prompt_ids(*tok, p, opt.chat).size()));

  // Then the model and backend, as load() does, reusing this tokenizer.
  const std::string backend_name = resolve_backend(a.model);
  const std::string spec = resolve_model(a.model, backend_name);
  std::cerr << "hayate bench: loading " << spec << " on " << backend_name << "\n" << std::flush;
  auto t0 = std::chrono::steady_clock::now();
  Model model = load_model_args(spec, a.model);
  LocalEngine local = make_local_engine(backend_name, model, tok.get(), a.model, 1);
  double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  BatchBackend& backend = *local.backend;

  double bw = backend.measure_read_bandwidth_gbs();
  std::cerr << "hayate bench: loaded in " << load_s << " s";
  if (bw > 0.0) std::cerr << "; measured read bandwidth " << bw << " GB/s";
  std::cerr << "\n" << std::flush;

  bench::BenchResult r =
      bench::run_bench(*local.engine, *tok, w, opt, since_start, &std::cerr);
  DeviceInfo di = backend.device_info();
  r.engine = "hayate";
  r.engine_version = bench::hayate_version();
  r.backend = backend.name();
  r.commit = a.commit.empty() ? bench::build_commit() : a.commit;
  r.created_utc = bench::utc_now_iso8601();
  r.system.device = di.name;
  r.system.driver = di.driver_version;
  r.system.cuda = di.cuda_runtime;
  r.system.sm_count = di.sm_count;
  r.system.memory_gb = di.memory_gb;
  r.system.host = bench::host_name();
  r.model.spec = spec;
  r.model.dtype =
      backend.name() == "cpu" ? "float32" : std::string(dtype_name(resolve_dtype(a.model, model.config)));
  r.model.quantization = quantization_name(model);
  r.model.kv_cache_dtype = a.model.kv_cache_dtype == "auto" ? "auto" : "fp8";
  r.model.seed = a.model.seed;
  r.model.weight_bytes_per_token = backend.weight_bytes_per_token();
  r.startup.tokenizer_s = tokenizer_s;
  r.startup.load_s = load_s;
  if (bw > 0.0) r.startup.read_bandwidth_gbs = bw;
  if (!have_proc) r.notes.push_back("process start unknown (/proc): times since the command began");
  r.summary = bench::summarize(r);

  bench::print_bench(std::cout, r);
  if (a.explain) explain_runs(std::cout, r, model.config, backend.name() == "cpu" ? 4 : 2, bw);
  // What the model wrote (random weights make random text; EOS is ignored).
  if (!r.runs.empty() && !r.runs.front().output_ids.empty()) {
    // Ids past the tokenizer's vocabulary (the model's padding rows, which a
    // random model samples) have no text, as in the engine's stream decoder.
    std::vector<int32_t> ids;
    for (int32_t id : r.runs.front().output_ids)
      if (id < tok->vocab_size()) ids.push_back(id);
    std::cout << "text of run 1: " << tok->decode(ids, true) << "\n";
  }
  std::cout << std::flush;
  if (!a.json.empty()) {
    bench::write_result_file(r, a.json);
    std::cerr << "hayate bench: wrote " << a.json << "\n";
  }
  int failed = int(r.runs.size()) - r.summary.runs_ok;
  HAYATE_CHECK(failed == 0, failed, " of ", r.runs.size(), " runs failed (see the table)");
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand(
      "bench",
      "the article's experiment: one request at a time, greedy, EOS ignored; per-run table, "
      "mean of runs 3..N, decode ms/token, GB/s of weight streaming");
  add_model_options(cmd, a->model);
  cmd->add_option("--prompts", a->prompts,
                  "same (the article's prompt x runs), varied (its eleven different prompts) "
                  "or a file: one prompt per line, or a JSON array")
      ->capture_default_str();
  cmd->add_option("--runs", a->runs, "timed requests (default 10 for same, one per prompt else)");
  cmd->add_option("--max-length", a->max_length,
                  "prompt + new tokens, HF semantics (the article: 128)")
      ->capture_default_str();
  cmd->add_option("--max-new-tokens", a->max_new_tokens, "new tokens per request (overrides "
                  "--max-length)");
  cmd->add_flag("--chat,!--no-chat", a->chat,
                "wrap each prompt in the chat template (default off: the article tokenized the "
                "plain prompt, 11 tokens with BOS)");
  cmd->add_flag("--respect-eos", a->respect_eos, "stop at EOS (default: ignore it)");
  cmd->add_option("--warmup", a->warmup, "untimed requests before run 1")->capture_default_str();
  cmd->add_option("--summary-from", a->summary_from, "first run of the summary mean")
      ->capture_default_str();
  cmd->add_option("--json", a->json, "write the full result (docs/bench_schema.md) to FILE");
  cmd->add_option("--commit", a->commit, "record this commit instead of the built-in one");
  cmd->add_flag("--no-ids", a->no_ids, "leave generated ids out of the JSON");
  cmd->add_flag("--explain", a->explain,
                "per request: prefill ms, decode ms/token, bytes per token, GB/s, share of the "
                "read probe");
  cmd->add_option("--print-config", a->print_config,
                  "print a dummy architecture's config.json (e.g. llama-3.1-8b) and exit");
  cmd->add_option("--mode", a->mode,
                  "latency (the article's experiment), throughput (the batching engine, "
                  "offline) or serve (a client against an OpenAI-compatible endpoint)")
      ->check(CLI::IsMember({"latency", "throughput", "serve"}))
      ->capture_default_str();
  auto& t = a->throughput;
  cmd->add_option("--preset", a->preset,
                  "throughput workload preset: llmib-{128,1024}-b{1,16,32,64}, max-load-128, "
                  "shared-prefix-2000, chat-5-turn");
  cmd->add_option("--num-prompts", t.num_prompts, "throughput/serve: requests");
  cmd->add_option("--input-len", t.input_len, "throughput/serve: prompt tokens");
  cmd->add_option("--output-len", t.output_len, "throughput/serve: new tokens per request");
  cmd->add_option("--concurrency", t.concurrency, "throughput: most requests in flight (0: all)");
  cmd->add_option("--dataset", t.dataset, "throughput: prompt file instead of random ids");
  cmd->add_option("--json-schema", a->json_schema_file,
                  "throughput: every request's output follows this JSON Schema (file)");
  cmd->add_option("--prefix-len", t.prefix_len,
                  "throughput/serve: random ids (serve: or words) shared by every prompt (a "
                  "system prompt) before its --input-len own");
  cmd->add_option("--turns", t.turns,
                  "throughput/serve: chats of this many turns, each resending the conversation "
                  "and --input-len new ids (serve: words) (--num-prompts chats)");
  cmd->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", t.enable_prefix_caching,
                "throughput: reuse the KV blocks of computed prompt prefixes (default on)");
  auto* seqs = cmd->add_option("--max-num-seqs", t.max_num_seqs,
                               "throughput: sequences per engine step (max-load-128: 1024)")
                   ->capture_default_str();
  auto* step_tokens = cmd->add_option("--max-num-batched-tokens", t.max_num_batched_tokens,
                                      "throughput: tokens per engine step (max-load-128: 16384)")
                          ->capture_default_str();
  cmd->add_option("--gpu-memory-utilization,--gpu-memory-fraction", a->gpu_memory_fraction,
                  "throughput on cuda: share of GPU memory for weights + KV pool");
  cmd->add_option("--endpoint", a->serve.endpoint, "serve: http://HOST:PORT/v1");
  cmd->add_option("--request-rate", a->request_rate, "serve: requests/s (Poisson) or inf");
  cmd->add_option("--max-concurrency", a->serve.max_concurrency, "serve: most requests in flight");
  cmd->add_option("--prompt-kind", a->serve.prompt_kind,
                  "serve: random token ids, or random English words (chats resend the answer's "
                  "ids, which the server returns as vLLM's return_token_ids, or its text)")
      ->check(CLI::IsMember({"ids", "words"}))
      ->capture_default_str();
  cmd->add_option("--api-key", a->serve.api_key,
                  "serve: bearer token (default: $OPENAI_API_KEY, as vllm bench serve)");
  cmd->add_option("--label", a->serve.label, "serve: what the endpoint runs (hayate, vllm, ...)");
  cmd->add_option("--served-model", a->serve.model, "serve: model name (default: the first)");
  cmd->callback([a, seqs, step_tokens] {
    // A preset's engine knobs give way to both given on the command line.
    a->engine_knobs_given = seqs->count() > 0 || step_tokens->count() > 0;
    // --num-prompts/--input-len/--output-len serve both offline modes.
    a->serve.num_prompts = a->throughput.num_prompts;
    a->serve.input_len = a->throughput.input_len;
    a->serve.output_len = a->throughput.output_len;
    a->serve.prefix_len = a->throughput.prefix_len;
    a->throughput.warmup = a->warmup;  // --warmup serves the offline throughput mode too
    run_bench_command(*a);
  });
}

}  // namespace hayate
